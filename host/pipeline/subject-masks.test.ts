// The one-packet walk's subject masks: a stage whose subject filter holds
// neither pod is skipped from the pipeline's own table, without reading the
// stage (after the agent slept, every object read is a cache miss). The
// masks must follow every change of a filter at once, and a masked walk
// must give the verdicts and counters of the walk without them.
import { describe, it, expect, vi } from 'vitest';
import type { Packet } from '../contract.js';
import { Kinds } from '../contract.js';
import { defaultPipeline, type PipelineSpec } from './spec.js';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from './engine.js';
import { BuiltinModules } from './modules.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { changeBetweenRounds, engineFor, loadState } from '../../bench/harness.js';
import { seededRandom } from '../dataplane/seeded-random.js';

const SCALE: Scale = { name: 'subject-masks', namespaces: 6, pods: 240, networkPolicies: 30, clusterNetworkPolicies: 8 };
const turn = () => new Promise((resolve) => setImmediate(resolve));

const pod = (name: string, ip: string, app: string) => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'x', uid: name, labels: { app } }, spec: {}, status: { phase: 'Running', podIP: ip },
});
const isolate = (name: string, app: string) => ({
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace: 'x' },
  spec: { podSelector: { matchLabels: { app } }, policyTypes: ['Ingress'] },
});
const between = (src: number, dst: number): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, src]), dst: new Uint8Array([10, 0, 0, dst]), srcPort: 40000, dstPort: 80, icmpType: 0, icmpCode: 0,
});

/** Pods a, b, c; two NetworkPolicy stages, `only-b` isolating b and `only-c` isolating c. */
function twoStages() {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
  state.replace(Kinds.Pod, [pod('a', '10.0.0.1', 'a'), pod('b', '10.0.0.2', 'b'), pod('c', '10.0.0.3', 'c')]);
  state.replace(Kinds.NetworkPolicy, [isolate('isolate-b', 'b')]);
  const engine = new PolicyEngine({ state, modules: new BuiltinModules() });
  engine.activate(engine.build({ stages: [{ name: 'np', module: 'network-policy' }, { name: 'np2', module: 'network-policy' }] }));
  const [np, np2] = engine.active.stages;
  return { state, engine, np, np2 };
}

describe('the one-packet walk through the subject masks', () => {
  it('skips a stage that selects neither pod without asking the stage anything, and still counts the skip', () => {
    const { engine, np, np2 } = twoStages();
    const reads = [np, np2].map((s) => [vi.spyOn(s, 'subjectFilter'), vi.spyOn(s, 'decidesPairs', 'get'), vi.spyOn(s, 'decidePairs'), vi.spyOn(s, 'decidePairOne')]);
    // a -> c: neither stage selects a or c.
    expect(engine.allows(between(1, 3))).toBe(true);
    for (const spies of reads) for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    expect(np.counters.skipped).toBe(2);
    expect(np2.counters.skipped).toBe(2);
    expect(np.counters.decisions).toBe(2);
    // a -> b: both stages select b, so both are asked (the first denies).
    expect(engine.allows(between(1, 2))).toBe(false);
    expect(reads[0][3]).toHaveBeenCalledTimes(1);
    vi.restoreAllMocks();
    engine.active.dispose();
  });

  it('asks a stage on the very next decision after a change makes one of the pods its subject, before the masks are rebuilt', async () => {
    const { state, engine, np } = twoStages();
    expect(engine.allows(between(1, 3))).toBe(true);
    state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: isolate('isolate-c', 'c') });
    const asked = vi.spyOn(np, 'decidePairOne');
    expect(engine.allows(between(1, 3))).toBe(false);
    // And once the filters and masks are rebuilt, still: c is a subject now.
    await turn();
    await turn();
    expect(engine.allows(between(1, 3))).toBe(false);
    expect(asked).toHaveBeenCalledTimes(2);
    const skipped = np.counters.skipped;
    // A pod no policy selects any more is skipped again.
    state.apply(Kinds.NetworkPolicy, { type: 'delete', object: isolate('isolate-c', 'c') });
    state.apply(Kinds.NetworkPolicy, { type: 'delete', object: isolate('isolate-b', 'b') });
    await turn();
    await turn();
    expect(engine.allows(between(1, 2))).toBe(true);
    expect(np.counters.skipped).toBe(skipped + 2);
    vi.restoreAllMocks();
    engine.active.dispose();
  });

  it('lets go of a replaced instance as soon as the stage has its new one, not a turn later when the masks are rebuilt', async () => {
    const { engine, np } = twoStages();
    const pipeline = engine.active as unknown as { oneSources: unknown[]; answerSources: unknown[]; answerWords: unknown[] };
    const internals = np as unknown as { current: unknown; replaceInstance(problem: object): Promise<void> };
    const old = internals.current;
    // The walks keep each stage's instance (its answers in place) from the masks' build on.
    expect(pipeline.oneSources).toContain(old);
    expect(engine.allows(between(1, 2))).toBe(false);
    await internals.replaceInstance({ kind: 'refreshing', message: 'test', since: Date.now() });
    expect(internals.current).not.toBe(old);
    // Same turn: the masks are not rebuilt yet, and nothing of this pipeline reaches the old instance.
    expect(pipeline.oneSources).not.toContain(old);
    expect(pipeline.answerSources).not.toContain(old);
    expect(pipeline.answerWords.every((w) => w === undefined)).toBe(true);
    await turn();
    expect(pipeline.oneSources).toContain(internals.current);
    expect(engine.allows(between(1, 2))).toBe(false);
    expect(engine.allows(between(1, 3))).toBe(true);
    engine.active.dispose();
  });

  it('gives every packet the verdict of the unindexed evaluation over random clusters and changes, with the masks rebuilt after each change', async () => {
    let compared = 0;
    let skippedByMasks = 0;
    for (const seed of [31, 32]) {
      const cluster = generateCluster(SCALE, seed);
      const state = loadState(cluster);
      const engine = engineFor(state);
      const spec = (config: Record<string, unknown>): PipelineSpec => ({ stages: defaultPipeline().stages.map((s) => ({ ...s, config: { ...(s.config ?? {}), ...config } })) });
      const masked = engine.build(spec({}));
      const unindexed = engine.build(spec({ decisionCache: false, ruleIndex: false }));
      const random = seededRandom(seed);
      for (let round = 0; round < 4; round++) {
        await turn();
        await turn();
        const packets = [...generateFlows(cluster, 150, seed).packets, ...generateFlows(cluster, 150, seed * 10 + round).packets];
        // The unindexed pipeline walks without its masks, the other with them.
        (unindexed as unknown as { masksValid: boolean }).masksValid = false;
        const want = packets.map((p) => (unindexed.allows(p) ? 1 : 0));
        const filters = masked.stages.map((s) => vi.spyOn(s, 'subjectFilter'));
        const skippedBefore = masked.stages.reduce((n, s) => n + s.counters.skipped, 0);
        expect(packets.map((p) => (masked.allows(p) ? 1 : 0))).toEqual(want);
        // The masked walk read no stage's filter: its skips came from the masks.
        for (const f of filters) expect(f).not.toHaveBeenCalled();
        vi.restoreAllMocks();
        skippedByMasks += masked.stages.reduce((n, s) => n + s.counters.skipped, 0) - skippedBefore;
        compared += packets.length;
        changeBetweenRounds(cluster, state, random, round);
      }
      masked.dispose();
      unindexed.dispose();
    }
    expect(compared).toBe(2 * 4 * 300);
    expect(skippedByMasks).toBeGreaterThan(0);
  }, 120_000);
});
