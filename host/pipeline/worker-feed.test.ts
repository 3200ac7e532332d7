// Stages fed in a feed thread and made from its memory image (worker-feed.ts,
// Stage.feedsInWorker) against stages fed in this thread: the same verdicts,
// reasons and subjects, for deliveries during the feed too.
import { describe, it, expect, vi } from 'vitest';
import { EvaluatorInstance } from '../runtime/instance.js';
import { generateCluster, generateFlows, clusterObjects, policyChange } from '../../bench/generator.js';
import { Kinds } from '../contract.js';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from './engine.js';
import { BuiltinModules } from './modules.js';
import { defaultPipeline } from './spec.js';
import type { Pipeline } from './pipeline.js';
import { feedThreadCounters, hasSpareFeedThread, releaseSpareFeedThread, spareFeedThreadWorker } from './worker-feed.js';
import { RecordPacker } from './feed-order.js';

const SHAPE = { name: 'feed-thread', namespaces: 8, pods: 600, networkPolicies: 80, clusterNetworkPolicies: 6 };
const cluster = generateCluster(SHAPE, 3);
const flows = generateFlows(cluster, 2000, 4);
const modules = new BuiltinModules();

function stateOf(): ClusterState {
  const state = new ClusterState();
  for (const [kind, objects] of clusterObjects(cluster)) state.replace(kind, objects);
  return state;
}

function verdicts(p: Pipeline): Uint8Array {
  const out = new Uint8Array(flows.packets.length);
  p.allowsBatch(flows.packets, out);
  return out;
}

/** Per stage: its explanation of every flow's egress (the reason codes), and its subject filter. */
function stageViews(p: Pipeline): unknown[] {
  return p.stages.map((s) => ({ name: s.name, subjects: s.subjectFilter() && [...s.subjectFilter()!], memoryCap: s.memoryCapPages, held: s.heldBytes }));
}

describe('a pipeline whose stages are fed in feed threads', () => {
  it('feeds a small state in this thread: a thread would start later than the feed is done', async () => {
    const state = new ClusterState();
    for (const [kind, objects] of clusterObjects(generateCluster({ ...SHAPE, pods: 40, networkPolicies: 8 }, 3))) state.replace(kind, objects);
    const before = feedThreadCounters.started;
    const p = await new PolicyEngine({ state, modules, feedThreads: true }).buildAsync(defaultPipeline());
    expect(feedThreadCounters.started).toBe(before);
    expect(p.stages.every((s) => s.healthy)).toBe(true);
    p.dispose();
  });

  it('decides every flow as one fed in this thread, with the same subjects, and runs no module call of the feed here', async () => {
    const state = stateOf();
    const replayed = await new PolicyEngine({ state, modules, feedThreads: false }).buildAsync(defaultPipeline());
    const before = feedThreadCounters.started;
    const upserts = vi.spyOn(EvaluatorInstance.prototype, 'upsertPod');
    const imaged = await new PolicyEngine({ state, modules, feedThreads: true }).buildAsync(defaultPipeline());
    // One feed thread per stage: the stages were made from images, not fed here.
    expect(upserts).not.toHaveBeenCalled();
    upserts.mockRestore();
    expect(feedThreadCounters.started - before).toBe(imaged.stages.length);
    expect(imaged.stages.every((s) => s.healthy && s.stateProblem === undefined)).toBe(true);
    const expected = verdicts(replayed);
    expect(new Set(expected).size).toBe(2);
    expect(verdicts(imaged)).toEqual(expected);
    expect(stageViews(imaged)).toEqual(stageViews(replayed));
    for (const [i, s] of imaged.stages.entries()) {
      expect(s.counters.rebuilds, s.name).toBe(0);
      expect(s.decisionCacheStats(), s.name).toEqual(replayed.stages[i].decisionCacheStats());
    }
    replayed.dispose();
    imaged.dispose();
  });

  it('starts each stage\'s feed thread before it packs the state, so that the thread loads meanwhile', async () => {
    const state = stateOf();
    const before = feedThreadCounters.started;
    const startedAtFirstRecord: number[] = [];
    let packing = false;
    const append = RecordPacker.prototype.append;
    const spy = vi.spyOn(RecordPacker.prototype, 'append').mockImplementation(function (this: RecordPacker, record: Uint8Array) {
      if (!packing) {
        packing = true;
        startedAtFirstRecord.push(feedThreadCounters.started - before);
      }
      append.call(this, record);
    });
    const p = await new PolicyEngine({ state, modules, feedThreads: true }).buildAsync(defaultPipeline(), 'pipeline', undefined, { onStage: () => { packing = false; } });
    spy.mockRestore();
    // Stage i's first record is packed once its own thread (the i+1-th) was started.
    expect(startedAtFirstRecord).toEqual(p.stages.map((_, i) => i + 1));
    expect(p.stages.every((s) => s.healthy)).toBe(true);
    p.dispose();
  });

  it('streams the state to the feed thread a chunk a slice while it packs the rest, and decides as a stage fed in this thread', async () => {
    const state = stateOf();
    const spec = { stages: [defaultPipeline().stages.find((s) => s.name === 'np')!] };
    const replayed = await new PolicyEngine({ state, modules, feedThreads: false }).buildAsync(spec);
    // Chunk sizes as taken (their buffers are then transferred to the thread).
    const chunks: number[] = [];
    const takeChunk = RecordPacker.prototype.take;
    const take = vi.spyOn(RecordPacker.prototype, 'take').mockImplementation(function (this: RecordPacker) {
      const chunk = takeChunk.call(this);
      chunks.push(chunk.ends.length);
      return chunk;
    });
    // Every slice is due at its first check (every 64 records): a clock that moves a slice (2 ms) a reading.
    let now = performance.now();
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => (now += 2));
    let imaged: Pipeline;
    try {
      imaged = await new PolicyEngine({ state, modules, feedThreads: true }).buildAsync(spec);
    } finally {
      clock.mockRestore();
    }
    take.mockRestore();
    // 600 pods and 80 policies in chunks of at most 64 records: ten for the pods, two for the policies.
    expect(chunks.length).toBe(12);
    expect(chunks.reduce((a, b) => a + b, 0)).toBe(600 + cluster.networkPolicies.length);
    expect(Math.max(...chunks)).toBeLessThanOrEqual(64);
    expect(imaged.stages[0].counters.rebuilds).toBe(0);
    expect(verdicts(imaged)).toEqual(verdicts(replayed));
    expect(stageViews(imaged)).toEqual(stageViews(replayed));
    replayed.dispose();
    imaged.dispose();
  });

  it('takes the changes that arrive while the feed thread feeds, and follows the state after it', async () => {
    const state = stateOf();
    const building = new PolicyEngine({ state, modules, feedThreads: true }).buildAsync(defaultPipeline());
    // Changes while the stages are being fed (queued, then applied to the instance made from the image).
    for (let round = 0; round < 6; round++) {
      state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policyChange(cluster, round) });
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const imaged = await building;
    for (let round = 6; round < 12; round++) state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policyChange(cluster, round) });
    // A pipeline fed in this thread from the state all the changes led to.
    const replayed = new PolicyEngine({ state, modules, feedThreads: false }).build(defaultPipeline());
    expect(verdicts(imaged)).toEqual(verdicts(replayed));
    expect(imaged.stages.map((s) => s.heldBytes)).toEqual(replayed.stages.map((s) => s.heldBytes));
    replayed.dispose();
    imaged.dispose();
  });

  it('gives the first feed the spare thread the engine started, and has the next spare started once that feed is done', async () => {
    const state = stateOf();
    const spec = { stages: [defaultPipeline().stages.find((s) => s.name === 'np')!] };
    await releaseSpareFeedThread();
    const engine = new PolicyEngine({ state, modules, feedThreads: true });
    expect(hasSpareFeedThread()).toBe(true);
    const before = { ...feedThreadCounters };
    const first = await engine.buildAsync(spec);
    expect(feedThreadCounters.started - before.started).toBe(1);
    expect(feedThreadCounters.warm - before.warm).toBe(1);
    // Ready for the next feed: a swap that feeds np again takes it too.
    expect(hasSpareFeedThread()).toBe(true);
    const changed = { stages: [{ ...spec.stages[0], config: { ...(spec.stages[0].config ?? {}), decisionCache: false } }] };
    const second = await engine.buildAsync(changed);
    expect(feedThreadCounters.warm - before.warm).toBe(2);
    const replayed = new PolicyEngine({ state, modules, feedThreads: false }).build(changed);
    expect(verdicts(second)).toEqual(verdicts(replayed));
    expect(verdicts(first)).toEqual(verdicts(replayed));
    for (const p of [first, second, replayed]) p.dispose();
  });

  it('feeds in a thread of its own when the spare died before a feed took it', async () => {
    const state = stateOf();
    const spec = { stages: [defaultPipeline().stages.find((s) => s.name === 'np')!] };
    const engine = new PolicyEngine({ state, modules, feedThreads: true });
    // It dies while it waits, still the spare: a feed must not be handed a thread that will never answer.
    const dead = spareFeedThreadWorker()!;
    const exited = new Promise((resolve) => dead.once('exit', resolve));
    await dead.terminate();
    await exited;
    expect(hasSpareFeedThread()).toBe(false);
    const before = { ...feedThreadCounters };
    const imaged = await engine.buildAsync(spec);
    expect(feedThreadCounters.started - before.started).toBe(1);
    expect(feedThreadCounters.warm - before.warm).toBe(0);
    const replayed = new PolicyEngine({ state, modules, feedThreads: false }).build(spec);
    expect(verdicts(imaged)).toEqual(verdicts(replayed));
    expect(imaged.stages[0].counters.rebuilds).toBe(0);
    imaged.dispose();
    replayed.dispose();
  });

  it('stops its feed thread when the build is aborted, and rejects with the abort reason', async () => {
    const abort = new AbortController();
    const building = new PolicyEngine({ state: stateOf(), modules, feedThreads: true }).buildAsync(defaultPipeline(), 'pipeline', undefined, { signal: abort.signal, onStage: () => abort.abort(new Error('stop')) });
    await expect(building).rejects.toThrow('stop');
  });
});
