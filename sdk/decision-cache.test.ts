// The SDK's decision cache (decision-cache.ts), through the built-in modules
// that opt into it: a cached answer must be exactly the answer the module
// would compute, and every delivery that could change an answer must make it
// stale.
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects, type HarnessPod, type Probe } from '../test/fixtures/abi-harness.js';
import { xyzCluster, networkPolicy, podLabel, nsLabel, all, ALL_PODS } from '../test/netpol/cluster.js';
import { seededRandom } from '../host/dataplane/seeded-random.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const networkPolicyWasm = join(root, 'dist/wasm/network-policy.wasm');
const clusterPolicyWasm = join(root, 'dist/wasm/cluster-network-policy.wasm');
const allowAllWasm = join(root, 'dist/wasm/allow-all.wasm');

beforeAll(() => {
  for (const f of [networkPolicyWasm, clusterPolicyWasm, allowAllWasm]) if (!existsSync(f)) throw new Error(`${f} is missing: run "npm run build:wasm" first`);
});

const policies = () => [
  networkPolicy('x', 'a-from-b', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }], ports: [{ port: 80 }] }] }),
  networkPolicy('y', 'isolate-all', { podSelector: all, policyTypes: ['Ingress', 'Egress'], egress: [{ to: [{ namespaceSelector: nsLabel('z') }] }] }),
  networkPolicy('z', 'from-x', { podSelector: podLabel('c'), ingress: [{ from: [{ namespaceSelector: nsLabel('x') }] }, { from: [{ ipBlock: { cidr: '192.0.2.0/24', except: ['192.0.2.128/25'] } }] }] }),
];

async function networkPolicyModule(config: Record<string, unknown> = {}): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(networkPolicyWasm, config);
  for (const p of podsFromObjects(xyzCluster())) h.upsertPod(p);
  h.snapshot(policies());
  return h;
}

/** Verdicts and reasons of `probes`, two records each, in one batch. */
function decide(h: ModuleHarness, probes: Probe[]): string[] {
  const n = h.writeProbes(probes);
  h.decideBatch(n);
  return Array.from({ length: n }, (_, i) => `${h.verdictAt(i)}#${h.reasonAt(i)}`);
}

const delta = (h: ModuleHarness, fn: () => void) => {
  const before = h.cacheStats()!;
  fn();
  const after = h.cacheStats()!;
  return { hits: after.hits - before.hits, misses: after.misses - before.misses };
};

const relabel = (p: HarnessPod, podLabels: Record<string, string>): HarnessPod => ({ ...p, podLabels });

describe('the decision cache', () => {
  it('answers a repeated question from the cache with the verdict and reason the module computed', async () => {
    const h = await networkPolicyModule();
    const probe: Probe = { src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 };
    const first = h.probe(probe);
    expect(delta(h, () => expect(h.probe(probe)).toEqual(first))).toEqual({ hits: 2, misses: 0 });
    expect(first.ingress).toMatchObject({ verdict: 'Accept', text: 'x/a-from-b' });
  });

  it('treats a new source port as the same question and a new destination port, protocol or direction as a new one', async () => {
    const h = await networkPolicyModule();
    h.probe({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80, srcPort: 40000 });
    expect(delta(h, () => h.probe({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80, srcPort: 51234 }))).toEqual({ hits: 2, misses: 0 });
    expect(delta(h, () => expect(h.probe({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 81 }).ingress.verdict).toBe('Deny'))).toEqual({ hits: 0, misses: 2 });
    expect(delta(h, () => h.probe({ src: 'x/b', dst: 'x/a', protocol: 'UDP', port: 80 }))).toEqual({ hits: 0, misses: 2 });
    expect(delta(h, () => h.probe({ src: 'x/a', dst: 'x/b', protocol: 'TCP', port: 80 }))).toEqual({ hits: 0, misses: 2 });
  });

  it('answers repeated ICMP questions from the cache too', async () => {
    const h = await networkPolicyModule();
    const ping: Probe = { src: 'x/b', dst: 'x/a', protocol: 'ICMP', port: 0 };
    const first = h.probe(ping);
    expect(delta(h, () => expect(h.probe(ping)).toEqual(first))).toEqual({ hits: 2, misses: 0 });
  });

  it('makes every answer stale when a policy changes, and the next answer follows the new policy', async () => {
    const h = await networkPolicyModule();
    const probe: Probe = { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 };
    expect(h.probe(probe).allowed).toBe(false);
    h.upsert(networkPolicy('x', 'a-from-b', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: all }], ports: [{ port: 80 }] }] }));
    expect(delta(h, () => expect(h.probe(probe).ingress.verdict).toBe('Accept'))).toMatchObject({ hits: 0 });
    h.delete(networkPolicy('x', 'a-from-b', { podSelector: podLabel('a') }));
    expect(delta(h, () => expect(h.probe(probe).ingress.verdict).toBe('Next'))).toMatchObject({ hits: 0 });
  });

  it('makes answers about a relabelled pod stale and keeps answers about other pods', async () => {
    const h = await networkPolicyModule();
    const toA: Probe = { src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 };
    const other: Probe = { src: 'z/a', dst: 'z/c', protocol: 'TCP', port: 80 };
    expect(h.probe(toA).allowed).toBe(true);
    h.probe(other);
    h.upsertPod(relabel(h.podByKey('x/b')!, { pod: 'not-b' }));
    expect(delta(h, () => expect(h.probe(toA).ingress.verdict).toBe('Deny'))).toEqual({ hits: 0, misses: 2 });
    expect(delta(h, () => h.probe(other))).toEqual({ hits: 2, misses: 0 });
  });

  it('relabelling one of several pods that share a label set leaves the others as they were', async () => {
    const h = await networkPolicyModule();
    h.upsert(networkPolicy('z', 'c-from-any-b', { podSelector: podLabel('c'), ingress: [{ from: [{ namespaceSelector: all, podSelector: podLabel('b') }] }] }));
    // z/c also admits all of namespace x (from-x), so the sources are y/b and z/b.
    const from = (src: string) => h.probe({ src, dst: 'z/c', protocol: 'UDP', port: 53 }).ingress.verdict;
    expect([from('y/b'), from('z/b')]).toEqual(['Accept', 'Accept']);
    h.upsertPod(relabel(h.podByKey('y/b')!, { pod: 'not-b' }));
    expect([from('y/b'), from('z/b')]).toEqual(['Deny', 'Accept']);
    h.upsertPod(relabel(h.podByKey('y/b')!, { pod: 'b' }));
    h.upsertPod(relabel(h.podByKey('z/b')!, { pod: 'not-b' }));
    expect([from('y/b'), from('z/b')]).toEqual(['Accept', 'Deny']);
  });

  it('makes answers about a deleted pod stale', async () => {
    const h = await networkPolicyModule();
    const probe: Probe = { src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 };
    expect(h.probe(probe).ingress.verdict).toBe('Accept');
    const a = h.podByKey('x/a')!;
    h.deletePod(a.id);
    // The record still names the deleted pod's id, as a racing host might:
    // the module must not answer from before the deletion.
    h.upsertPod(a);
    h.deletePod(a.id);
    expect(delta(h, () => h.decideBatch(h.writeProbes([{ src: 'x/b', dst: a.ips[0], protocol: 'TCP', port: 80 }])))).toMatchObject({ hits: 0 });
  });

  it('keys IPv6 addresses in full', async () => {
    const h = await ModuleHarness.load(networkPolicyWasm);
    for (const p of podsFromObjects(xyzCluster())) h.upsertPod(p);
    h.snapshot([networkPolicy('x', 'v6', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '2001:db8::/64', except: ['2001:db8::ff/128'] } }] }] })]);
    const from = (src: string) => h.probe({ src, dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.verdict;
    expect([from('2001:db8::fe'), from('2001:db8::ff'), from('2001:db8::fe'), from('2001:db8::ff')]).toEqual(['Accept', 'Deny', 'Accept', 'Deny']);
    expect(h.cacheStats()).toEqual({ hits: 4, misses: 4 });
  });

  it('never changes a verdict or a reason over random questions interleaved with pod and policy changes', async () => {
    const cached = await networkPolicyModule();
    const computed = await networkPolicyModule({ decisionCache: false });
    expect(computed.cacheStats()).toBeUndefined();
    const random = seededRandom(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)];
    const addresses = [...ALL_PODS, '192.0.2.5', '192.0.2.200', '203.0.113.9'];
    let changes = 0;
    for (let round = 0; round < 300; round++) {
      const probes: Probe[] = Array.from({ length: 32 }, () => ({
        src: pick(addresses), dst: pick(addresses), protocol: pick(['TCP', 'UDP', 'SCTP'] as const), port: pick([80, 81, 443]), srcPort: 30000 + Math.floor(random() * 1000),
      }));
      expect(decide(cached, probes)).toEqual(decide(computed, probes));
      const roll = random();
      if (roll < 0.15) {
        const key = pick(ALL_PODS);
        const labels = { pod: pick(['a', 'b', 'c']) };
        for (const h of [cached, computed]) h.upsertPod(relabel(h.podByKey(key)!, labels));
        changes++;
      } else if (roll < 0.25) {
        const policy = networkPolicy(pick(['x', 'y', 'z']), pick(['a-from-b', 'extra']), {
          podSelector: podLabel(pick(['a', 'b', 'c'])), ingress: [{ from: [{ podSelector: podLabel(pick(['a', 'b', 'c'])) }], ports: [{ port: pick([80, 81]) }] }],
        });
        for (const h of [cached, computed]) h.upsert(policy);
        changes++;
      }
    }
    const stats = cached.cacheStats()!;
    expect(changes).toBeGreaterThan(30);
    // Both paths were exercised: the comparison is not between two computations.
    expect(stats.hits).toBeGreaterThan(1000);
    expect(stats.misses).toBeGreaterThan(1000);
  });
});

describe('the decisionCache stage config', () => {
  it('turns the cache off with false and is not passed on to the evaluator', async () => {
    const h = await ModuleHarness.load(clusterPolicyWasm, { tier: 'Admin', decisionCache: false });
    expect(h.cacheStats()).toBeUndefined();
    expect((await ModuleHarness.load(clusterPolicyWasm, { tier: 'Admin' })).cacheStats()).toEqual({ hits: 0, misses: 0 });
  });

  it('leaves the evaluator refusing its own unknown keys', async () => {
    await expect(ModuleHarness.load(clusterPolicyWasm, { tier: 'Admin', decisionCache: true, extra: 1 })).rejects.toThrow('unknown config key "extra"');
  });

  it('must be true or false', async () => {
    await expect(ModuleHarness.load(networkPolicyWasm, { decisionCache: 'yes' })).rejects.toThrow('config.decisionCache must be true or false');
  });

  it('cannot turn on a cache the evaluator does not offer', async () => {
    await expect(ModuleHarness.load(allowAllWasm, { decisionCache: true })).rejects.toThrow('this evaluator does not cache decisions');
    expect((await ModuleHarness.load(allowAllWasm, {})).cacheStats()).toBeUndefined();
  });
});

// An entry holds two numbers of interned answers (reason and rule codes), not
// the codes: the answer table holds ANSWERS (32,768) distinct answers, then
// starts again and makes every entry stale.
describe('the decision cache with interned answers', () => {
  const manyAnswersWasm = join(root, 'dist/wasm/fixtures/many-answers.wasm');
  const question = (port: number, direction: 0 | 1 | 2, src = '10.1.0.1') => ({ probe: { src, dst: '10.2.0.2', protocol: 'TCP' as const, port }, direction });
  const ports = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it('answers both directions of a pair question from one entry, each with its own verdict, reason and rule', async () => {
    const cached = await ModuleHarness.load(manyAnswersWasm);
    const computed = await ModuleHarness.load(manyAnswersWasm, { decisionCache: false });
    const questions = ports(1, 600).map((p) => question(p, 2));
    const expected = computed.decideQuestions(questions);
    // The fixture answers the directions differently: an ingress read from the egress answer would show.
    expect(expected[0]).toEqual(['Accept#1#3', 'Next#2#4']);
    expect(expected[1]).toEqual(['Next#2#6', 'Deny#3#7']);
    // A denied egress ends the packet: the module says Next with no codes for its ingress.
    expect(expected[2]).toEqual(['Deny#2#9', 'Next#0#0']);
    expect(cached.decideQuestions(questions)).toEqual(expected);
    expect(delta(cached, () => expect(cached.decideQuestions(questions)).toEqual(expected))).toEqual({ hits: 600, misses: 0 });
    // One-direction questions about the same packets are other entries, with their own answers.
    const one = ports(1, 600).flatMap((p) => [question(p, 0), question(p, 1)]);
    const oneExpected = computed.decideQuestions(one);
    expect(cached.decideQuestions(one)).toEqual(oneExpected);
    expect(delta(cached, () => expect(cached.decideQuestions(one)).toEqual(oneExpected))).toEqual({ hits: 1200, misses: 0 });
  });

  it('keeps answers that share a reason code or a rule code apart', async () => {
    const cached = await ModuleHarness.load(manyAnswersWasm);
    const computed = await ModuleHarness.load(manyAnswersWasm, { decisionCache: false });
    // Ports 2 and 3 share reason 2 egress and reason 3 ingress, each answer with its own rule code.
    const questions = ports(2, 3).flatMap((p) => [question(p, 0), question(p, 1)]);
    const expected = computed.decideQuestions(questions);
    expect(expected.map((a) => a[0])).toEqual(['Next#2#6', 'Deny#3#7', 'Deny#2#9', 'Accept#3#10']);
    for (let round = 0; round < 3; round++) expect(cached.decideQuestions(questions)).toEqual(expected);
    expect(cached.cacheStats()).toEqual({ hits: 8, misses: 4 });
  });

  it('starts the answer table again when it is full, and no entry written before then is used again', async () => {
    const cached = await ModuleHarness.load(manyAnswersWasm);
    const computed = await ModuleHarness.load(manyAnswersWasm, { decisionCache: false });
    const check = (questions: ReturnType<typeof question>[]) => {
      const expected = computed.decideQuestions(questions);
      return delta(cached, () => expect(cached.decideQuestions(questions)).toEqual(expected));
    };
    const early = ports(1, 3000).map((p) => question(p, 0));
    expect(check(early)).toEqual({ hits: 0, misses: 3000 });
    expect(check(early)).toEqual({ hits: 3000, misses: 0 });
    // 30,000 more distinct answers: 33,000 in all, so the table started again at the 32,769th,
    // here port 32,769 (every early entry was written before that).
    expect(check(ports(3001, 33000).map((p) => question(p, 0)))).toEqual({ hits: 0, misses: 30000 });
    // Had the early entries stayed fresh, they would be hits reading numbers of the new table's answers.
    expect(check(early)).toEqual({ hits: 0, misses: 3000 });
    // Entries written since the restart are answered from the cache.
    expect(check(ports(32800, 33000).map((p) => question(p, 0)))).toEqual({ hits: 201, misses: 0 });
    // And the early ones again, rewritten just now (bar the few whose sets the 30,000 filled).
    expect(check(early).hits).toBeGreaterThan(2900);
  });

  it('never gives a wrong answer over pair and one-direction questions from many sources, across restarts of the answer table', async () => {
    const cached = await ModuleHarness.load(manyAnswersWasm);
    const computed = await ModuleHarness.load(manyAnswersWasm, { decisionCache: false });
    const random = seededRandom(11);
    const sources = Array.from({ length: 40 }, (_, i) => `10.1.${i >> 4}.${(i & 15) + 1}`);
    for (let round = 0; round < 40; round++) {
      const questions = Array.from({ length: 2048 }, () => question(1 + Math.floor(random() * 65535), ([0, 1, 2] as const)[Math.floor(random() * 3)], sources[Math.floor(random() * sources.length)]));
      // Every question twice in a round: the second one is a hit unless its set overflowed.
      const twice = [...questions, ...questions];
      expect(cached.decideQuestions(twice)).toEqual(computed.decideQuestions(twice));
    }
    const stats = cached.cacheStats()!;
    // Both paths, and restarts (81,920 questions with mostly distinct answers): not a comparison of two computations.
    expect(stats.hits).toBeGreaterThan(60000);
    expect(stats.misses).toBeGreaterThan(80000);
  });
});
