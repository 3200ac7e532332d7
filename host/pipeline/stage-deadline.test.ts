// The wall-clock backstop, alone: modules whose loops no fuel is spent in
// (unmeteredEvaluator), run by stages that give each instance a thread of its
// own (isolation 'worker'). A call that does not return is stopped at its
// deadline, answers the stage's failure policy (fail-closed: Deny; fail-open:
// the stage is skipped and the later stages decide), is counted, and the
// stage is rebuilt after a quarantine that doubles when the module hangs again.
import { describe, it, expect, afterEach } from 'vitest';
import { Kinds, Verdict, type KubeObject } from '../contract.js';
import { encodeRecord, RECORD_SIZE } from '../abi/record.js';
import { stateFromObjects } from '../eval.js';
import { resolveFlow } from '../flows.js';
import { PolicyEngine } from './engine.js';
import { loggerOf } from '../logger.js';
import type { Pipeline } from './pipeline.js';
import type { SandboxLimits } from '../runtime/limits.js';
import { isolationCounters } from '../runtime/isolated-instance.js';
import { DEFAULT_META, ENDLESS, decideUnlessPort, resolverOf, unmeteredEvaluator } from '../../test/fixtures/sandbox-modules.js';

const HOSTILE_PORT = 4242;
/** decisionDeadlineMs and callDeadlineMs below, plus what a loaded 2-core machine adds to stopping a thread. */
const DECISION_BOUND_MS = 2_000;
const CALL_BOUND_MS = 3_000;
const LIMITS: Partial<SandboxLimits> = { decisionDeadlineMs: 50, callDeadlineMs: 300, feedDeadlineMs: 400, deadlineQuarantineMs: 200, failureLinesPerSecond: 100 };

const pod = (name: string, ip: string): KubeObject => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default', labels: { app: name } },
  spec: { nodeName: 'n1', containers: [{ name: 'c' }] }, status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
});
const CLUSTER: KubeObject[] = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } },
  pod('a', '10.9.0.1'), pod('b', '10.9.0.2'),
];
const policy = (name: string, ports: number): KubeObject => ({
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace: 'default' },
  spec: { podSelector: {}, ingress: [{ ports: Array.from({ length: ports }, (_, i) => ({ protocol: 'TCP', port: 1000 + i })) }] },
});

interface Setup { pipeline: Pipeline; logs: string[]; state: ReturnType<typeof stateFromObjects>; decide(port: number): { allowed: boolean; ms: number } }
const open: Pipeline[] = [];
afterEach(() => { for (const p of open.splice(0)) p.dispose(); });

/** A pipeline of the hostile stage and, after it, a stage that accepts everything. */
async function setup(hostile: Parameters<typeof unmeteredEvaluator>[0], failurePolicy: 'fail-open' | 'fail-closed', config?: Record<string, unknown>, overrides: Partial<SandboxLimits> = {}): Promise<Setup> {
  const limits = { ...LIMITS, ...overrides };
  const state = stateFromObjects([...CLUSTER, policy('small', 1)]);
  const logs: string[] = [];
  const logger = loggerOf((_level, message) => { logs.push(message); });
  const modules = resolverOf(
    unmeteredEvaluator({ ...hostile, meta: { ...DEFAULT_META, name: 'hangs', kinds: [Kinds.NetworkPolicy], failurePolicy } }, limits),
    unmeteredEvaluator({ decideBody: decideUnlessPort(-1, '', 1), meta: { ...DEFAULT_META, name: 'accepts' } }, limits),
  );
  const engine = new PolicyEngine({ state, modules, logger, isolation: 'worker', limits });
  const pipeline = await engine.buildAsync({ stages: [{ name: 'hostile', module: 'hangs', config }, { name: 'after', module: 'accepts' }] });
  open.push(pipeline);
  engine.activate(pipeline);
  const decide = (port: number) => {
    const flow = resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port, srcPort: 40000, file: '<test>', index: 1 }, state);
    const started = performance.now();
    const allowed = pipeline.allows(flow.packet);
    return { allowed, ms: performance.now() - started };
  };
  return { pipeline, logs, state, decide };
}

async function until(what: string, cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const started = Date.now();
  while (!cond()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a decision that never returns', () => {
  it('of a fail-closed stage is denied within the deadline, counted, logged with the stage, and the stage is rebuilt', async () => {
    const s = await setup({ decideBody: decideUnlessPort(HOSTILE_PORT, ENDLESS, 0) }, 'fail-closed');
    const hostile = s.pipeline.stages[0];
    expect(s.decide(80).allowed).toBe(true);
    const stopped = isolationCounters.threadsStopped;
    const { allowed, ms } = s.decide(HOSTILE_PORT);
    expect(allowed).toBe(false);
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    expect(hostile.counters.deadlineExceeded).toBe(1);
    expect(hostile.lastFailure).toBe('deadline');
    expect(isolationCounters.threadsStopped).toBe(stopped + 1);
    expect(s.logs.some((l) => l.startsWith('stage hostile:') && l.includes('decisionDeadlineMs') && l.includes('quarantined for 200 ms'))).toBe(true);
    // Quarantined: answered by the failure policy without a call, until the rebuild.
    expect(s.decide(80).allowed).toBe(false);
    expect(hostile.lastFailure).toBe('unavailable');
    await until('the rebuild', () => hostile.healthy && hostile.counters.rebuilds === 1);
    expect(s.decide(80).allowed).toBe(true);
    expect(hostile.lastFailure).toBeUndefined();
  }, 60_000);

  it('of a fail-open stage skips that stage: the later stage decides the flow', async () => {
    const s = await setup({ decideBody: decideUnlessPort(HOSTILE_PORT, ENDLESS, 2) }, 'fail-open');
    expect(s.decide(80).allowed).toBe(false); // the hostile stage denies everything else
    const { allowed, ms } = s.decide(HOSTILE_PORT);
    expect(allowed).toBe(true); // skipped; the second stage accepts
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    const decision = s.pipeline.evaluate(resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port: 80, srcPort: 40000, file: '<test>', index: 1 }, s.state).packet);
    expect(decision.egress.trace.map((t) => [t.stage, t.verdict, t.failure])).toEqual([['hostile', 'Next', 'unavailable'], ['after', 'Accept', undefined]]);
  }, 60_000);

  it('again after the rebuild doubles the quarantine instead of looping', async () => {
    const s = await setup({ decideBody: decideUnlessPort(HOSTILE_PORT, ENDLESS, 0) }, 'fail-closed', undefined, { deadlineQuarantineMs: 1000 });
    const hostile = s.pipeline.stages[0];
    s.decide(HOSTILE_PORT);
    await until('the first rebuild', () => hostile.healthy);
    expect(s.decide(HOSTILE_PORT).allowed).toBe(false);
    const overrunAt = Date.now();
    expect(hostile.counters.deadlineExceeded).toBe(2);
    expect(s.logs.some((l) => l.includes('quarantined for 2000 ms') && l.includes('overrun 2 in a row'))).toBe(true);
    // Hammering the hostile port while quarantined costs no further overrun.
    for (let i = 0; i < 20; i++) expect(s.decide(HOSTILE_PORT).allowed).toBe(false);
    expect(hostile.counters.deadlineExceeded).toBe(2);
    // The module is not rebuilt before the doubled quarantine is over (a rebuild alone takes well under that).
    await until('the second rebuild', () => hostile.healthy && hostile.counters.rebuilds === 2);
    expect(Date.now() - overrunAt).toBeGreaterThanOrEqual(1950);
  }, 60_000);

  it('in a batch answers that call\'s records by the failure policy and leaves other batches alone', async () => {
    const s = await setup({ decideBody: decideUnlessPort(HOSTILE_PORT, ENDLESS, 0) }, 'fail-closed');
    const packets = [80, 81, 82].map((port) => resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port, srcPort: 40000, file: '<test>', index: 1 }, s.state).packet);
    const out = new Uint8Array(3);
    s.pipeline.allowsBatch(packets, out);
    expect([...out]).toEqual([1, 1, 1]);
    const hostile = resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port: HOSTILE_PORT, srcPort: 40000, file: '<test>', index: 1 }, s.state).packet;
    const started = performance.now();
    s.pipeline.allowsBatch([...packets, hostile], new Uint8Array(4));
    expect(performance.now() - started).toBeLessThan(DECISION_BOUND_MS);
    expect(s.pipeline.stages[0].counters.deadlineExceeded).toBe(1);
  }, 60_000);
});

describe('asynchronous answers (allowsBatchAsync) from stages whose instances run in threads', () => {
  /** Accept, but Deny for port 4243 (one record a call). */
  const BY_PORT = `
    (i32.store8 (i32.const ${4096 + 52}) (select (i32.const 2) (i32.const 1) (i32.eq (i32.load16_u (i32.const ${4096 + 6})) (i32.const 4243))))
    (i32.store (i32.const ${4096 + 56}) (i32.const 1))
    (i32.const 0)`;
  const packetTo = (s: Setup, port: number) => resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port, srcPort: 40000, file: '<test>', index: 1 }, s.state).packet;

  it('a decision that never returns leaves the event loop running, and its packet gets the failure policy at the deadline', async () => {
    const s = await setup({ decideBody: decideUnlessPort(HOSTILE_PORT, ENDLESS, 0) }, 'fail-closed');
    const out = new Uint8Array(3);
    let ticks = 0;
    const ticker = setInterval(() => { ticks++; }, 1);
    const answered = s.pipeline.allowsBatchAsync([80, HOSTILE_PORT, 81].map((p) => packetTo(s, p)), out);
    expect(answered).toBeInstanceOf(Promise);
    await answered;
    clearInterval(ticker);
    // The walk waited for the module through at least the 50 ms deadline; the timer kept firing meanwhile.
    expect(ticks).toBeGreaterThan(0);
    expect(s.pipeline.stages[0].counters.deadlineExceeded).toBe(1);
    // One call carried the three records: the deadline answers all of them by the failure policy.
    expect([...out]).toEqual([0, 0, 0]);
  }, 60_000);

  it('gives the verdicts the synchronous walk gives', async () => {
    const s = await setup({ decideBody: BY_PORT }, 'fail-closed');
    const packets = [80, 4243, 81, 4243, 82].map((p) => packetTo(s, p));
    const sync = new Uint8Array(5);
    const later = new Uint8Array(5);
    s.pipeline.allowsBatch(packets, sync);
    await s.pipeline.allowsBatchAsync(packets, later);
    expect([...later]).toEqual([1, 0, 1, 0, 1]);
    expect([...later]).toEqual([...sync]);
  }, 60_000);

  it('a call that comes while a decision is in flight waits for it and does not overwrite its verdicts', async () => {
    const s = await setup({ decideBody: BY_PORT }, 'fail-closed');
    const stage = s.pipeline.stages[0];
    const record = (port: number) => {
      const rec = new Uint8Array(RECORD_SIZE);
      encodeRecord(rec, 0, packetTo(s, port), 1, 2);
      return rec;
    };
    const out = new Uint8Array(1);
    const answered = stage.decideVerdictsAsync(record(80), 1, out);
    // Synchronously, while the first is in flight: a decision for the denied port through the same instance, and a delivery.
    expect(stage.decide(record(4243))).toBe(Verdict.Deny);
    s.state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policy('another', 2) });
    await answered;
    expect(out[0]).toBe(Verdict.Accept);
    expect(stage.counters.deadlineExceeded + stage.counters.traps).toBe(0);
  }, 60_000);

  it('a pipeline disposed while a decision is in flight still answers it with the module\'s verdict', async () => {
    const s = await setup({ decideBody: BY_PORT }, 'fail-closed');
    const out = new Uint8Array(2);
    const answered = s.pipeline.allowsBatchAsync([packetTo(s, 80), packetTo(s, 81)], out)!;
    s.pipeline.dispose();
    await answered;
    expect([...out]).toEqual([1, 1]);
  }, 60_000);

  it('is not offered when no stage runs in a thread of its own: the caller decides synchronously', async () => {
    const state = stateFromObjects(CLUSTER);
    const engine = new PolicyEngine({ state, modules: resolverOf(unmeteredEvaluator({ decideBody: BY_PORT, meta: { ...DEFAULT_META, name: 'by-port' } }, LIMITS)), limits: LIMITS });
    const pipeline = await engine.buildAsync({ stages: [{ name: 'in-thread', module: 'by-port' }] });
    open.push(pipeline);
    expect(pipeline.allowsBatchAsync([], new Uint8Array(0))).toBeUndefined();
  }, 60_000);
});

describe('a configuration, delivery or explanation that never returns', () => {
  it('kwp_configure: the build is refused with KWP_ERR_DEADLINE_EXCEEDED within the feed deadline, without blocking the event loop', async () => {
    const started = performance.now();
    const err = await setup({ configureBody: `(if (i32.gt_u (local.get $len) (i32.const 2)) (then ${ENDLESS})) (i32.const 0)` }, 'fail-closed', { hang: true }).catch((e) => e);
    expect(err).toMatchObject({ code: 'KWP_ERR_DEADLINE_EXCEEDED' });
    expect(err.message).toContain('kwp_configure did not return within 400 ms (sandbox limit feedDeadlineMs)');
    expect(performance.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it('kwp_object: the delivery is stopped, and the stage keeps answering with the last state it held', async () => {
    // Hangs on any object over 1500 bytes of JSON: the small policy goes in, the large one never returns.
    const s = await setup({ decideBody: decideUnlessPort(-1, '', 1), objectBody: `(if (i32.gt_u (local.get $len) (i32.const 1500)) (then ${ENDLESS})) (i32.const 0)` }, 'fail-closed');
    const hostile = s.pipeline.stages[0];
    const started = performance.now();
    s.state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policy('large', 200) });
    expect(performance.now() - started).toBeLessThan(CALL_BOUND_MS);
    expect(hostile.counters.deadlineExceeded).toBe(1);
    expect(s.logs.some((l) => l.startsWith('stage hostile:') && l.includes('kwp_object did not return within 300 ms (sandbox limit callDeadlineMs)'))).toBe(true);
    // The rebuild replays the state with the large policy, which hangs again; the stage then holds the last good state.
    await until('the last good state held', () => hostile.stateProblem?.kind === 'rejected' && hostile.healthy);
    expect(hostile.stateProblem!.message).toContain('answering with the last state it held');
    expect(s.decide(80).allowed).toBe(true);
  }, 60_000);

  it('kwp_explain: the reason is dropped, the verdict stands, and the stage is quarantined for the rest', async () => {
    const decide = `
      (i32.store8 (i32.const ${4096 + 52}) (i32.const 1))
      (i32.store (i32.const ${4096 + 56}) (i32.load16_u (i32.const ${4096 + 6})))
      (i32.const 0)`;
    const s = await setup({ decideBody: decide, explainBody: `(if (i32.eq (local.get $reason) (i32.const ${HOSTILE_PORT})) (then ${ENDLESS})) (i32.const 0)` }, 'fail-closed');
    const flow = resolveFlow({ src: 'default/a', dst: 'default/b', protocol: 'TCP', port: HOSTILE_PORT, srcPort: 40000, file: '<test>', index: 1 }, s.state);
    const started = performance.now();
    const decision = s.pipeline.evaluate(flow.packet);
    expect(performance.now() - started).toBeLessThan(CALL_BOUND_MS);
    expect(decision.egress.trace[0]).toMatchObject({ stage: 'hostile', verdict: 'Accept' });
    expect(decision.egress.trace[0].reason).toBeUndefined();
    // The ingress walk comes after the overrun: the stage answers its failure policy until rebuilt.
    expect(decision.ingress.trace[0]).toMatchObject({ stage: 'hostile', verdict: 'Deny', failure: 'unavailable' });
    expect(s.pipeline.stages[0].counters.deadlineExceeded).toBe(1);
  }, 60_000);
});
