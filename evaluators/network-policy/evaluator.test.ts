// The NetworkPolicy module on its own, through the ABI: what the pipeline
// tables cannot show (ICMP, reason texts, subjects, policy and pod churn,
// relists, invalid input) and that deciding allocates nothing.
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects, type Probe } from '../../test/fixtures/abi-harness.js';
import { xyzCluster, networkPolicy, podLabel, nsLabel, all, pod, type PolicySpec } from '../../test/netpol/cluster.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const release = join(root, 'dist/wasm/network-policy.wasm');
const rtraced = join(root, 'dist/wasm/fixtures/network-policy-rtrace.wasm');


beforeAll(() => {
  // scripts/build-wasm.mjs builds both (the traced one with ASC_RTRACE) and rebuilds them when evaluator or SDK code changes.
  for (const file of [release, rtraced]) if (!existsSync(file)) throw new Error(`${file} is missing: run "npm run build:wasm" first`);
});

const np = (ns: string, name: string, spec: PolicySpec) => networkPolicy(ns, name, spec);

async function moduleWith(policies: unknown[], file = release): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(file);
  for (const p of podsFromObjects(xyzCluster())) h.upsertPod(p);
  h.snapshot(policies);
  return h;
}

describe('the NetworkPolicy module', () => {
  it('denies ICMP through a rule with ports and allows it through a rule without ports', async () => {
    const h = await moduleWith([
      np('x', 'web-only', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 80 }] }] }),
      np('x', 'from-b', { podSelector: podLabel('b'), ingress: [{ from: [{ podSelector: podLabel('c') }] }] }),
    ]);
    expect(h.probe({ src: 'y/a', dst: 'x/a', protocol: 'ICMP', port: 0 }).ingress.verdict).toBe('Deny');
    expect(h.probe({ src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Accept');
    expect(h.probe({ src: 'x/c', dst: 'x/b', protocol: 'ICMP', port: 0 }).ingress.verdict).toBe('Accept');
    expect(h.probe({ src: 'y/c', dst: 'x/b', protocol: 'ICMP', port: 0 }).ingress.verdict).toBe('Deny');
  });

  it('answers Next for pods no policy selects and for addresses that are no pod, and says why', async () => {
    const h = await moduleWith([np('x', 'deny-a', { podSelector: podLabel('a'), policyTypes: ['Ingress'] })]);
    const toB = h.probe({ src: 'x/a', dst: 'x/b', protocol: 'TCP', port: 80 });
    expect(toB.egress).toMatchObject({ verdict: 'Next', text: 'no NetworkPolicy selects the pod for egress' });
    expect(toB.ingress).toMatchObject({ verdict: 'Next', text: 'no NetworkPolicy selects the pod for ingress' });
    const external = h.probe({ src: '203.0.113.5', dst: 'x/b', protocol: 'TCP', port: 80 });
    expect(external.egress).toMatchObject({ verdict: 'Next', text: 'not a pod this stage knows' });
  });

  it('names the accepting policy and lists the isolating policies of a denial, shortening long lists', async () => {
    const many = Array.from({ length: 7 }, (_, i) => np('x', `deny-${i}`, { podSelector: all, policyTypes: ['Ingress'] }));
    const h = await moduleWith([np('x', 'allow-b', { podSelector: all, ingress: [{ from: [{ podSelector: podLabel('b') }] }] }), ...many]);
    expect(h.probe({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress).toMatchObject({ verdict: 'Accept', text: 'x/allow-b' });
    expect(h.probe({ src: 'y/b', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress).toMatchObject({
      verdict: 'Deny', text: 'no ingress rule of x/allow-b, x/deny-0, x/deny-1, x/deny-2, x/deny-3 and 3 more matched',
    });
  });

  it('names as subjects exactly the pods some policy selects, never host-networked ones, and does not ask for all traffic', async () => {
    const h = await moduleWith([
      np('x', 'a', { podSelector: podLabel('a'), policyTypes: ['Egress'] }),
      np('y', 'all', { podSelector: all }),
    ]);
    h.upsertPod({ id: 100, name: 'h', namespace: 'y', hostNetwork: true, podLabels: { pod: 'h' }, namespaceLabels: { ns: 'y' }, containerPorts: [], ips: ['192.168.0.1'] });
    const subjects = h.subjects();
    expect(subjects).not.toBe('all');
    const byId = new Map(podsFromObjects(xyzCluster()).map((p) => [p.id, `${p.namespace}/${p.name}`]));
    const names = (subjects as number[]).map((id) => byId.get(id) ?? `id ${id}`).sort();
    expect(names).toEqual(['x/a', 'y/a', 'y/b', 'y/c']);
  });

  it('follows policy updates and deletions', async () => {
    const h = await moduleWith([]);
    const probe: Probe = { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 };
    expect(h.probe(probe).ingress.verdict).toBe('Next');
    h.upsert(np('x', 'p', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y') }] }] }));
    expect(h.probe(probe).ingress).toMatchObject({ verdict: 'Accept', text: 'x/p' });
    h.upsert(np('x', 'p', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('z') }] }] }));
    expect(h.probe(probe).ingress).toMatchObject({ verdict: 'Deny', text: 'no ingress rule of x/p matched' });
    h.delete(np('x', 'p', { podSelector: podLabel('a') }));
    expect(h.probe(probe).ingress.verdict).toBe('Next');
    expect(h.subjects()).toEqual([]);
  });

  it('moves isolation to the newly selected pods when a policy changes its podSelector, keeping other policies in place', async () => {
    const h = await moduleWith([
      np('x', 'moving', { podSelector: podLabel('a'), policyTypes: ['Ingress'] }),
      np('x', 'steady', { podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['a', 'c'] }] }, ingress: [{ ports: [{ port: 81 }] }] }),
    ]);
    const verdict = (dst: string, port = 80) => h.probe({ src: 'y/a', dst, protocol: 'TCP', port }).ingress.verdict;
    expect([verdict('x/a'), verdict('x/b'), verdict('x/c'), verdict('x/a', 81)]).toEqual(['Deny', 'Next', 'Deny', 'Accept']);
    h.upsert(np('x', 'moving', { podSelector: podLabel('b'), policyTypes: ['Ingress'] }));
    expect([verdict('x/a'), verdict('x/b'), verdict('x/c'), verdict('x/a', 81)]).toEqual(['Deny', 'Deny', 'Deny', 'Accept']);
    expect(h.probe({ src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.text).toBe('no ingress rule of x/steady matched');
    h.delete(np('x', 'steady', { podSelector: all }));
    expect([verdict('x/a'), verdict('x/b'), verdict('x/c')]).toEqual(['Next', 'Deny', 'Next']);
  });

  it('isolates a pod that appears or is relabelled into a policy, and forgets a deleted one', async () => {
    const h = await moduleWith([np('x', 'deny-web', { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] })]);
    const xa = podsFromObjects(xyzCluster()).find((p) => p.namespace === 'x' && p.name === 'a')!;
    const probe: Probe = { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 };
    expect(h.probe(probe).ingress.verdict).toBe('Next');
    h.upsertPod({ ...xa, podLabels: { pod: 'a', app: 'web' } });
    expect(h.probe(probe).ingress.verdict).toBe('Deny');
    h.upsertPod({ ...xa, podLabels: { pod: 'a' } });
    expect(h.probe(probe).ingress.verdict).toBe('Next');
    h.upsertPod({ id: 50, name: 'new', namespace: 'x', hostNetwork: false, podLabels: { app: 'web' }, namespaceLabels: { ns: 'x' }, containerPorts: [], ips: ['10.0.1.50'] });
    expect(h.probe({ src: 'y/a', dst: 'x/new', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Deny');
    expect(h.subjects()).toEqual([50]);
    h.deletePod(50);
    expect(h.subjects()).toEqual([]);
  });

  it('keeps every remaining pod right while thousands of pods come and go', async () => {
    const h = await ModuleHarness.load(release);
    h.snapshot([np('x', 'web', { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] })]);
    const live = new Map<number, boolean>();
    const add = (id: number) => {
      const web = id % 3 !== 0;
      h.upsertPod({ id, name: `p-${id}`, namespace: 'x', hostNetwork: false, podLabels: web ? { app: 'web' } : {}, namespaceLabels: { ns: 'x' }, containerPorts: [], ips: [`10.1.${id >> 8}.${id & 0xff}`] });
      live.set(id, web);
    };
    for (let id = 1; id <= 3000; id++) add(id);
    // Delete in a scattered order so backward-shift deletion moves entries around.
    for (let k = 0; k < 3000; k++) {
      const id = 1 + ((k * 1237) % 3000);
      if (k % 2 === 0) { h.deletePod(id); live.delete(id); }
    }
    for (let id = 3001; id <= 4000; id++) add(id);
    const expected = [...live].filter(([, web]) => web).map(([id]) => id).sort((a, b) => a - b);
    expect((h.subjects() as number[]).sort((a, b) => a - b)).toEqual(expected);
    const sample = [...live.keys()].filter((_, i) => i % 97 === 0);
    expect(sample.some((id) => live.get(id)) && sample.some((id) => !live.get(id))).toBe(true);
    for (const id of sample) {
      const verdict = h.probe({ src: '192.0.2.1', dst: `x/p-${id}`, protocol: 'TCP', port: 80 }).ingress.verdict;
      expect(`${id}: ${verdict}`).toBe(`${id}: ${live.get(id) ? 'Deny' : 'Next'}`);
    }
  });

  it('keeps enforcing the previous policies during a relist and switches to the new snapshot when it is complete', async () => {
    const h = await moduleWith([np('x', 'old', { podSelector: all, policyTypes: ['Ingress'] })]);
    const probe: Probe = { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 };
    expect(h.probe(probe).ingress.verdict).toBe('Deny');
    const next = np('x', 'new', { podSelector: podLabel('b'), policyTypes: ['Ingress'] });
    h.reset();
    h.upsert(next);
    expect(h.probe(probe).ingress.verdict).toBe('Deny');
    h.synced();
    expect(h.probe(probe).ingress.verdict).toBe('Next');
    expect(h.probe({ ...probe, dst: 'x/b' }).ingress).toMatchObject({ verdict: 'Deny', text: 'no ingress rule of x/new matched' });
  });

  it('matches IPv6 addresses against IPv6 ipBlocks and never against IPv4 ones', async () => {
    const h = await ModuleHarness.load(release);
    const v6 = (id: number, name: string, ip: string) => ({ id, name, namespace: 'x', hostNetwork: false, podLabels: { pod: name }, namespaceLabels: { ns: 'x' }, containerPorts: [], ips: [ip] });
    h.upsertPod(v6(1, 'a', 'fd00:1::1'));
    h.upsertPod(v6(2, 'b', 'fd00:2::1'));
    h.upsertPod(v6(3, 'c', 'fd00:1::3'));
    h.snapshot([np('x', 'v6', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: 'fd00:1::/32', except: ['fd00:1::3/128'] } }, { ipBlock: { cidr: '0.0.0.0/0' } }] }] })]);
    expect(h.probe({ src: 'fd00:1::9', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Accept');
    expect(h.probe({ src: 'x/c', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Deny');
    expect(h.probe({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Deny');
  });

  const invalid: { name: string; spec: PolicySpec; warning: RegExp; probe: Probe; verdict: 'Next' | 'Deny' }[] = [
    {
      name: 'a podSelector with an unknown operator selects no pod',
      spec: { podSelector: { matchExpressions: [{ key: 'pod', operator: 'Equals', values: ['a'] }] }, policyTypes: ['Ingress'] },
      warning: /NetworkPolicy x\/bad spec\.podSelector: .*operator "Equals"/, probe: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }, verdict: 'Next',
    },
    {
      name: 'a peer with an invalid selector admits no one',
      spec: { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'In', values: [] }] } }] }] },
      warning: /spec\.ingress\[0\]\.from\[0\]\.namespaceSelector: .*needs at least one value/, probe: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }, verdict: 'Deny',
    },
    {
      name: 'a rule whose only port is invalid matches nothing instead of every port',
      spec: { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'ICMP' as never, port: 80 }] }] },
      warning: /spec\.ingress\[0\]\.ports\[0\]: protocol must be TCP, UDP or SCTP/, probe: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }, verdict: 'Deny',
    },
    {
      name: 'an ipBlock with a bad cidr admits no one',
      spec: { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/99' } }] }] },
      warning: /from\[0\]\.ipBlock\.cidr: "10\.0\.0\.0\/99"/, probe: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }, verdict: 'Deny',
    },
    {
      name: 'an ipBlock combined with a selector in one peer admits no one',
      spec: { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' }, podSelector: all }] }] },
      warning: /cannot be combined/, probe: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }, verdict: 'Deny',
    },
  ];
  for (const c of invalid) {
    it(`warns about and refuses to widen access with ${c.name}`, async () => {
      const h = await moduleWith([np('x', 'bad', c.spec)]);
      expect(h.logs.filter((l) => l.level === 2).map((l) => l.text).join('\n')).toMatch(c.warning);
      expect(h.probe(c.probe).ingress.verdict).toBe(c.verdict);
    });
  }
});

describe('the NetworkPolicy decision path', () => {
  const probes: Probe[] = [
    { src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 },   // accepted by a pod peer
    { src: 'y/b', dst: 'x/a', protocol: 'TCP', port: 81 },   // accepted by a namespace peer
    { src: 'z/c', dst: 'x/a', protocol: 'UDP', port: 80 },   // denied after every rule
    { src: 'x/a', dst: 'z/a', protocol: 'SCTP', port: 80 },  // egress through a named port
    { src: 'x/a', dst: '192.0.2.1', protocol: 'TCP', port: 443 }, // egress to an ipBlock
    { src: 'y/a', dst: 'y/b', protocol: 'TCP', port: 80 },   // not isolated
    { src: 'x/c', dst: 'y/c', protocol: 'ICMP', port: 0 },
  ];
  const policies = [
    np('x', 'a-in', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }] }, { from: [{ namespaceSelector: nsLabel('y') }], ports: [{ port: 81 }, { port: 'serve-80-tcp' }] }] }),
    np('x', 'a-out', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ ports: [{ protocol: 'SCTP', port: 'serve-80-sctp' }] }, { to: [{ ipBlock: { cidr: '192.0.2.0/24', except: ['192.0.2.128/25'] } }] }] }),
    np('x', 'deny-all', { podSelector: all, policyTypes: ['Ingress', 'Egress'] }),
  ];

  it('allocates nothing and does not grow memory over 100,000 decisions', async () => {
    const h = await moduleWith(policies, rtraced);
    const records = h.writeProbes(probes);
    h.decideBatch(records);
    const verdicts = Array.from({ length: records }, (_, i) => h.verdictAt(i));
    expect(verdicts).toEqual(['Deny', 'Accept', 'Next', 'Accept', 'Next', 'Deny', 'Accept', 'Next', 'Accept', 'Next', 'Next', 'Next', 'Deny', 'Next']);
    // The counter works: building the probes' PodInfo cache on upsert allocated.
    expect(h.allocations).toBeGreaterThan(0);
    const allocationsBefore = h.allocations;
    const bytesBefore = h.memory.buffer.byteLength;
    for (let done = 0; done < 100_000; done += records) h.decideBatch(records);
    expect(h.allocations - allocationsBefore).toBe(0);
    expect(h.memory.buffer.byteLength).toBe(bytesBefore);
  });

  it('does not grow the release build memory over 100,000 decisions', async () => {
    const h = await moduleWith(policies);
    const records = h.writeProbes(probes);
    h.decideBatch(records);
    const bytesBefore = h.memory.buffer.byteLength;
    for (let done = 0; done < 100_000; done += records) h.decideBatch(records);
    expect(h.memory.buffer.byteLength).toBe(bytesBefore);
  });
});

describe('host-networked pods', () => {
  it('are never subjects of the module even when a policy selects their labels', async () => {
    const objects = [...xyzCluster(), pod('x', 'h', { labels: { pod: 'h' }, ip: '192.168.0.10', hostNetwork: true })];
    const h = await ModuleHarness.load(release);
    for (const p of podsFromObjects(objects)) h.upsertPod(p);
    h.snapshot([np('x', 'deny-all', { podSelector: all, policyTypes: ['Ingress', 'Egress'] })]);
    expect(h.probe({ src: 'y/a', dst: 'x/h', protocol: 'TCP', port: 80 }).ingress.verdict).toBe('Next');
    expect(h.probe({ src: 'x/h', dst: 'y/a', protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
  });

  it('do not resolve named ports as egress destinations, even when a record names them', async () => {
    const objects = [...xyzCluster(), pod('y', 'h', { labels: { pod: 'h' }, ip: '192.168.0.10', hostNetwork: true })];
    const h = await ModuleHarness.load(release);
    h.sendHostNetworkIds = true;
    for (const p of podsFromObjects(objects)) h.upsertPod(p);
    h.snapshot([np('x', 'named-out', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ ports: [{ port: 'serve-80-tcp' }] }] })]);
    expect(h.probe({ src: 'x/a', dst: 'y/a', protocol: 'TCP', port: 80 }).egress.verdict).toBe('Accept');
    expect(h.probe({ src: 'x/a', dst: 'y/h', protocol: 'TCP', port: 80 }).egress.verdict).toBe('Deny');
  });
});
