// Flow recording through the real WASM pipeline: every connection the packet
// path decides becomes part of one aggregated record per key, with the stage,
// policy and rule of each direction; the ring, the buffer and the filters
// hold their bounds.
import { describe, it, expect, afterEach } from 'vitest';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { BuiltinModules } from '../pipeline/modules.js';
import { Kinds, type KubeObject, type Packet } from '../contract.js';
import { FlowRecorder } from './flow-recorder.js';
import { parseFlowFilter } from './flow-filter.js';
import { KwpError } from '../errors.js';
import { parseIP } from '../net/ip.js';
import type { FlowRecord } from './flow-record.js';
import type { StageSpec } from '../pipeline/spec.js';
import type { StageIsolation } from '../pipeline/stage.js';
import { IsolatedInstance } from '../runtime/isolated-instance.js';
import { vi } from 'vitest';

const ns = (name: string, labels: Record<string, string>): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
function pod(namespace: string, name: string, ip: string, labels: Record<string, string>, owner?: string): KubeObject {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { namespace, name, labels: owner ? { ...labels, 'pod-template-hash': '5c4b' } : labels, ...(owner ? { ownerReferences: [{ kind: 'ReplicaSet', name: `${owner}-5c4b`, controller: true }] } : {}) },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 80 }, { containerPort: 81 }] }] },
    status: { phase: 'Running', podIP: ip },
  };
}
const np = (namespace: string, name: string, spec: unknown): KubeObject => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name }, spec });

const IP = { xa: '10.244.1.10', xa2: '10.244.1.12', xb: '10.244.1.11', ya: '10.244.2.10', yb: '10.244.2.11' };
const packet = (src: string, dst: string, dstPort: number, srcPort = 40000): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array(src.split('.').map(Number)), dst: new Uint8Array(dst.split('.').map(Number)), srcPort, dstPort, icmpType: 0, icmpCode: 0,
});

let recorders: FlowRecorder[] = [];
afterEach(() => { for (const r of recorders) r.stop(); recorders = []; });

function setUp(options: Partial<ConstructorParameters<typeof FlowRecorder>[0]> = {}, stages: StageSpec[] = [{ name: 'np', module: 'network-policy' }, { name: 'np-audit', module: 'network-policy', mode: 'audit' }], extraPolicies: KubeObject[] = [], isolation: StageIsolation = 'thread') {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [ns('x', { team: 'frontend' }), ns('y', { team: 'backend' })]);
  state.replace(Kinds.Pod, [
    pod('x', 'web-1', IP.xa, { app: 'web' }, 'web'), pod('x', 'web-2', IP.xa2, { app: 'web' }, 'web'), pod('x', 'batch', IP.xb, { app: 'batch' }),
    pod('y', 'db', IP.ya, { app: 'db' }), pod('y', 'cache', IP.yb, { app: 'cache' }),
  ]);
  state.replace(Kinds.NetworkPolicy, [
    np('y', 'deny-all', { podSelector: {}, policyTypes: ['Ingress'] }),
    np('y', 'allow-web', { podSelector: { matchLabels: { app: 'db' } }, ingress: [
      { from: [{ podSelector: { matchLabels: { app: 'cache' } } }], ports: [{ port: 81 }] },
      { from: [{ namespaceSelector: { matchLabels: { team: 'frontend' } }, podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }] },
    ] }),
    ...extraPolicies,
  ]);
  const engine = new PolicyEngine({ state, modules: new BuiltinModules(), isolation });
  engine.activate(engine.build({ stages }));
  const recorder = new FlowRecorder({ state, node: 'node-a', intervalMs: 60_000, drainMs: 60_000, ...options });
  recorder.start(engine);
  recorders.push(recorder);
  return { state, engine, recorder };
}

describe('flow records from the packet path', () => {
  it('aggregates connections of two replicas into one record naming the policy, rule, peer and port that allowed them', () => {
    const { engine, recorder } = setUp();
    expect(engine.allows(packet(IP.xa, IP.ya, 80, 40001))).toBe(true);
    expect(engine.allows(packet(IP.xa2, IP.ya, 80, 40002))).toBe(true);
    expect(engine.allows(packet(IP.xa, IP.ya, 80, 40003))).toBe(true);
    const [r, ...rest] = recorder.flush();
    expect(rest).toEqual([]);
    expect(r).toMatchObject({
      src: 'x/web-1', dst: 'y/db', port: 80, protocol: 'TCP', family: 4, srcPort: 40001,
      srcWorkload: 'x/Deployment/web', dstWorkload: 'y/Pod/db', srcLabels: { app: 'web', 'pod-template-hash': '5c4b' }, dstLabels: { app: 'db' },
      srcNamespaceLabels: { team: 'frontend' }, dstPortName: 'http', verdict: 'allow', count: 3, revision: engine.active.revision, node: 'node-a',
      egress: { stage: '', policy: '', rule: '', action: 'Default' },
      ingress: { stage: 'np', policy: 'y/allow-web', rule: 'ingress rule 1', peer: 'namespaceSelector team=frontend + podSelector app=web', rulePort: 'http', action: 'Accept' },
    });
    expect(r.firstSeen <= r.lastSeen).toBe(true);
    // The audit stage would have accepted too, by the same rule.
    expect(r.audit).toEqual([{ stage: 'np-audit', direction: 'ingress', policy: 'y/allow-web', rule: 'ingress rule 1', action: 'Accept' }]);
  });

  it('records the connections of a batched wakeup, the dataplane\'s path, with the same verdicts and policies', () => {
    const { engine, recorder } = setUp();
    const out = new Uint8Array(3);
    engine.allowsBatch([packet(IP.xa, IP.ya, 80, 40001), packet(IP.xb, IP.ya, 80, 40002), packet(IP.yb, IP.ya, 81, 40003)], out);
    expect([...out]).toEqual([1, 0, 1]);
    const flows = recorder.flush();
    expect(flows.map((f) => [f.src, f.verdict, f.ingress.policy, f.ingress.rule]).sort()).toEqual([
      ['x/batch', 'deny', 'y/deny-all', 'default deny'],
      ['x/web-1', 'allow', 'y/allow-web', 'ingress rule 1'],
      ['y/cache', 'allow', 'y/allow-web', 'ingress rule 0'],
    ]);
  });

  it('records a batch exactly as it records the same connections one at a time: egress denies, IPv6 ends, audits, the other stages', () => {
    const v6 = (src: string, dst: string, dstPort: number, srcPort: number): Packet => ({ ...packet('0.0.0.0', '0.0.0.0', dstPort, srcPort), family: 6, src: parseIP(src)!.bytes, dst: parseIP(dst)!.bytes });
    const mix = [
      packet(IP.xa, IP.ya, 80, 40001), packet(IP.xa2, IP.ya, 80, 40002), packet(IP.xb, IP.ya, 80, 40003), packet(IP.yb, IP.ya, 81, 40004),
      packet(IP.xb, IP.yb, 5432, 40005), packet(IP.ya, IP.xb, 22, 40006), packet(IP.xa, '192.0.2.7', 443, 40007),
      v6('2001:db8::1', '2001:db8::2', 53, 40008), v6('2001:db8::1', '2001:db8::2', 53, 40009), v6('2001:db8::3', '2001:db8::2', 53, 40010),
    ];
    const stages = [{ name: 'np', module: 'network-policy' }, { name: 'np-audit', module: 'network-policy', mode: 'audit' as const }, { name: 'all', module: 'allow-all' }];
    const batchNoEgress = np('x', 'batch-no-egress', { podSelector: { matchLabels: { app: 'batch' } }, policyTypes: ['Egress'] });
    const one = setUp({}, stages, [batchNoEgress]);
    const many = setUp({}, stages, [batchNoEgress]);
    const single = mix.map((p) => (one.engine.allows(p) ? 1 : 0));
    const out = new Uint8Array(mix.length);
    many.engine.allowsBatch(mix, out);
    expect([...out]).toEqual(single);
    const shape = (records: FlowRecord[]) => records.map(({ firstSeen: _f, lastSeen: _l, ...r }) => r).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    const recorded = shape(one.recorder.flush());
    expect(shape(many.recorder.flush())).toEqual(recorded);
    // What the mix must show, so that equal records mean something.
    expect(recorded.map((r) => [r.src, r.dst, r.count, r.verdict, r.egress.action, r.ingress.action])).toEqual(expect.arrayContaining([
      ['x/batch', 'y/db', 1, 'deny', 'Deny', 'Skipped'],
      ['x/web-1', 'y/db', 2, 'allow', 'Accept', 'Accept'],
      ['2001:db8::1', '2001:db8::2', 2, 'allow', 'Accept', 'Accept'],
      ['2001:db8::3', '2001:db8::2', 1, 'allow', 'Accept', 'Accept'],
    ]));
    expect(recorded.find((r) => r.src === 'x/batch')!.egress).toMatchObject({ stage: 'np', policy: 'x/batch-no-egress' });
    expect(recorded.find((r) => r.src === 'x/web-1')!.egress).toMatchObject({ stage: 'all', action: 'Accept' });
    expect(recorded.some((r) => r.audit.length > 0)).toBe(true);
  });

  it('records the rule, peer and port of a tiered ClusterNetworkPolicy as it records a NetworkPolicy\'s', () => {
    const { state, engine, recorder } = setUp({}, [{ name: 'cnp-admin', module: 'cluster-network-policy', config: { tier: 'Admin' } }, { name: 'np', module: 'network-policy' }]);
    state.replace(Kinds.ClusterNetworkPolicy, [{
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: 'guardrails' },
      spec: { tier: 'Admin', priority: 5, subject: { namespaces: { matchLabels: { team: 'backend' } } }, ingress: [
        { name: 'no-batch', action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'ops' } } }, { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'batch' } } } }], protocols: [{ tcp: { destinationPort: { range: { start: 79, end: 81 } } } }] },
      ] },
    }]);
    expect(engine.allows(packet(IP.xb, IP.ya, 80))).toBe(false);
    const [r] = recorder.flush();
    expect(r.ingress).toEqual({ stage: 'cnp-admin', policy: 'guardrails', rule: 'no-batch', peer: 'pods all + app=batch', rulePort: 'TCP/79-81', action: 'Deny' });
  });

  it('records a batch of a pipeline whose modules run in their own threads with one module call per stage and direction, as it records in-thread', async () => {
    const mix = [packet(IP.xa, IP.ya, 80, 40001), packet(IP.xa2, IP.ya, 80, 40002), packet(IP.xb, IP.ya, 80, 40003), packet(IP.yb, IP.ya, 81, 40004), packet(IP.xb, IP.yb, 5432, 40005)];
    const inThread = setUp();
    const threaded = setUp({}, undefined, [], 'worker');
    // Instances in threads are fed asynchronously: the pipeline to decide with is built so.
    const built = threaded.engine.active;
    threaded.engine.activate(await threaded.engine.buildAsync({ stages: [{ name: 'np', module: 'network-policy' }, { name: 'np-audit', module: 'network-policy', mode: 'audit' }] }));
    built.dispose();
    const calls = vi.spyOn(IsolatedInstance.prototype, 'decideInto');
    try {
      const want = new Uint8Array(mix.length);
      const got = new Uint8Array(mix.length);
      inThread.engine.allowsBatch(mix, want);
      threaded.engine.allowsBatch(mix, got);
      expect([...got]).toEqual([...want]);
      // Not packet by packet: every call carries the batch (or what is left of it), never one record of five.
      expect(calls.mock.calls.length).toBeGreaterThan(0);
      expect(calls.mock.calls.every(([, , n]) => n > 1)).toBe(true);
      const shape = (records: FlowRecord[]) => records.map(({ firstSeen: _f, lastSeen: _l, revision: _r, ...r }) => r).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
      const recorded = shape(inThread.recorder.flush());
      expect(shape(threaded.recorder.flush())).toEqual(recorded);
      expect(recorded.find((r) => r.src === 'x/web-1')!.ingress).toMatchObject({ policy: 'y/allow-web', rule: 'ingress rule 1', rulePort: 'http' });
    } finally {
      calls.mockRestore();
      threaded.engine.active.dispose();
    }
  });

  it('keeps a deny apart from an allow, attributes the default deny to the isolating policy, and names the other rule for another peer', () => {
    const { engine, recorder } = setUp();
    expect(engine.allows(packet(IP.xb, IP.ya, 80))).toBe(false);
    expect(engine.allows(packet(IP.yb, IP.ya, 81))).toBe(true);
    const flows = recorder.flush();
    expect(flows.map((f) => [f.src, f.verdict, f.ingress.policy, f.ingress.rule, f.ingress.action])).toEqual([
      ['x/batch', 'deny', 'y/deny-all', 'default deny', 'Deny'],
      ['y/cache', 'allow', 'y/allow-web', 'ingress rule 0', 'Accept'],
    ]);
    expect(recorder.verdictCounts.entries().map((e) => e.labels)).toContainEqual({ stage: 'np', policy: 'y/deny-all', rule: 'default deny', direction: 'ingress', verdict: 'deny' });
  });

  it('records nothing once stopped, and the pipeline decides the same either way', () => {
    const { engine, recorder } = setUp();
    expect(engine.allows(packet(IP.xb, IP.ya, 80))).toBe(false);
    recorder.stop();
    expect(engine.allows(packet(IP.xb, IP.ya, 80))).toBe(false);
    expect(engine.allows(packet(IP.xa, IP.ya, 80))).toBe(true);
    expect(recorder.stats().connections).toBe(1);
  });

  it('keeps recording across a pipeline swap, with the new revision in its own record', () => {
    const { engine, recorder } = setUp();
    engine.allows(packet(IP.xa, IP.ya, 80));
    const next = engine.build({ stages: [{ name: 'np2', module: 'network-policy' }] });
    engine.activate(next);
    engine.allows(packet(IP.xa, IP.ya, 80));
    const flows = recorder.flush();
    expect(flows.map((f) => [f.revision, f.ingress.stage])).toEqual([[flows[0].revision, 'np'], [next.revision, 'np2']]);
  });

  it('drops connections past the buffer capacity instead of waiting, and counts them', () => {
    const { engine, recorder } = setUp({ bufferCapacity: 4 });
    for (let i = 0; i < 10; i++) expect(engine.allows(packet(IP.xb, IP.ya, 80, 41000 + i))).toBe(false);
    expect(recorder.stats()).toMatchObject({ dropped: 6, pending: 4 });
    expect(recorder.flush()[0].count).toBe(4);
    engine.allows(packet(IP.xb, IP.ya, 80));
    expect(recorder.stats().pending).toBe(1);
  });

  it('claims a batch\'s slots across the ring\'s end and drops, counted, the records a full ring cannot take', () => {
    const { engine, recorder } = setUp({ bufferCapacity: 8 });
    for (let i = 0; i < 5; i++) engine.allows(packet(IP.xa, IP.yb, 2000));
    expect(recorder.drain()).toBe(5);
    // Slots 5, 6, 7, then 0, 1, 2: each record keeps its own port.
    const batch = [1, 2, 3, 4, 5, 6].map((k) => packet(IP.xa, IP.yb, 2000 + k, 42000 + k));
    engine.allowsBatch(batch, new Uint8Array(batch.length));
    expect(recorder.stats()).toMatchObject({ pending: 6, dropped: 0 });
    // Two free slots left: of a batch of five, the first two are recorded and three dropped.
    const more = [7, 8, 9, 10, 11].map((k) => packet(IP.xa, IP.yb, 2000 + k));
    engine.allowsBatch(more, new Uint8Array(more.length));
    expect(recorder.stats()).toMatchObject({ pending: 8, dropped: 3 });
    const byPort = Object.fromEntries(recorder.flush().map((r) => [r.port, r.count]));
    expect(byPort).toEqual({ 2000: 5, 2001: 1, 2002: 1, 2003: 1, 2004: 1, 2005: 1, 2006: 1, 2007: 1, 2008: 1 });
  });

  it('drains a burst of new keys in slices of a few milliseconds, with the event loop\'s turn between them, and loses none', async () => {
    const { engine, recorder } = setUp({ drainMs: 100 });
    // 3,000 keys new in the interval: each costs the drain microseconds (names, workloads, a record), so the burst is many slices' work.
    for (let port = 3000; port < 6000; port++) engine.allows(packet(IP.xa, IP.yb, port));
    expect(recorder.stats().pending).toBe(3000);
    // This loop's turns are queued before the timer's first slice ends, so the first one after it sees what that slice left.
    while (recorder.stats().pending === 3000) await new Promise((resolve) => setImmediate(resolve));
    const left = recorder.stats().pending;
    expect(left).toBeGreaterThan(0);
    while (recorder.stats().pending > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(recorder.stats().connections).toBe(3000);
    expect(recorder.flush()).toHaveLength(3000);
  });

  it('keeps at most ringSize records, the newest', () => {
    const { engine, recorder } = setUp({ ringSize: 3 });
    for (let port = 1000; port < 1005; port++) { engine.allows(packet(IP.xa, IP.yb, port)); recorder.flush(); }
    expect(recorder.query().map((r) => r.port)).toEqual([1002, 1003, 1004]);
    expect(recorder.query({ limit: 2 }).map((r) => r.port)).toEqual([1003, 1004]);
  });

  it('filters by namespace, pod, verdict, policy and since', () => {
    const { engine, recorder } = setUp();
    engine.allows(packet(IP.xa, IP.ya, 80));
    engine.allows(packet(IP.xb, IP.ya, 80));
    engine.allows(packet(IP.xb, IP.xa, 80));
    recorder.flush();
    const pairs = (f: Parameters<FlowRecorder['query']>[0]) => recorder.query(f).map((r) => `${r.src}>${r.dst}`);
    expect(pairs({ verdict: 'deny' })).toEqual(['x/batch>y/db']);
    expect(pairs({ namespace: 'y' })).toEqual(['x/web-1>y/db', 'x/batch>y/db']);
    expect(pairs({ pod: 'web-1' })).toEqual(['x/web-1>y/db', 'x/batch>x/web-1']);
    expect(pairs({ pod: 'y/web-1' })).toEqual([]);
    expect(pairs({ policy: 'y/allow-web' })).toEqual(['x/web-1>y/db']);
    expect(pairs({ since: Date.now() + 60_000 })).toEqual([]);
    expect(pairs({ since: Date.now() - 60_000 })).toHaveLength(3);
  });

  it('tells followers about every record as its interval ends, and stops when they unsubscribe', () => {
    const { engine, recorder } = setUp();
    const seen: string[] = [];
    const unsubscribe = recorder.follow((r) => seen.push(`${r.src}:${r.count}`));
    engine.allows(packet(IP.xa, IP.ya, 80));
    engine.allows(packet(IP.xa, IP.ya, 80));
    expect(seen).toEqual([]);
    recorder.flush();
    expect(seen).toEqual(['x/web-1:2']);
    unsubscribe();
    engine.allows(packet(IP.xa, IP.ya, 80));
    recorder.flush();
    expect(seen).toEqual(['x/web-1:2']);
  });
});

describe('flow filters from query parameters and flags', () => {
  const where = (n: string) => `query "${n}"`;
  it('parses durations, times, verdicts and limits', () => {
    expect(parseFlowFilter({ since: '5m', verdict: 'DENY', limit: '10' }, where, 1_000_000)).toEqual({ since: 1_000_000 - 300_000, verdict: 'deny', limit: 10 });
    expect(parseFlowFilter({ since: '2026-12-01T13:40:00Z' }, where).since).toBe(Date.parse('2026-12-01T13:40:00Z'));
  });

  it.each([
    [{ verdict: 'drop' }, 'query "verdict" "drop" is not allow or deny'],
    [{ since: 'yesterday' }, 'query "since": "yesterday" is neither a duration'],
    [{ limit: '0' }, 'query "limit" "0" must be a whole number from 1 to 100000'],
    [{ pods: 'x' }, 'query "pods" is not a flow filter'],
    [{ namespace: '' }, 'query "namespace" is empty'],
  ])('refuses %j naming the parameter', (params, message) => {
    let err: unknown;
    try { parseFlowFilter(params as Record<string, string>, where); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(KwpError);
    expect((err as KwpError).code).toBe('KWP_ERR_FLOW_FILTER');
    expect((err as KwpError).message).toContain(message);
  });
});
