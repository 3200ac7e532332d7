// Deferred attribution: the recorded packet paths of a pipeline whose
// stages' answers follow from the record and their state take the
// unrecorded walk and write only the record's words and the verdict
// (FlowBuffer.recordWalkDeferred, recordChunkWalkDeferred); the drain walks
// each new key through the stages (Pipeline.attributeDeferred, finishWalk)
// for each direction's deciding stage and codes. That is exact only because
// each stage drains the buffer before its module changes (FlowBuffer.settle).
// Here the same packets, decided one at a time and batched by a pipeline that
// defers and by one that works the outcomes out and copies the codes in its
// walk (allowsRecordedInPlace, decideChunkRecordedInPlace), with a policy
// change, pod label changes and a pipeline swap between them while records
// are pending, must make the same flow records.
import { describe, it, expect, vi } from 'vitest';
import { Kinds, Verdict, type Decision, type KubeObject, type Packet } from '../contract.js';
import { defaultPipeline, type PipelineSpec } from './spec.js';
import type { Pipeline } from './pipeline.js';
import type { Stage } from './stage.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { changeBetweenRounds, engineFor, loadState } from '../../bench/harness.js';
import { seededRandom } from '../dataplane/seeded-random.js';
import { FlowRecorder } from '../flow-records/flow-recorder.js';
import type { FlowRecord } from '../flow-records/flow-record.js';

const SCALE: Scale = { name: 'deferred-attribution', namespaces: 6, pods: 240, networkPolicies: 30, clusterNetworkPolicies: 8 };

/** The default pipeline, its stage names suffixed with `suffix` (a different name is a different stage: a swap to it retires every stage). */
function spec(suffix: string): PipelineSpec {
  return { stages: defaultPipeline().stages.map((s) => ({ ...s, name: s.name + suffix })) };
}

/** The recorder's records without their times, in a stable order. */
function records(recorder: FlowRecorder): Array<Omit<FlowRecord, 'firstSeen' | 'lastSeen'>> {
  return recorder.flush().map(({ firstSeen: _f, lastSeen: _l, ...rest }) => rest).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
}

/** What the explained path says decided a packet: the verdict and each direction's last stage trace. */
function explained(p: Pipeline, packet: Packet): string {
  const d: Decision = p.evaluate(packet);
  const last = (r: Decision['egress']) => JSON.stringify(r.trace[r.trace.length - 1] ?? null);
  return `${d.allowed} ${last(d.egress)} ${last(d.ingress)}`;
}

describe('deferred attribution on the recorded packet paths', () => {
  it('makes the records the walk that copies the codes makes, across a policy change, pod label changes and a pipeline swap with records pending', () => {
    let deferredWalks = 0;
    let asked = 0;
    let changedAnswers = 0;
    let deferredChunks = 0;
    // Stage calls of the batched walks that sent the module its part of the chunk picked from the encoded chunk, per
    // pipeline (the two share their stages: counted around each pipeline's allowsBatch).
    const picked = [0, 0];
    let picks: Array<{ mock: { calls: unknown[] } }> = [];
    const pickCalls = () => picks.reduce((n, spy) => n + spy.mock.calls.length, 0);
    for (const seed of [21, 22]) {
      const cluster = generateCluster(SCALE, seed);
      const state = loadState(cluster);
      const engine = engineFor(state, { feedThreads: false });
      const random = seededRandom(seed);
      const deferring = new FlowRecorder({ state, node: 'node-a', intervalMs: 60_000, bufferCapacity: 8192 });
      const copying = new FlowRecorder({ state, node: 'node-a', intervalMs: 60_000, bufferCapacity: 8192 });
      const chunks = vi.spyOn(deferring.buffer, 'recordChunkWalkDeferred');
      const ones = vi.spyOn(deferring.buffer, 'recordWalkDeferred');
      let pair: Pipeline[] = [];
      let revision = 10;
      const build = (suffix: string): void => {
        // One revision for both: it is part of every record.
        const next = [engine.build(spec(suffix), 'pipeline', revision), engine.build(spec(suffix), 'pipeline', revision)];
        revision++;
        next[1].attributesInDrain = false;
        next[0].flowBuffer = deferring.buffer;
        next[1].flowBuffer = copying.buffer;
        const codes = next[0].stages.map((s: Stage) => vi.spyOn(s, 'answerForDrain'));
        picks = next[0].stages.map((s: Stage) => vi.spyOn(s, 'decidePairsPicked'));
        // The retired pipelines' stages are disposed (none is shared with the new ones): their modules go with them.
        for (const p of pair) p.dispose();
        pair = next;
        counted.push(() => {
          asked += codes.reduce((n, spy) => n + spy.mock.calls.length, 0);
        });
      };
      const counted: Array<() => void> = [];
      // Each stage's subject masks, which the deferring walk needs (rebuilt off the packet path after a change).
      // One packet per call, or (`batched`) the batched walk, which defers the codes in its in-place chunk walk.
      const decide = (packets: Packet[], batched = false): void => {
        for (const p of pair) p.refreshMasks();
        if (!batched) {
          for (const packet of packets) expect(pair[0].allows(packet), JSON.stringify(packet)).toBe(pair[1].allows(packet));
          return;
        }
        const [a, b] = [new Uint8Array(packets.length), new Uint8Array(packets.length)];
        for (const [i, out] of [a, b].entries()) {
          const calls = pickCalls();
          pair[i].allowsBatch(packets, out);
          picked[i] += pickCalls() - calls;
        }
        expect(Array.from(a)).toEqual(Array.from(b));
      };
      build('');
      const tcp = generateFlows(cluster, 400, seed).packets;
      // And ICMP echo requests: the deferring walk keeps their type for the drain, the copying one takes the chunk walk.
      const packets = [...tcp, ...tcp.slice(0, 30).map((p) => ({ ...p, protocol: 1, srcPort: 0, dstPort: 0, icmpType: 8, icmpCode: 0 }))];
      const before = packets.map((p) => explained(pair[1], p));
      decide(packets);
      // A policy change with the records above pending: every NetworkPolicy of two namespaces deleted, one by one.
      const namespaces = new Set(cluster.networkPolicies.slice(0, 2).map((np) => np.metadata.namespace));
      for (const np of cluster.networkPolicies.filter((o) => namespaces.has(o.metadata.namespace))) state.apply(Kinds.NetworkPolicy, { type: 'delete', object: np });
      cluster.networkPolicies = cluster.networkPolicies.filter((o) => !namespaces.has(o.metadata.namespace));
      decide(packets, true);
      // Policies renamed: the same rules, so the same verdicts and deciding stages (and keys), under other names.
      const renamed = cluster.networkPolicies.map((np) => ({ ...np, metadata: { ...np.metadata, name: `${np.metadata.name}-renamed` } }));
      for (const [i, np] of cluster.networkPolicies.entries()) {
        state.apply(Kinds.NetworkPolicy, { type: 'delete', object: np });
        state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: renamed[i] });
      }
      cluster.networkPolicies = renamed;
      decide(packets);
      // Pod label changes (and a NetworkPolicy added, a ClusterNetworkPolicy deleted), records still pending.
      for (let round = 0; round < 3; round++) {
        changeBetweenRounds(cluster, state, random, round);
        const at = Math.floor(random() * cluster.pods.length);
        const pod = cluster.pods[at];
        const relabelled: KubeObject = { ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, app: `moved-${round}` } } };
        cluster.pods[at] = relabelled;
        state.apply(Kinds.Pod, { type: 'upsert', object: relabelled });
        decide(packets.slice(round * 100, round * 100 + 150), round === 1);
      }
      // The changes changed what decides some of the packets recorded before them.
      changedAnswers += packets.filter((p, i) => explained(pair[1], p) !== before[i]).length;
      // A swap with records of the retired revision pending: its stages are disposed with it.
      build('-next');
      decide(packets, true);
      decide(packets);
      for (const c of counted) c();
      deferredChunks += chunks.mock.calls.length;
      deferredWalks += ones.mock.calls.length;
      const [got, want] = [records(deferring), records(copying)];
      expect(want.length).toBeGreaterThan(20);
      expect(got).toHaveLength(want.length);
      for (let i = 0; i < want.length; i++) expect(got[i], `record ${i}`).toEqual(want[i]);
      expect(deferring.buffer.unattributed).toBe(0);
      for (const p of pair) p.dispose();
    }
    // The deferring pipeline did defer, and the drain asked its stages.
    expect(deferredWalks).toBeGreaterThan(1000);
    expect(asked).toBeGreaterThan(50);
    expect(changedAnswers).toBeGreaterThan(10);
    // And the batched walk deferred too, sending each stage its part of the chunk as the unrecorded walk does
    // (picked by the instance from the encoded chunk); the walk that copies the codes packs it where they stay.
    expect(deferredChunks).toBeGreaterThan(10);
    expect(picked[0]).toBeGreaterThan(10);
    expect(picked[1]).toBe(0);
  }, 180_000);
});

/** A pipeline of `spec` over a random cluster of `seed`, recording to a recorder of its own, its masks built. */
function recording(seed: number, pipelineSpec: PipelineSpec, revision: number) {
  const cluster = generateCluster(SCALE, seed);
  const state = loadState(cluster);
  const engine = engineFor(state, { feedThreads: false });
  const pipeline = engine.build(pipelineSpec, 'pipeline', revision);
  const recorder = new FlowRecorder({ state, node: 'node-a', intervalMs: 60_000, bufferCapacity: 8192 });
  pipeline.flowBuffer = recorder.buffer;
  pipeline.refreshMasks();
  return { cluster, pipeline, recorder };
}

describe('a walk left to the drain when a stage fails before the drain', () => {
  it('records the connections decided before the failure as Unknown where their walk met the failed stage, and those of the failing call and after as Failure at it', () => {
    const stages = defaultPipeline().stages.map((s) => (s.name === 'np' ? { ...s, failurePolicy: 'fail-closed' as const } : s));
    const { cluster, pipeline, recorder } = recording(31, { stages }, 40);
    const left = vi.spyOn(recorder.buffer, 'recordChunkWalkDeferred');
    // Before: TCP, decided by a healthy np, their walks left to the drain and still pending when np fails.
    const before = generateFlows(cluster, 400, 31).packets.filter((p) => p.protocol === 6).slice(0, 256);
    expect(before).toHaveLength(256);
    pipeline.allowsBatch(before, new Uint8Array(before.length));
    expect(left.mock.calls.length).toBe(4);
    // np's module fails from here on: the first chunk after (SCTP, so its records are apart) meets the failure in np's own call.
    const np = pipeline.stages.find((s) => s.name === 'np')!;
    const inst = (np as unknown as { current: Record<string, unknown> }).current;
    const fail = (): never => { throw new Error('np fails'); };
    for (const call of ['decidePairOne', 'decidePairsInto', 'decidePairsPicked', 'decideOne', 'decideInto']) if (typeof inst[call] === 'function') vi.spyOn(inst as Record<string, () => unknown>, call).mockImplementation(fail);
    const failing = before.slice(0, 64).map((p) => ({ ...p, protocol: 132 }));
    pipeline.allowsBatch(failing, new Uint8Array(64));
    // The failing chunk was recorded with its walk left to the drain (the masks were valid as it started), the rest as np's failure left them.
    expect(left.mock.calls.length).toBe(5);
    const after = before.map((p) => ({ ...p, protocol: 17 }));
    pipeline.allowsBatch(after, new Uint8Array(after.length));
    const got = recorder.flush();
    const actions = (protocol: string) => got.filter((r) => r.protocol === protocol).flatMap((r) => [r.egress, r.ingress]);
    // Before the failure: no Failure (np answered then), and Unknown where the walk reached np, which the drain cannot ask any more.
    expect(actions('TCP').filter((d) => d.action === 'Failure')).toEqual([]);
    const unknown = got.filter((r) => r.protocol === 'TCP' && r.egress.action === 'Unknown');
    expect(unknown.length).toBeGreaterThan(0);
    for (const r of unknown) expect([r.ingress.action, r.egress.stage, r.egress.policy]).toEqual(['Unknown', '', '']);
    // Walks that ended before np are known as they were.
    expect(actions('TCP').filter((d) => d.action === 'Accept' || d.action === 'Deny').length).toBeGreaterThan(0);
    expect(recorder.buffer.unattributed).toBeGreaterThanOrEqual(unknown.length);
    // The failing call (its walks finished by the drain with np gone, skipping np where its subjects did) and after:
    // np's failure policy answered, recorded as Failure at np, never Unknown.
    for (const protocol of ['SCTP', 'UDP']) {
      expect(actions(protocol).filter((d) => d.action === 'Unknown'), protocol).toEqual([]);
      const failed = actions(protocol).filter((d) => d.action === 'Failure');
      expect(failed.length, protocol).toBeGreaterThan(0);
      for (const d of failed) expect(d.stage).toBe('np');
    }
    pipeline.dispose();
  }, 120_000);
});

describe('a walk left to the drain whose stage answers the drain otherwise', () => {
  it('records the connection as Unknown with the verdict the packet got, and counts it, instead of naming a stage that did not decide it', () => {
    const { cluster, pipeline, recorder } = recording(32, defaultPipeline(), 41);
    const packets = generateFlows(cluster, 300, 32).packets;
    const verdicts = packets.map((p) => pipeline.allows(p));
    // A module that promised its answers follow from the record and its state, and breaks the promise: asked
    // again one record at a time (the drain's question), np denies what it let through and lets through what it denied.
    const np = pipeline.stages.find((s) => s.name === 'np')!;
    const inst = (np as unknown as { current: { decideOne(r: Uint8Array): number } }).current;
    const decideOne = inst.decideOne.bind(inst);
    vi.spyOn(inst, 'decideOne').mockImplementation((r: Uint8Array) => {
      const v = decideOne(r);
      return v === Verdict.Accept ? Verdict.Deny : v === Verdict.Deny ? Verdict.Accept : v;
    });
    const got = recorder.flush();
    const unknown = got.filter((r) => r.egress.action === 'Unknown');
    expect(unknown.length).toBeGreaterThan(0);
    for (const r of unknown) expect(r.ingress.action).toBe('Unknown');
    expect(recorder.buffer.unattributed).toBeGreaterThanOrEqual(unknown.length);
    // Every record keeps the verdict the packets got: as many allowed and denied connections as were decided.
    const counted = (verdict: 'allow' | 'deny') => got.filter((r) => r.verdict === verdict).reduce((n, r) => n + r.count, 0);
    expect(counted('allow')).toBe(verdicts.filter(Boolean).length);
    expect(counted('deny')).toBe(verdicts.filter((v) => !v).length);
    // And every record that names its deciding stages agrees with its verdict: denied exactly when a direction was.
    const wrong = got.filter((r) => r.egress.action !== 'Unknown' && (r.verdict === 'deny') !== [r.egress, r.ingress].some((d) => d.action === 'Deny' || d.action === 'Failure'));
    expect(wrong).toEqual([]);
    pipeline.dispose();
  }, 120_000);
});
