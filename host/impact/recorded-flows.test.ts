import { describe, it, expect } from 'vitest';
import { parseRecordedFlows, recordedFlowsFromValues } from './recorded-flows.js';

const RECORD = { src: 'x/a', dst: 'y/b', port: 80, protocol: 'TCP', family: 4, verdict: 'allow', count: 3, egress: { stage: '', action: 'Default' }, node: 'n1', someFutureField: [1] };

describe('recorded flows', () => {
  it('reads the agent\'s records, ignoring the fields a flow is not decided by', () => {
    const { flows, skipped } = parseRecordedFlows(`${JSON.stringify(RECORD)}\n`, 'f.jsonl');
    expect(skipped).toEqual([]);
    expect(flows).toHaveLength(1);
    expect(flows[0]).toMatchObject({ count: 3, recordedVerdict: 'allow', flow: { src: 'x/a', dst: 'y/b', port: 80, protocol: 'TCP', line: 1 } });
  });

  it('reads kwp eval\'s flow lines, protocol TCP when absent', () => {
    const { flows } = parseRecordedFlows('# a comment\n\n{"src":"x/a","dst":"10.0.0.1","port":53,"protocol":"udp"}\n{"src":"x/a","dst":"y/b","port":81}\n', 'f.jsonl');
    expect(flows.map((f) => [f.flow.protocol, f.flow.port, f.count, f.flow.line])).toEqual([['UDP', 53, 1, 3], ['TCP', 81, 1, 4]]);
  });

  it('decides lines of one flow once, their counts added', () => {
    const { flows } = recordedFlowsFromValues([RECORD, { ...RECORD, count: 4, verdict: 'deny' }, { ...RECORD, port: 81 }], 'ring');
    expect(flows.map((f) => [f.flow.port, f.count, f.recordedVerdict])).toEqual([[80, 7, 'deny'], [81, 3, 'allow']]);
  });

  it('skips records of protocols without ports, saying where', () => {
    const { flows, skipped } = parseRecordedFlows(`${JSON.stringify({ ...RECORD, protocol: 'ICMP', port: 0 })}\n${JSON.stringify(RECORD)}\n`, 'f.jsonl');
    expect(flows).toHaveLength(1);
    expect(skipped).toEqual(['f.jsonl: flow 1 (line 1): protocol ICMP has no ports, and policies here decide TCP, UDP and SCTP flows only; skipped']);
  });

  it.each([
    ['{"src":"x/a","dst":"y/b"}', 'f.jsonl: flow 2 (line 2): field "port" is missing'],
    ['{"dst":"y/b","port":80}', 'f.jsonl: flow 2 (line 2): field "src" is missing'],
    ['{"src":"x/a","dst":"y/b","port":80,"protocol":"TPC"}', 'f.jsonl: flow 2 (line 2): field "protocol" must be "TCP", "UDP" or "SCTP", not "TPC"'],
    ['{"src":"x/a","dst":"y/b","port":70000}', 'f.jsonl: flow 2 (line 2): field "port" must be a port number from 1 to 65535'],
    ['{"src":"x","dst":"y/b","port":80}', 'f.jsonl: flow 2 (line 2): field "src" is "x"; write "namespace/pod"'],
    ['{"src":"x/a","dst":"y/b","port":80,"count":0}', 'f.jsonl: flow 2 (line 2): field "count" must be a whole number of connections, at least 1, not number 0'],
    ['{"src":"x/a","dst":"y/b","port":80,"verdict":"drop"}', 'f.jsonl: flow 2 (line 2): field "verdict" must be "allow" or "deny", not "drop"'],
    ['{"src":"x/a",', 'f.jsonl: flow 2 (line 2): not valid JSON'],
  ])('names the file, line and field of a bad line: %s', (line, message) => {
    expect(() => parseRecordedFlows(`${JSON.stringify(RECORD)}\n${line}\n`, 'f.jsonl')).toThrowError(message);
  });

  it('refuses a file with no flows', () => {
    expect(() => parseRecordedFlows('\n# nothing\n', 'f.jsonl')).toThrowError('f.jsonl holds no flows, only blank lines and comments');
    expect(() => parseRecordedFlows('', 'f.jsonl')).toThrowError('f.jsonl holds no flows');
  });
});
