import { describe, it, expect, beforeAll } from 'vitest';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kinds } from './contract.js';
import { KwpError } from './errors.js';
import { DEFAULT_SOURCE_PORT, parseFlows, readFlowsFile, resolveFlow, toFlowSpec, type FlowSpec } from './flows.js';
import { formatIP } from './net/ip.js';
import { ManifestSource } from './sources/manifest-files.js';
import { ClusterState } from './state/cluster-state.js';
import { stateFromObjects } from './eval.js';

const FIXTURES = fileURLToPath(new URL('../test/fixtures/manifests/', import.meta.url));

function flowsError(text: string): KwpError {
  try {
    parseFlows(text, 'flows.json');
  } catch (err) {
    return err as KwpError;
  }
  throw new Error('parsing was expected to fail');
}

describe('parseFlows', () => {
  it('reads a JSON array, filling in the protocol and source port', () => {
    const flows = parseFlows(
      JSON.stringify([
        { src: 'prod/web', dst: 'prod/db', port: 5432 },
        { src: '10.0.0.1', dst: '10.0.0.2', protocol: 'udp', port: 53, srcPort: 5353 },
      ]),
      'flows.json',
    );
    expect(flows).toEqual([
      { src: 'prod/web', dst: 'prod/db', protocol: 'TCP', port: 5432, srcPort: DEFAULT_SOURCE_PORT, file: 'flows.json', index: 1 },
      { src: '10.0.0.1', dst: '10.0.0.2', protocol: 'UDP', port: 53, srcPort: 5353, file: 'flows.json', index: 2 },
    ]);
  });

  it('reads JSON Lines, skipping blank and # comment lines, and remembers each flow\'s line', () => {
    const flows = parseFlows(
      '# web to db\n{"src": "prod/web", "dst": "prod/db", "port": 5432}\n\n{"src": "a/b", "dst": "2001:db8::1", "port": 443, "protocol": "SCTP", "name": "out", "expect": "Deny"}\n',
      'flows.jsonl',
    );
    expect(flows.map((f) => [f.index, f.line, f.protocol, f.name, f.expect])).toEqual([
      [1, 2, 'TCP', undefined, undefined],
      [2, 4, 'SCTP', 'out', 'deny'],
    ]);
  });

  it('the fixture flows file parses', async () => {
    const flows = await readFlowsFile(join(FIXTURES, 'cluster-flows.jsonl'));
    expect(flows).toHaveLength(5);
  });

  const errorCases: Array<[string, string, RegExp]> = [
    ['an empty file', '  \n', /^flows.json holds no flows/],
    ['an empty array', '[]', /^flows.json holds an empty list/],
    ['a JSON syntax error', '[{"src": "a/b",}]', /^flows.json is not valid JSON \(.*line 1, column 16\); fix the syntax/],
    ['a JSON Lines syntax error', '{"src": "a/b", "dst": "c/d", "port": 1}\n{"src": \n', /^flows.json: flow 2 \(line 2\): not valid JSON/],
    ['a flow that is not an object', '[1]', /^flows.json: flow 1: a flow is an object like/],
    ['a missing src', '[{"dst": "a/b", "port": 80}]', /^flows.json: flow 1: field "src" must be "namespace\/pod" or an IP address, not undefined/],
    ['a src that is neither pod nor IP', '[{"src": "web", "dst": "a/b", "port": 80}]', /field "src" is "web"; write "namespace\/pod"/],
    ['a dst with too many slashes', '[{"src": "a/b", "dst": "a/b/c", "port": 80}]', /field "dst" is "a\/b\/c"/],
    ['a CIDR as an end', '[{"src": "a/b", "dst": "10.0.0.0/8", "port": 80}]', /field "dst" is a CIDR \(10.0.0.0\/8\); a flow end is one address, e.g. 10.0.0.0/],
    ['an address that is not one', '[{"src": "10.0.0.300", "dst": "a/b", "port": 80}]', /field "src" is "10.0.0.300"/],
    ['mixed families', '[{"src": "10.0.0.1", "dst": "::1", "port": 80}]', /field "src" is IPv4 but field "dst" is IPv6/],
    ['an unknown protocol', '[{"src": "a/b", "dst": "c/d", "protocol": "ICMP", "port": 80}]', /field "protocol" must be "TCP", "UDP" or "SCTP", not "ICMP"/],
    ['a missing port', '[{"src": "a/b", "dst": "c/d"}]', /field "port" is missing/],
    ['a port out of range', '[{"src": "a/b", "dst": "c/d", "port": 70000}]', /field "port" must be a port number from 1 to 65535, not number 70000/],
    ['a port given as text', '[{"src": "a/b", "dst": "c/d", "port": "80"}]', /field "port" must be a port number .*not "80"/],
    ['a fractional source port', '[{"src": "a/b", "dst": "c/d", "port": 80, "srcPort": 1.5}]', /field "srcPort" must be a port number/],
    ['an unknown field', '[{"src": "a/b", "dst": "c/d", "dport": 80}]', /unknown field "dport"; a flow has "src", "dst", "protocol", "port", "srcPort"/],
    ['a bad expectation', '[{"src": "a/b", "dst": "c/d", "port": 80, "expect": "maybe"}]', /field "expect" must be "allow" or "deny"/],
    ['a second flow that is wrong', '[{"src": "a/b", "dst": "c/d", "port": 80}, {"src": "a/b", "dst": "c/d", "port": 0}]', /^flows.json: flow 2: field "port"/],
  ];

  it.each(errorCases)('%s is a KWP_ERR_FLOWS naming the file, the flow and the field', (_name, text, message) => {
    const err = flowsError(text);
    expect(err).toBeInstanceOf(KwpError);
    expect(err.code).toBe('KWP_ERR_FLOWS');
    expect(err.message).toMatch(message);
  });

  it('a flows file that does not exist is a KWP_ERR_FLOWS saying so', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kwp-flows-'));
    await expect(readFlowsFile(join(dir, 'missing.json'))).rejects.toMatchObject({
      code: 'KWP_ERR_FLOWS',
      message: `flows file ${join(dir, 'missing.json')} does not exist; give the path of a JSON or JSON Lines file`,
    });
    await writeFile(join(dir, 'ok.json'), '[{"src": "a/b", "dst": "c/d", "port": 1}]');
    expect(await readFlowsFile(join(dir, 'ok.json'))).toHaveLength(1);
  });
});

describe('resolveFlow', () => {
  let state: ClusterState;
  beforeAll(async () => {
    state = new ClusterState();
    await new ManifestSource(join(FIXTURES, 'cluster')).start(state);
    state.apply(Kinds.Pod, {
      type: 'upsert',
      object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'pending', namespace: 'dev' }, status: { phase: 'Pending' } },
    });
  });

  const flow = (fields: Record<string, unknown>): FlowSpec => parseFlows(JSON.stringify([{ port: 80, ...fields }]), 'flows.json')[0];

  it.each([
    ['two pods', { src: 'prod/web', dst: 'prod/db', port: 5432 }, 4, '10.0.1.10', '10.0.2.20', 'web', 'db'],
    ['a pod to an external address', { src: 'prod/web', dst: '203.0.113.7', port: 443 }, 4, '10.0.1.10', '203.0.113.7', 'web', undefined],
    ['an address that is a pod', { src: '10.0.1.30', dst: 'prod/db', port: 5432 }, 4, '10.0.1.30', '10.0.2.20', 'client', 'db'],
    ['a pod to an IPv6 address picks the pod\'s IPv6 address', { src: 'prod/web', dst: 'fd00:10::20', port: 5432 }, 6, 'fd00:10::10', 'fd00:10::20', 'web', 'db'],
    ['an IPv6 address to a pod', { src: 'fd00:10::10', dst: 'prod/db', port: 5432 }, 6, 'fd00:10::10', 'fd00:10::20', 'web', 'db'],
    ['a host-networked pod is seen as its node', { src: 'default/agent', dst: 'prod/web', port: 8080 }, 4, '192.168.10.1', '10.0.1.10', undefined, 'web'],
  ])('%s resolves to the packet the agent would see', (_name, fields, family, src, dst, srcName, dstName) => {
    const resolved = resolveFlow(flow(fields), state);
    expect(resolved.packet.family).toBe(family);
    expect(formatIP(resolved.packet.src)).toBe(src);
    expect(formatIP(resolved.packet.dst)).toBe(dst);
    expect(resolved.srcPod?.name).toBe(srcName);
    expect(resolved.dstPod?.name).toBe(dstName);
  });

  it('the packet carries the protocol number and both ports', () => {
    const { packet } = resolveFlow(flow({ src: 'prod/web', dst: 'default/dns', protocol: 'UDP', port: 53, srcPort: 5300 }), state);
    expect(packet).toMatchObject({ protocol: 17, srcPort: 5300, dstPort: 53, icmpType: 0, icmpCode: 0 });
    expect(packet.src).toHaveLength(4);
  });

  it('a flow built by a program with a protocol outside the three is refused, not turned into a broken packet', () => {
    const built = { ...flow({ src: 'prod/web', dst: 'prod/db' }), protocol: 'ICMP' as never };
    expect(() => resolveFlow(built, state)).toThrow(/field "protocol" must be "TCP", "UDP" or "SCTP", not "ICMP"/);
  });

  it('a flow object built by a program is validated like one read from a file', () => {
    expect(toFlowSpec({ src: 'a/b', dst: 'c/d', port: 80 }, '<api>', 3)).toMatchObject({ protocol: 'TCP', srcPort: DEFAULT_SOURCE_PORT, index: 3 });
    expect(() => toFlowSpec({ src: 'a/b', dst: 'c/d', port: -1 }, '<api>', 3)).toThrow('<api>: flow 3: field "port"');
  });

  it('a host-networked end comes with a note saying why it is not a pod', () => {
    const { notes } = resolveFlow(flow({ src: 'default/agent', dst: 'prod/web' }), state);
    expect(notes).toEqual(['src default/agent is host-networked: the agent sees its traffic as the node\'s, not a pod\'s']);
  });

  it.each([
    ['an unknown pod', { src: 'prod/nope', dst: 'prod/db' }, /^flows.json: flow 1: field "src": there is no pod prod\/nope; check the namespace and name/],
    ['a pod without an IP', { src: 'prod/web', dst: 'dev/pending' }, /field "dst": pod dev\/pending has no IP; add status.podIPs/],
    ['a single-stack pod against an IPv6 address', { src: 'dev/client', dst: 'fd00::1' }, /field "src": pod dev\/client has no IPv6 address, but field "dst" is IPv6/],
    ['a dual-stack pod to a single-stack pod in the other family', { src: 'fd00:10::10', dst: 'dev/client' }, /field "dst": pod dev\/client has no IPv6 address/],
  ])('%s is a KWP_ERR_FLOWS naming the flow and the pod', (_name, fields, message) => {
    let caught: unknown;
    try {
      resolveFlow(flow(fields), state);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(KwpError);
    expect((caught as KwpError).code).toBe('KWP_ERR_FLOWS');
    expect((caught as KwpError).message).toMatch(message);
  });
});

describe('resolveFlow between two pods named by reference', () => {
  const pod = (name: string, ips: string[]) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'n', labels: { app: name } }, spec: { containers: [{ name: 'c' }] }, status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) } });
  const stateOf = () => stateFromObjects([pod('dual', ['10.9.0.1', 'fd00:9::1']), pod('v6', ['fd00:9::2']), pod('v4', ['10.9.0.3'])]);
  const flow = (src: string, dst: string): FlowSpec => parseFlows(JSON.stringify([{ src, dst, port: 80 }]), 'flows.json')[0];

  it('uses the first family of the source that the destination has too, so a dual-stack pod reaches an IPv6-only pod over IPv6', () => {
    const { packet } = resolveFlow(flow('n/dual', 'n/v6'), stateOf());
    expect([packet.family, formatIP(packet.src), formatIP(packet.dst)]).toEqual([6, 'fd00:9::1', 'fd00:9::2']);
    expect(resolveFlow(flow('n/dual', 'n/v4'), stateOf()).packet.family).toBe(4);
    expect(resolveFlow(flow('n/v6', 'n/dual'), stateOf()).packet.family).toBe(6);
  });

  it('still refuses two pods with no family in common, naming the one that lacks it', () => {
    expect(() => resolveFlow(flow('n/v4', 'n/v6'), stateOf())).toThrow(/field "dst": pod n\/v6 has no IPv4 address/);
  });
});
