// The flow log: JSON lines appended per interval, rotated by size so a busy
// node's log stays bounded; and the per-policy verdict counts behind
// kwp_policy_verdicts_total stay under their cap.
import { describe, it, expect } from 'vitest';
import { mkdtempSync, readFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FlowLogWriter } from './flow-log-writer.js';
import { PolicyVerdictCounts } from './policy-verdicts.js';
import type { FlowRecord } from './flow-record.js';
import { KwpError } from '../errors.js';

const record = (port: number): FlowRecord => ({
  src: 'x/a', dst: 'y/b', port, protocol: 'TCP', family: 4, srcPort: 40000, srcWorkload: 'x/Pod/a', dstWorkload: 'y/Pod/b',
  srcLabels: {}, dstLabels: {}, srcNamespaceLabels: {}, dstNamespaceLabels: {}, dstPortName: '', verdict: 'allow',
  egress: { stage: '', policy: '', rule: '', action: 'Default' }, ingress: { stage: '', policy: '', rule: '', action: 'Default' },
  audit: [], count: 1, firstSeen: '2026-12-01T13:40:00.000Z', lastSeen: '2026-12-01T13:40:00.000Z', revision: 1, node: 'n',
});

describe('the flow log', () => {
  it('writes one JSON line per record, and rotates to FILE.1 .. FILE.keep by size, dropping the oldest', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-flowlog-'));
    const file = join(dir, 'flows.jsonl');
    const w = new FlowLogWriter({ target: file, maxBytes: 2048, keep: 2 });
    const lineBytes = JSON.stringify(record(1)).length + 1;
    const perFile = Math.floor(2048 / lineBytes);
    for (let port = 1; port <= perFile * 4; port++) w.write([record(port)]);
    expect(readdirSync(dir).sort()).toEqual(['flows.jsonl', 'flows.jsonl.1', 'flows.jsonl.2']);
    for (const f of ['flows.jsonl', 'flows.jsonl.1', 'flows.jsonl.2']) expect(readFileSync(join(dir, f)).length).toBeLessThanOrEqual(2048);
    const live = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as FlowRecord);
    expect(live.at(-1)!.port).toBe(perFile * 4);
    // The oldest lines (the first file's) are gone.
    const kept = ['flows.jsonl.2', 'flows.jsonl.1', 'flows.jsonl'].flatMap((f) => readFileSync(join(dir, f), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as FlowRecord).port));
    expect(kept[0]).toBeGreaterThan(1);
    expect(kept).toEqual([...kept].sort((a, b) => a - b));
    expect(existsSync(`${file}.3`)).toBe(false);
  });

  it('writes to stdout for -', () => {
    const out: string[] = [];
    new FlowLogWriter({ target: '-', stdout: (t) => out.push(t) }).write([record(80), record(81)]);
    expect(out.join('').trim().split('\n').map((l) => JSON.parse(l).port)).toEqual([80, 81]);
  });

  it('refuses a file it cannot write, naming the flag and the path', () => {
    let err: unknown;
    try { new FlowLogWriter({ target: '/nonexistent-dir/flows.jsonl' }); } catch (e) { err = e; }
    expect((err as KwpError).code).toBe('KWP_ERR_FLOW_LOG');
    expect((err as KwpError).message).toContain('--flow-log /nonexistent-dir/flows.jsonl');
  });
});

describe('per-policy verdict counts', () => {
  it('keeps at most the cap of label sets apart and folds the rest into policy="other", counting them', () => {
    const counts = new PolicyVerdictCounts(3);
    for (let i = 0; i < 5; i++) counts.add({ stage: 'np', policy: `y/p${i}`, rule: 'ingress rule 0', direction: 'ingress', verdict: 'accept' }, 2);
    counts.add({ stage: 'np', policy: 'y/p0', rule: 'ingress rule 0', direction: 'ingress', verdict: 'accept' });
    const entries = counts.entries();
    expect(entries.filter((e) => e.labels.policy !== 'other').map((e) => [e.labels.policy, e.count])).toEqual([['y/p0', 3], ['y/p1', 2], ['y/p2', 2]]);
    expect(entries.find((e) => e.labels.policy === 'other')).toMatchObject({ labels: { rule: 'other' }, count: 4 });
    expect(counts.droppedLabelSets).toBe(2);
  });
});
