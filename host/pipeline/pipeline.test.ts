import { describe, it, expect } from 'vitest';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from './engine.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { Kinds, type Packet } from '../contract.js';
import { BuiltinModules } from './modules.js';
import type { StageSpec } from './spec.js';
import { KwpError } from '../errors.js';

const modules = fixtureModules();
const packet = (dstPort = 80): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]),
  srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0,
});
const stage = (name: string, egress: string, ingress: string, extra: Partial<StageSpec> = {}): StageSpec =>
  ({ name, module: 'scripted', config: { egress, ingress, reason: `${name} said so` }, ...extra });

function engineWith(stages: StageSpec[]) {
  const engine = new PolicyEngine({ state: new ClusterState(), modules });
  engine.activate(engine.build({ stages }));
  return engine;
}

describe('the pipeline walks stages in order and the first Accept or Deny wins', () => {
  const cases: Array<[string, StageSpec[], boolean]> = [
    ['an Accept before a Deny allows', [stage('a', 'Accept', 'Accept'), stage('b', 'Deny', 'Deny')], true],
    ['a Deny before an Accept denies', [stage('a', 'Deny', 'Deny'), stage('b', 'Accept', 'Accept')], false],
    ['Next defers to the next stage', [stage('a', 'Next', 'Next'), stage('b', 'Deny', 'Deny')], false],
    ['all Next means allow', [stage('a', 'Next', 'Next'), stage('b', 'Next', 'Next')], true],
    ['an empty pipeline allows', [], true],
    ['egress allowed but ingress denied denies', [stage('a', 'Accept', 'Deny')], false],
    ['egress denied but ingress allowed denies', [stage('a', 'Deny', 'Accept')], false],
    ['an egress Accept does not skip the ingress walk', [stage('a', 'Accept', 'Next'), stage('b', 'Next', 'Deny')], false],
    ['Pass defers to the next stage like Next', [stage('a', 'Pass', 'Pass'), stage('b', 'Deny', 'Deny')], false],
    ['a verdict outside the ABI costs the stage its failure policy', [stage('a', 'Bogus', 'Bogus', { failurePolicy: 'fail-closed' }), stage('b', 'Accept', 'Accept')], false],
    ['an audit stage that denies never decides', [stage('a', 'Deny', 'Deny', { mode: 'audit' }), stage('b', 'Next', 'Next')], true],
  ];
  it.each(cases)('%s', (_name, stages, allowed) => {
    const engine = engineWith(stages);
    expect(engine.allows(packet())).toBe(allowed);
    expect(engine.evaluate(packet()).allowed).toBe(allowed);
    const out = new Uint8Array(3).fill(7);
    engine.active.allowsBatch([packet(), packet(81), packet(82)], out);
    expect([...out]).toEqual([1, 1, 1].map(() => (allowed ? 1 : 0)));
    engine.active.dispose();
  });

  it('a batch longer than one module call is decided in chunks, each packet in its own slot', () => {
    const engine = engineWith([stage('a', 'Next', 'Next'), stage('b', 'Accept', 'Deny')]);
    const packets = Array.from({ length: 150 }, (_, i) => packet(1000 + i));
    const out = new Uint8Array(150).fill(7);
    engine.active.allowsBatch(packets, out);
    expect(out.every((v) => v === 0)).toBe(true);
    expect(engine.active.stages[1].counters.decisions).toBe(300);
    engine.active.dispose();
  });

  it('a trap inside a batch costs every record of that call the stage failure policy', () => {
    const open = engineWith([stage('a', 'Deny', 'Deny', { failurePolicy: 'fail-open', config: { egress: 'Deny', ingress: 'Deny', trapPort: 666 } })]);
    const out = new Uint8Array(4);
    open.active.allowsBatch([packet(80), packet(666), packet(81), packet(82)], out);
    expect([...out]).toEqual([1, 1, 1, 1]);
    expect(open.active.stages[0].counters.traps).toBe(1);
    open.active.dispose();
  });

  it('a trap inside a batch on a fail-closed stage denies every record of that call, those the module answered Accept included', () => {
    const closed = engineWith([stage('a', 'Accept', 'Accept', { failurePolicy: 'fail-closed', config: { egress: 'Accept', ingress: 'Accept', trapPort: 666 } })]);
    const out = new Uint8Array(4).fill(7);
    closed.active.allowsBatch([packet(80), packet(666), packet(81), packet(82)], out);
    expect([...out]).toEqual([0, 0, 0, 0]);
    expect(closed.active.stages[0].counters).toMatchObject({ traps: 1, deny: 4, accept: 0 });
    // Until the rebuild, the stage has no instance: the batch still answers the failure policy.
    closed.active.allowsBatch([packet(80), packet(81)], out);
    expect([...out.subarray(0, 2)]).toEqual([0, 0]);
    closed.active.dispose();
  });

  it('the trace names each stage, its verdict and its reason, and stops at the deciding stage', () => {
    const engine = engineWith([stage('a', 'Next', 'Next'), stage('b', 'Accept', 'Deny'), stage('c', 'Deny', 'Deny')]);
    const d = engine.evaluate(packet());
    expect(d.egress.trace.map((t) => `${t.stage}:${t.verdict}`)).toEqual(['a:Next', 'b:Accept']);
    expect(d.ingress.trace.map((t) => `${t.stage}:${t.verdict}`)).toEqual(['a:Next', 'b:Deny']);
    expect(d.ingress.trace[1].reason).toBe('b said so');
    engine.active.dispose();
  });

  it('audit stages are traced with their would-be verdicts even after the decision', () => {
    const engine = engineWith([stage('a', 'Accept', 'Accept'), stage('b', 'Deny', 'Deny', { mode: 'audit' })]);
    const d = engine.evaluate(packet());
    expect(d.allowed).toBe(true);
    expect(d.egress.trace.map((t) => `${t.stage}:${t.verdict}:${t.mode}`)).toEqual(['a:Accept:enforce', 'b:Deny:audit']);
    engine.active.dispose();
  });

  it('a trapping fail-open stage is skipped and a trapping fail-closed stage denies', () => {
    const open = engineWith([stage('a', 'Deny', 'Deny', { failurePolicy: 'fail-open', config: { egress: 'Deny', ingress: 'Deny', trapPort: 666 } })]);
    expect(open.allows(packet(666))).toBe(true);
    const closed = engineWith([stage('a', 'Accept', 'Accept', { failurePolicy: 'fail-closed', config: { egress: 'Accept', ingress: 'Accept', trapPort: 666 } })]);
    expect(closed.allows(packet(666))).toBe(false);
    open.active.dispose();
    closed.active.dispose();
  });
});

describe('building and activating pipelines', () => {
  it('a build that fails leaves the active pipeline deciding as before', () => {
    const engine = engineWith([stage('a', 'Deny', 'Deny')]);
    const before = engine.active;
    expect(() => engine.build({ stages: [stage('ok', 'Accept', 'Accept'), { name: 'bad', module: 'scripted', config: { egress: 'Sometimes' } }] }))
      .toThrowError(KwpError);
    expect(() => engine.build({ stages: [{ name: 'missing', module: 'no-such-module' }] })).toThrowError(/KWP_ERR_MODULE_NOT_FOUND|neither built in/);
    expect(engine.active).toBe(before);
    expect(engine.allows(packet())).toBe(false);
    before.dispose();
  });

  it('activation is one swap: the previous pipeline stays started for a rollback', () => {
    const engine = engineWith([stage('a', 'Deny', 'Deny')]);
    const first = engine.active;
    const previous = engine.activate(engine.build({ stages: [stage('a', 'Accept', 'Accept')] }));
    expect(previous).toBe(first);
    expect(engine.allows(packet())).toBe(true);
    engine.activate(previous!);
    expect(engine.allows(packet())).toBe(false);
    expect(engine.active.revision).toBe(1);
  });

  it('revisions increase with every build', () => {
    const engine = engineWith([]);
    const a = engine.build({ stages: [] });
    const b = engine.build({ stages: [] });
    expect(b.revision).toBeGreaterThan(a.revision);
    expect(a.revision).toBeGreaterThan(engine.active.revision);
  });
});

describe('stages whose module names its subjects are not asked about other traffic', () => {
  const pod = (name: string, ip: string, labels: Record<string, string>) => ({
    apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'x', uid: name, labels },
    spec: { containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 80 }] }] },
    status: { phase: 'Running', podIP: ip },
  });
  const denyIngress = (name: string, app: string) => ({
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace: 'x' },
    spec: { podSelector: { matchLabels: { app } }, policyTypes: ['Ingress'] },
  });
  const between = (src: number, dst: number): Packet => ({
    family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, src]), dst: new Uint8Array([10, 0, 0, dst]),
    srcPort: 40000, dstPort: 80, icmpType: 0, icmpCode: 0,
  });

  function npEngine() {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
    state.replace(Kinds.Pod, [pod('a', '10.0.0.1', { app: 'a' }), pod('b', '10.0.0.2', { app: 'b' }), pod('c', '10.0.0.3', { app: 'c' })]);
    state.replace(Kinds.NetworkPolicy, [denyIngress('isolate-b', 'b')]);
    const engine = new PolicyEngine({ state, modules: new BuiltinModules() });
    engine.activate(engine.build({ stages: [{ name: 'np', module: 'network-policy' }] }));
    return { state, engine, np: engine.active.stages[0] };
  }

  it('traffic between two pods no NetworkPolicy selects skips the stage and is allowed', () => {
    const { engine, np } = npEngine();
    expect(engine.allows(between(1, 3))).toBe(true);
    expect(np.counters.skipped).toBe(2);
    const out = new Uint8Array(2);
    engine.active.allowsBatch([between(1, 3), between(3, 1)], out);
    expect([...out]).toEqual([1, 1]);
    expect(np.counters.skipped).toBe(6);
    engine.active.dispose();
  });

  it('traffic to a selected pod still reaches the module, alone or in a mixed batch', () => {
    const { engine, np } = npEngine();
    expect(engine.allows(between(1, 2))).toBe(false);
    expect(np.counters.skipped).toBe(0);
    const out = new Uint8Array(4);
    engine.active.allowsBatch([between(1, 3), between(1, 2), between(3, 1), between(3, 2)], out);
    expect([...out]).toEqual([1, 0, 1, 0]);
    engine.active.dispose();
  });

  it('a policy change that makes a pod a subject takes effect on the next decision', () => {
    const { state, engine, np } = npEngine();
    expect(engine.allows(between(1, 3))).toBe(true);
    state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: denyIngress('isolate-c', 'c') });
    const skippedBefore = np.counters.skipped;
    expect(engine.allows(between(1, 3))).toBe(false);
    expect(np.counters.skipped).toBe(skippedBefore);
    const out = new Uint8Array(1);
    engine.active.allowsBatch([between(1, 3)], out);
    expect(out[0]).toBe(0);
    engine.active.dispose();
  });
});

/** Pods a and b in namespace x, no NetworkPolicy, and a network-policy stage whose module therefore names no subject. */
function unselectedPods() {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
  const pod = (name: string, ip: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'x', uid: name, labels: { app: name } }, spec: {}, status: { phase: 'Running', podIP: ip } });
  state.replace(Kinds.Pod, [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')]);
  state.replace(Kinds.NetworkPolicy, []);
  const engine = new PolicyEngine({ state, modules: new BuiltinModules() });
  engine.activate(engine.build({ stages: [{ name: 'np', module: 'network-policy' }] }));
  const np = engine.active.stages[0];
  const a2b: Packet = { family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]), srcPort: 40000, dstPort: 80, icmpType: 0, icmpCode: 0 };
  return { state, engine, np, a2b, pod };
}

describe('a stage whose policies select no pod', () => {
  it('is skipped for every record of a batch, and allows what it would have answered Next', () => {
    const { state, engine, np, a2b, pod } = unselectedPods();
    const out = new Uint8Array(3);
    engine.active.allowsBatch([a2b, a2b, { ...a2b, dst: new Uint8Array([8, 8, 8, 8]) }], out);
    expect([...out]).toEqual([1, 1, 1]);
    expect(np.counters.skipped).toBe(6);
    expect(np.decisionCacheStats()).toEqual({ hits: 0, misses: 0 });
    engine.active.dispose();
  });
});

describe('the subject filter after a change', () => {
  it('is rebuilt off the packet path and then skips traffic between unselected pods again', async () => {
    const { state, engine, np, a2b, pod } = unselectedPods();
    engine.allows(a2b);
    expect(np.counters.skipped).toBe(2);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('c', '10.0.0.3') });
    engine.allows(a2b);
    expect(np.counters.skipped).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    engine.allows(a2b);
    expect(np.counters.skipped).toBe(4);
    engine.active.dispose();
  });
});

describe('building a pipeline without holding the event loop', () => {
  it('buildAsync yields between stages and decides as build does', async () => {
    const engine = engineWith([]);
    let ticks = 0;
    let counting = true;
    const tick = () => { if (counting) { ticks++; setImmediate(tick); } };
    setImmediate(tick);
    const stages = [stage('a', 'Next', 'Next'), stage('b', 'Next', 'Deny'), stage('c', 'Accept', 'Accept')];
    const viaAsync = await engine.buildAsync({ stages });
    counting = false;
    const viaSync = engine.build({ stages });
    expect(ticks).toBeGreaterThanOrEqual(2);
    expect(viaAsync.allows(packet())).toBe(viaSync.allows(packet()));
    expect(viaAsync.allows(packet())).toBe(false);
    expect(viaAsync.revision).toBeLessThan(viaSync.revision);
    viaAsync.dispose();
    viaSync.dispose();
  });

  it('buildAsync rejects with the failing stage named and leaves the active pipeline in place', async () => {
    const engine = engineWith([stage('a', 'Deny', 'Deny')]);
    const before = engine.active;
    await expect(engine.buildAsync({ stages: [stage('a', 'Accept', 'Accept'), { name: 'missing', module: 'no-such-module' }] }))
      .rejects.toThrowError(/stages\[1\] \(missing\)/);
    expect(engine.active).toBe(before);
    expect(engine.allows(packet())).toBe(false);
    before.dispose();
  });

  it('a change that lands while a stage is fed reaches it and the stages after it', async () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
    const pod = (name: string, ip: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'x', uid: name, labels: { app: name } }, spec: {}, status: { phase: 'Running', podIP: ip } });
    state.replace(Kinds.Pod, [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')]);
    state.replace(Kinds.NetworkPolicy, []);
    const engine = new PolicyEngine({ state, modules: new BuiltinModules(), feedSlice: 1 });
    setImmediate(() => state.apply(Kinds.NetworkPolicy, {
      type: 'upsert',
      object: { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'isolate-b', namespace: 'x' }, spec: { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Ingress'] } },
    }));
    // The first stage audits, so the trace shows both stages' verdicts.
    const pipeline = await engine.buildAsync({ stages: [{ name: 'first', module: 'network-policy', mode: 'audit' }, { name: 'second', module: 'network-policy' }] });
    const a2b: Packet = { family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]), srcPort: 40000, dstPort: 80, icmpType: 0, icmpCode: 0 };
    const d = pipeline.evaluate(a2b);
    expect(d.ingress.trace.map((t) => `${t.stage}:${t.verdict}`)).toEqual(['first:Deny', 'second:Deny']);
    pipeline.dispose();
  });
});

describe('in multicluster mode', () => {
  function multiclusterEngine() {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    state.replace('v1/Pod', [{
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'local', namespace: 'web' },
      spec: { containers: [] }, status: { phase: 'Running', podIP: '10.0.0.1' },
    }]);
    state.upsertRemotePod('b/web/remote', {
      clusterId: 'b', name: 'remote', namespace: 'web', podLabels: {}, namespaceLabels: {}, nodeName: 'n', nodeLabels: {}, containerPorts: [], ips: ['10.0.0.2'],
    });
    const engine = new PolicyEngine({ state, modules });
    // Denies every walk it is asked about: only a skipped walk can allow.
    engine.activate(engine.build({ stages: [stage('deny', 'Deny', 'Deny')] }));
    return engine;
  }
  const toRemote = packet();
  const fromRemote: Packet = { ...packet(), src: new Uint8Array([10, 0, 0, 2]), dst: new Uint8Array([10, 0, 0, 1]) };

  it('a pod of another cluster is never a subject: its walk is skipped, the local pod\'s is not', () => {
    const engine = multiclusterEngine();
    for (const p of [toRemote, fromRemote]) {
      expect(engine.allows(p)).toBe(false);
      const out = new Uint8Array(1);
      engine.active.allowsBatch([p], out);
      expect(out[0]).toBe(0);
    }
    const d = engine.evaluate(toRemote);
    expect(d.egress.trace.map((t) => t.verdict)).toEqual(['Deny']);
    expect(d.ingress.trace).toEqual([]);
    const back = engine.evaluate(fromRemote);
    expect(back.egress.trace).toEqual([]);
    expect(back.ingress.trace.map((t) => t.verdict)).toEqual(['Deny']);
    engine.active.dispose();
  });

  it('a local pod\'s walk that allows lets traffic to and from another cluster through', () => {
    const engine = multiclusterEngine();
    engine.activate(engine.build({ stages: [stage('egress-only', 'Accept', 'Deny')] }));
    // local -> remote: egress (local subject) accepts; the remote ingress is not ours.
    expect(engine.allows(toRemote)).toBe(true);
    const out = new Uint8Array(2);
    engine.active.allowsBatch([toRemote, fromRemote], out);
    // remote -> local: the local ingress denies.
    expect([...out]).toEqual([1, 0]);
    expect(engine.allows(fromRemote)).toBe(false);
    engine.active.dispose();
  });
});
