// The batched walk with both directions in one module call per stage (ABI 1.4,
// kwp_decide_pair) against the one-direction walk, one packet at a time
// (`allows`), and the unindexed evaluation (`ruleIndex: false`, no decision
// caches), over random clusters and flow mixes with changes between rounds:
// every packet must get the same verdict from all of them.
import { describe, it, expect, vi } from 'vitest';
import { defaultPipeline, type PipelineSpec } from './spec.js';
import type { Pipeline } from './pipeline.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { changeBetweenRounds, engineFor, loadState } from '../../bench/harness.js';
import { seededRandom } from '../dataplane/seeded-random.js';

const SCALE: Scale = { name: 'pair-walk', namespaces: 6, pods: 240, networkPolicies: 30, clusterNetworkPolicies: 8 };

function spec(config: Record<string, unknown>): PipelineSpec {
  return { stages: defaultPipeline().stages.map((s) => ({ ...s, config: { ...(s.config ?? {}), ...config } })) };
}

function batched(p: Pipeline, packets: Parameters<Pipeline['allowsBatch']>[0]): number[] {
  const out = new Uint8Array(packets.length);
  p.allowsBatch(packets, out);
  return Array.from(out);
}

describe('the pair walk', () => {
  it('gives every packet the verdict of the one-direction walk, of allows and of the unindexed evaluation, over random clusters, flows and changes', () => {
    let compared = 0;
    let allowed = 0;
    for (const seed of [3, 4, 5]) {
      const cluster = generateCluster(SCALE, seed);
      const state = loadState(cluster);
      const engine = engineFor(state);
      const cached = engine.build(spec({}));
      const uncached = engine.build(spec({ decisionCache: false }));
      const unindexed = engine.build(spec({ decisionCache: false, ruleIndex: false }));
      unindexed.pairWalk = false;
      const oneDirection = engine.build(spec({ decisionCache: false }));
      oneDirection.pairWalk = false;
      for (const p of [cached, uncached]) expect(p.stages.filter((s) => s.mode === 'enforce').every((s) => s.decidesPairs)).toBe(true);
      const pairCalls = cached.stages.map((s) => vi.spyOn(s, 'decidePairs'));
      const random = seededRandom(seed);
      for (let round = 0; round < 4; round++) {
        // 200 packets, three chunks and a short one (packed and in-place batches both occur): half
        // of them the same every round, so answers cached before a change are asked for again after it.
        const packets = [...generateFlows(cluster, 100, seed).packets, ...generateFlows(cluster, 100, seed * 10 + round).packets];
        const want = batched(unindexed, packets);
        // Twice through the cached pipeline: the second time the pair entries of the decision caches answer.
        for (const got of [batched(cached, packets), batched(cached, packets), batched(uncached, packets), batched(oneDirection, packets), packets.map((pk) => (cached.allows(pk) ? 1 : 0))]) {
          expect(got).toEqual(want);
        }
        compared += packets.length;
        allowed += want.reduce((a, b) => a + b, 0);
        // A change before the next round: a pod relabelled, a NetworkPolicy added, a ClusterNetworkPolicy deleted.
        changeBetweenRounds(cluster, state, random, round);
      }
      expect(pairCalls.reduce((n, spy) => n + spy.mock.calls.length, 0)).toBeGreaterThan(0);
      for (const p of [cached, uncached, unindexed, oneDirection]) p.dispose();
    }
    // Both verdicts occur often, so the comparison covers them.
    expect(allowed).toBeGreaterThan(compared / 10);
    expect(compared - allowed).toBeGreaterThan(compared / 10);
  }, 120_000);

  it('asks every stage the same records, with the same verdicts and counters, whether the records are picked by the masks straight into the module or packed from the filters', () => {
    let pickedCalls = 0;
    for (const seed of [6, 7]) {
      const cluster = generateCluster(SCALE, seed);
      const state = loadState(cluster);
      // An engine each: one engine's builds of one spec share their stages, and with them the counters.
      const picked = engineFor(state).build(spec({ decisionCache: false }));
      const packed = engineFor(state).build(spec({ decisionCache: false }));
      packed.pickedPairs = false;
      const filtered = engineFor(state).build(spec({ decisionCache: false }));
      filtered.pickedPairs = false;
      // The masks never valid: each stage's records come from its own filter, as before the masks.
      const unmasked = filtered as unknown as { masksValid: boolean; refreshMasks: () => void };
      unmasked.refreshMasks = () => {};
      unmasked.masksValid = false;
      const spies = picked.stages.map((st) => vi.spyOn(st, 'decidePairsPicked'));
      const random = seededRandom(seed);
      for (let round = 0; round < 3; round++) {
        const packets = [...generateFlows(cluster, 150, seed).packets, ...generateFlows(cluster, 100, seed * 10 + round).packets];
        const want = batched(filtered, packets);
        expect(batched(packed, packets)).toEqual(want);
        expect(batched(picked, packets)).toEqual(want);
        const tally = (p: Pipeline) => p.stages.map((st) => ({ name: st.name, counters: { ...st.counters }, byDirection: [...st.verdictsByDirection] }));
        expect(tally(picked)).toEqual(tally(filtered));
        expect(tally(packed)).toEqual(tally(filtered));
        changeBetweenRounds(cluster, state, random, round);
        // The masks follow the change a turn later; until then the chunk walk reads the filters.
        picked.refreshMasks();
        packed.refreshMasks();
      }
      pickedCalls += spies.reduce((n, spy) => n + spy.mock.results.filter((r) => r.value === true).length, 0);
      // Some stage skipped records (so the masks picked a part of a chunk) and counted them.
      expect(picked.stages.some((st) => st.counters.skipped > 0)).toBe(true);
      for (const p of [picked, packed, filtered]) p.dispose();
    }
    expect(pickedCalls).toBeGreaterThan(0);
  }, 120_000);
});
