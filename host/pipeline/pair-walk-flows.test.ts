// Flow recording through the pair walk (ABI 1.4, kwp_decide_pair) against
// the one-direction walk and the one-packet path (`allows`), over random
// clusters and flow mixes with changes between rounds: the same packets,
// recorded by each walk into a buffer of its own, must leave the same slots
// (tuple, verdict, per direction the outcome, deciding stage, reason and
// rule codes, and every audit stage's would-be verdict and codes), and the
// recorder must make the same flow records of them.
import { describe, it, expect, vi } from 'vitest';
import { defaultPipeline, type PipelineSpec } from './spec.js';
import type { Pipeline } from './pipeline.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { changeBetweenRounds, engineFor, loadState } from '../../bench/harness.js';
import { seededRandom } from '../dataplane/seeded-random.js';
import { FlowRecorder } from '../flow-records/flow-recorder.js';
import { AUDIT_WORDS, FlowBuffer, Outcome, SLOT_WORDS, W_DIRECTIONS } from '../flow-records/flow-buffer.js';
import type { FlowRecord } from '../flow-records/flow-record.js';

const SCALE: Scale = { name: 'pair-walk-flows', namespaces: 6, pods: 240, networkPolicies: 30, clusterNetworkPolicies: 8 };
const REVISION = 7;

/** The default pipeline, with `audits` two audit stages (one tiered, one NetworkPolicy), each stage's config extended by `config`. */
function spec(config: Record<string, unknown>, audits: boolean): PipelineSpec {
  const stages = defaultPipeline().stages.map((s) => ({ ...s, config: { ...(s.config ?? {}), ...config } }));
  if (!audits) return { stages };
  stages.splice(1, 0, { name: 'cnp-admin-audit', label: 'CNP:Admin (audit)', module: 'cluster-network-policy', mode: 'audit', config: { tier: 'Admin', ...config } });
  stages.push({ name: 'np-audit', label: 'NP (audit)', module: 'network-policy', mode: 'audit', config });
  return { stages };
}

/**
 * A slot's words, its directions' codes and its revision (its time left
 * out: claims stamp a coarse clock), with its audit words; one array per
 * slot. The codes and the egress walks the pair walk left to the drain (SlotFlag.CodesDeferred, Outcome.Pending) are asked
 * and finished first, as the drain does, in a copy of the buffer (the
 * recorder does it to the originals itself).
 */
function slots(buffer: FlowBuffer, pipeline: Pipeline, pending?: { n: number }): number[][] {
  const copy = new FlowBuffer(buffer.capacity);
  copy.words.set(buffer.words);
  copy.v6.set(buffer.v6);
  copy.audits.set(buffer.audits);
  copy.icmp.set(buffer.icmp);
  copy.codes.set(buffer.codes);
  const out: number[][] = [];
  for (let slot = 0; slot < buffer.pending; slot++) {
    // Codes the walk left to the drain (a pipeline whose decision caches are on) are asked first, as the drain asks them.
    if (copy.codesDeferred(slot)) pipeline.attributeDeferred(copy, slot);
    if (copy.direction(slot, 0).outcome === Outcome.Pending) {
      if (pending) pending.n++;
      pipeline.finishEgress(copy, slot);
      expect(copy.direction(slot, 0).outcome).not.toBe(Outcome.Pending);
    }
    const words = Array.from(copy.words.subarray(slot * SLOT_WORDS, (slot + 1) * SLOT_WORDS));
    // The directions as readers see them (codes only of an Accept or a Deny; the rest are left unwritten).
    for (let dir = 0; dir < 2; dir++) {
      const d = copy.direction(slot, dir);
      words[W_DIRECTIONS + dir] = d.outcome | ((d.stage + 1) << 8);
      words.push(d.reason, d.rule);
    }
    words.push(buffer.revision(slot));
    out.push([...words, ...Array.from(copy.audits.subarray(slot * AUDIT_WORDS, (slot + 1) * AUDIT_WORDS))]);
  }
  return out;
}

/** The recorder's records without their times, in a stable order. */
function records(recorder: FlowRecorder): Array<Omit<FlowRecord, 'firstSeen' | 'lastSeen'>> {
  return recorder.flush().map(({ firstSeen: _f, lastSeen: _l, ...rest }) => rest).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
}

// With audit stages the pair walk claims each record's slot before the walk and the
// pair calls copy the codes (decideChunkRecorded); without, the codes stay in the
// modules' memory until the chunk's end and each record is written in one pass
// (decideChunkRecordedInPlace).
describe.each([
  { pipeline: 'with two audit stages', audits: true },
  { pipeline: 'without audit stages', audits: false },
])('flow recording through the pair walk, $pipeline', ({ audits }) => {
  it('records every packet as the one-direction walk and allows do, over random clusters, flows and changes', () => {
    // What the comparison covered, counted in the one-direction walk's slots.
    const seen: Record<string, number> = { egressLeftToTheDrain: 0, egressDeny: 0, egressAccept: 0, ingressAccept: 0, ingressDenyThenEgress: 0, icmpIngressDenyThenEgress: 0, egressDefault: 0, pairRecordedCalls: 0 };
    if (audits) seen.auditSaid = 0;
    else seen.chunksRecordedInPlace = 0;
    for (const seed of [3, 4, 5]) {
      const cluster = generateCluster(SCALE, seed);
      const state = loadState(cluster);
      const engine = engineFor(state);
      const cached = engine.build(spec({}, audits), 'pipeline', REVISION);
      const uncached = engine.build(spec({ decisionCache: false }, audits), 'pipeline', REVISION);
      const oneDirection = engine.build(spec({ decisionCache: false }, audits), 'pipeline', REVISION);
      oneDirection.pairWalk = false;
      // allows: the recorded pair walk for a chunk of one, and the one-direction walk.
      const single = engine.build(spec({ decisionCache: false }, audits), 'pipeline', REVISION);
      const singleOneDirection = engine.build(spec({ decisionCache: false }, audits), 'pipeline', REVISION);
      singleOneDirection.pairWalk = false;
      const walks: Pipeline[] = [oneDirection, cached, uncached, single, singleOneDirection];
      for (const p of [cached, uncached]) expect(p.stages.filter((s) => s.mode === 'enforce').every((s) => s.decidesPairs)).toBe(true);
      const pairCalls = [cached, uncached].flatMap((p) => p.stages.map((s) => vi.spyOn(s, 'decidePairs')));
      // Without audit stages: the chunks whose stages all left their answers in place (the pipeline asks each stage per chunk).
      const inPlace = [cached, uncached, single].map((p) => vi.spyOn(p.stages.find((s) => s.mode === 'enforce')!, 'pairAnswersInPlace'));
      const random = seededRandom(seed);
      for (let round = 0; round < 3; round++) {
        // A recorder per walk and round, so each round's slots start at the buffer's slot 0.
        const recorders = walks.map((p) => {
          const r = new FlowRecorder({ state, node: 'node-a', intervalMs: 60_000, bufferCapacity: 4096 });
          p.flowBuffer = r.buffer;
          return r;
        });
        // 240 packets (three full chunks and a short one), most of them the same every round, so
        // the cached walk answers some from its pair entries, recorded before a change.
        const tcp = [...generateFlows(cluster, 100, seed).packets, ...generateFlows(cluster, 100, seed * 10 + round).packets];
        // And ICMP echo requests between the same ends: the slot keeps no ICMP type, so the pair walk walks their egress on itself.
        const packets = [...tcp, ...tcp.slice(0, 40).map((p) => ({ ...p, protocol: 1, srcPort: 0, dstPort: 0, icmpType: 8, icmpCode: 0 }))];
        const verdicts = walks.map((p) => {
          const out = new Uint8Array(packets.length);
          if (p === single || p === singleOneDirection) packets.forEach((pk, i) => { out[i] = p.allows(pk) ? 1 : 0; });
          else p.allowsBatch(packets, out);
          return Array.from(out);
        });
        // The cached walk once more: now every answer comes from a pair entry of the decision caches.
        const again = new Uint8Array(packets.length);
        cached.allowsBatch(packets, again);
        for (const v of [...verdicts.slice(1), Array.from(again)]) expect(v).toEqual(verdicts[0]);
        const want = slots(oneDirection.flowBuffer!, oneDirection);
        expect(want).toHaveLength(packets.length);
        const left = { n: 0 };
        const cachedSlots = slots(cached.flowBuffer!, cached, left);
        expect(cachedSlots).toHaveLength(2 * packets.length);
        // Field by field, so a difference names the packet and the field.
        for (const [name, got] of [['pair walk, cached', cachedSlots.slice(0, packets.length)], ['pair walk, cached, from its pair entries', cachedSlots.slice(packets.length)], ['pair walk, uncached', slots(uncached.flowBuffer!, uncached, left)], ['allows', slots(single.flowBuffer!, single, left)], ['allows, one direction', slots(singleOneDirection.flowBuffer!, singleOneDirection)]] as const) {
          expect(got, name).toHaveLength(packets.length);
          for (let i = 0; i < packets.length; i++) expect(got[i], `${name}: packet ${i}`).toEqual(want[i]);
        }
        seen.egressLeftToTheDrain += left.n;
        const b = oneDirection.flowBuffer!;
        for (let slot = 0; slot < b.pending; slot++) {
          const e = b.direction(slot, 0);
          const g = b.direction(slot, 1);
          if (e.outcome === Outcome.Deny) seen.egressDeny++;
          if (e.outcome === Outcome.Accept) seen.egressAccept++;
          if (e.outcome === Outcome.Default) seen.egressDefault++;
          if (g.outcome === Outcome.Accept) seen.ingressAccept++;
          // Ingress denied by an earlier stage than the one that ended egress (or none did): the pair walk must walk egress on.
          if (g.outcome === Outcome.Deny && (e.outcome === Outcome.Default || e.stage > g.stage)) {
            if (b.protocol(slot) === 1) seen.icmpIngressDenyThenEgress++;
            else seen.ingressDenyThenEgress++;
          }
          if (audits) for (let dir = 0; dir < 2; dir++) for (let k = 0; k < 2; k++) if (b.audit(slot, dir, k).verdict > 1) seen.auditSaid++;
        }
        // The records the recorder makes of them, field by field (the cached walk recorded every packet twice).
        const [base, ...rest] = recorders.map(records);
        expect(base.length).toBeGreaterThan(10);
        expect(rest[0].map((r) => ({ ...r, count: r.count / 2 }))).toEqual(base);
        for (const got of rest.slice(1)) expect(got).toEqual(base);
        // A change before the next round: a pod relabelled, a NetworkPolicy added, a ClusterNetworkPolicy deleted.
        changeBetweenRounds(cluster, state, random, round);
      }
      // The pair walk recorded through its own calls: with the codes asked for, or (no audit stages) left in place.
      seen.pairRecordedCalls += pairCalls.reduce((n, spy) => n + spy.mock.calls.filter((c) => audits === (c[4] !== undefined)).length, 0);
      if (!audits) seen.chunksRecordedInPlace += inPlace.reduce((n, spy) => n + spy.mock.results.filter((r) => r.value !== undefined).length, 0);
      for (const p of walks) p.dispose();
    }
    // Every case the pair walk records differently from how it decides occurred.
    for (const [what, n] of Object.entries(seen)) expect(n, what).toBeGreaterThan(0);
  }, 180_000);
});

describe('flow recording on the one-packet path', () => {
  it("records a stage's failure as Failure at that stage, with no codes, as the recorded chunk walk records it", () => {
    const cluster = generateCluster(SCALE, 11);
    const state = loadState(cluster);
    const engine = engineFor(state);
    // np fails closed, and its module's calls throw: the packet's first np call fails.
    const failing = (): Pipeline => {
      const stages = spec({ decisionCache: false }, false).stages.map((s) => (s.name === 'np' ? { ...s, failurePolicy: 'fail-closed' as const } : s));
      const p = engine.build({ stages }, 'pipeline', REVISION);
      const np = p.stages.find((s) => s.name === 'np')!;
      const inst = (np as unknown as { current: { decidePairOne(): number; decidePairsInto(): void } }).current;
      const fail = (): never => { throw new Error('np fails'); };
      vi.spyOn(inst, 'decidePairOne').mockImplementation(fail);
      vi.spyOn(inst, 'decidePairsInto').mockImplementation(fail);
      return p;
    };
    let failures = 0;
    let inPlace = 0;
    for (const packet of generateFlows(cluster, 24, 11).packets) {
      const single = failing();
      const chunk = failing();
      const walk = vi.spyOn(single as unknown as { allowsRecordedInPlace(p: unknown, f: unknown): boolean | undefined }, 'allowsRecordedInPlace');
      for (const p of [single, chunk]) p.flowBuffer = new FlowBuffer(16);
      // The one-packet walk first: pipelines built alike share their stages' instances, so a failure breaks both.
      const allowed = single.allows(packet) ? 1 : 0;
      const out = new Uint8Array(1);
      chunk.allowsBatch([packet], out);
      expect(allowed).toBe(out[0]);
      if (walk.mock.results[0]?.value !== undefined) inPlace++;
      const got = slots(single.flowBuffer!, single);
      expect(got).toEqual(slots(chunk.flowBuffer!, chunk));
      for (let dir = 0; dir < 2; dir++) {
        const d = single.flowBuffer!.direction(0, dir);
        if (d.outcome === Outcome.Failure) {
          failures++;
          expect(single.stages[d.stage].name).toBe('np');
          expect([d.reason, d.rule]).toEqual([0, 0]);
        }
      }
      single.dispose();
      chunk.dispose();
    }
    // The one-packet walk recorded in place, and np's failures were among what it recorded.
    expect(inPlace).toBeGreaterThan(0);
    expect(failures).toBeGreaterThan(0);
  }, 120_000);
});
