// `allows` (one packet per call, the agent's judge) walks both directions in
// one module call per stage when the stages decide pairs (ABI 1.4). Against
// the one-direction walk of the same pipeline and the unindexed evaluation,
// over random clusters, flows and changes: every packet must get the same
// verdict, and a stage that does not decide pairs must see exactly the calls
// the one-direction walk makes of it.
import { describe, it, expect, vi } from 'vitest';
import type { Packet } from '../contract.js';
import { defaultPipeline, type PipelineSpec } from './spec.js';
import type { Pipeline } from './pipeline.js';
import type { Stage } from './stage.js';
import { OFF_DIRECTION } from '../abi/record.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { changeBetweenRounds, engineFor, loadState } from '../../bench/harness.js';
import { seededRandom } from '../dataplane/seeded-random.js';

const SCALE: Scale = { name: 'allows-pairs', namespaces: 6, pods: 240, networkPolicies: 30, clusterNetworkPolicies: 8 };

function spec(config: Record<string, unknown>): PipelineSpec {
  return { stages: defaultPipeline().stages.map((s) => ({ ...s, config: { ...(s.config ?? {}), ...config } })) };
}

function oneByOne(p: Pipeline, packets: readonly Packet[], pairs: boolean): number[] {
  const was = p.pairWalk;
  p.pairWalk = pairs;
  try {
    return packets.map((pk) => (p.allows(pk) ? 1 : 0));
  } finally {
    p.pairWalk = was;
  }
}

type Cluster = ReturnType<typeof generateCluster>;

function packetsFor(cluster: Cluster, seed: number, round: number): Packet[] {
  // Half the same every round, so answers cached before a change are asked for again after it.
  return [...generateFlows(cluster, 150, seed).packets, ...generateFlows(cluster, 150, seed * 10 + round).packets];
}

/** A random cluster and three pipelines over it: with decision caches, without, and without caches or the rule index. */
function pipelinesFor(seed: number) {
  const cluster = generateCluster(SCALE, seed);
  const state = loadState(cluster);
  const engine = engineFor(state);
  const built = { cached: engine.build(spec({})), uncached: engine.build(spec({ decisionCache: false })), unindexed: engine.build(spec({ decisionCache: false, ruleIndex: false })) };
  return { cluster, state, ...built, random: seededRandom(seed), dispose: () => Object.values(built).forEach((p) => p.dispose()) };
}

function enforcing(p: Pipeline): Stage[] {
  return p.stages.filter((s) => s.mode === 'enforce');
}

describe('allows with the pair walk', () => {
  it('gives every packet the verdict of the one-direction walk and of the unindexed evaluation, with one module call per stage for both directions', () => {
    let compared = 0;
    let allowed = 0;
    for (const seed of [11, 12, 13]) {
      const { cluster, state, cached, uncached, unindexed, random, dispose } = pipelinesFor(seed);
      for (const p of [cached, uncached]) expect(enforcing(p).every((s) => s.decidesPairs)).toBe(true);
      for (let round = 0; round < 4; round++) {
        const packets = packetsFor(cluster, seed, round);
        const want = oneByOne(unindexed, packets, false);
        expect(oneByOne(uncached, packets, false)).toEqual(want);
        // The pair walk: its module calls are pair calls only, none of one direction.
        const pairCalls = enforcing(uncached).flatMap((s) => [vi.spyOn(s, 'decidePairs'), vi.spyOn(s, 'decidePairOne')]);
        const singleCalls = enforcing(uncached).map((s) => vi.spyOn(s, 'decide'));
        expect(oneByOne(uncached, packets, true)).toEqual(want);
        expect(pairCalls.reduce((n, spy) => n + spy.mock.calls.length, 0)).toBeGreaterThan(0);
        expect(singleCalls.reduce((n, spy) => n + spy.mock.calls.length, 0)).toBe(0);
        vi.restoreAllMocks();
        // Twice through the cached pipeline: the second time the decision caches' pair entries answer.
        expect(oneByOne(cached, packets, true)).toEqual(want);
        expect(oneByOne(cached, packets, true)).toEqual(want);
        compared += packets.length;
        allowed += want.reduce((a, b) => a + b, 0);
        changeBetweenRounds(cluster, state, random, round);
      }
      dispose();
    }
    // Both verdicts occur often, so the comparison covers them.
    expect(allowed).toBeGreaterThan(compared / 10);
    expect(compared - allowed).toBeGreaterThan(compared / 10);
  }, 120_000);

  it('walks one direction at a time from the first stage that does not decide pairs, so that stage is asked exactly what the one-direction walk asks it', () => {
    const seed = 21;
    const { cluster, state, uncached: p, unindexed, random, dispose } = pipelinesFor(seed);
    const stages = enforcing(p);
    expect(stages.length).toBeGreaterThan(2);
    // A middle stage as if its module had no kwp_decide_pair.
    const plain = stages[Math.floor(stages.length / 2)];
    vi.spyOn(plain, 'decidesPairs', 'get').mockReturnValue(false);
    // Whether a stage decides pairs changes only with its instance, which the
    // pipeline's subject masks follow; the mock changes it behind the stage's back.
    p.refreshMasks();
    let askedOfPlain = 0;
    for (let round = 0; round < 3; round++) {
      const packets = packetsFor(cluster, seed, round);
      const want = oneByOne(unindexed, packets, false);
      // What the plain stage is asked, in order: the packet and the direction of each call.
      const asked = (pairs: boolean): string[] => {
        const calls: string[] = [];
        let current = 0;
        const original = plain.decide.bind(plain);
        const spy = vi.spyOn(plain, 'decide').mockImplementation((rec: Uint8Array) => {
          calls.push(`${current}:${rec[OFF_DIRECTION]}`);
          return original(rec);
        });
        const got: number[] = [];
        const was = p.pairWalk;
        p.pairWalk = pairs;
        for (; current < packets.length; current++) got.push(p.allows(packets[current]) ? 1 : 0);
        p.pairWalk = was;
        spy.mockRestore();
        expect(got).toEqual(want);
        return calls;
      };
      const single = asked(false);
      const paired = asked(true);
      expect(paired).toEqual(single);
      askedOfPlain += single.length;
      changeBetweenRounds(cluster, state, random, round);
    }
    // The plain stage was reached, so the comparison says something.
    expect(askedOfPlain).toBeGreaterThan(0);
    dispose();
  }, 120_000);
});
