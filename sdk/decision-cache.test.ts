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
