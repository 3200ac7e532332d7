// The ClusterNetworkPolicy module on its own, through the ABI: configuration,
// logs, relists, ICMP and the allocation-free decision path, which the
// pipeline cases in test/cnp cannot show.
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects, type Probe } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student, studentIPs, ns, NODES } from '../../test/cnp/topology.js';
import { cnp, tcp, udp, destinationNamedPort, subjectNamespace, subjectHousePods, toNamespace, toHousePods } from '../../test/cnp/policies.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const release = join(root, 'dist/wasm/cluster-network-policy.wasm');
const rtraced = join(root, 'dist/wasm/fixtures/cluster-network-policy-rtrace.wasm');

const KIND_CNP = 0;
const KIND_NODE = 1;
const KIND_RESOLVED_NAME = 2;


beforeAll(() => {
  // scripts/build-wasm.mjs builds both (the traced one with ASC_RTRACE) and rebuilds them when evaluator or SDK code changes.
  for (const file of [release, rtraced]) if (!existsSync(file)) throw new Error(`${file} is missing: run "npm run build:wasm" first`);
});

const topology = conformanceTopology();
const nodes = topology.filter((o) => o.kind === 'Node');

async function moduleWith(policies: unknown[], opts: { file?: string; tier?: string; names?: unknown[] } = {}): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(opts.file ?? release, { tier: opts.tier ?? 'Admin' });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(policies, KIND_CNP);
  h.snapshot(nodes, KIND_NODE);
  h.snapshot(opts.names ?? [], KIND_RESOLVED_NAME);
  return h;
}

const harry0 = student('gryffindor', 0);
const harry1 = student('gryffindor', 1);
const draco0 = student('slytherin', 0);
const luna0 = student('ravenclaw', 0);
const cedric0 = student('hufflepuff', 0);
const warnings = (h: ModuleHarness) => h.logs.filter((l) => l.level === 2).map((l) => l.text);

describe('the cluster-network-policy module configuration', () => {
  it.each([
    [{}, 'config.tier is missing: expected {"tier": "Admin"} or {"tier": "Baseline"}'],
    [{ tier: 'Middle' }, 'config.tier "Middle" is not a tier'],
    [{ tier: 'admin' }, 'config.tier "admin" is not a tier'],
    [{ tier: 'Admin', extra: true }, 'unknown config key "extra"'],
  ])('refuses %j, saying what to write', async (config, message) => {
    await expect(ModuleHarness.load(release, config)).rejects.toThrow(message);
  });

  it('accepts both tiers and asks to see all traffic until its objects are synced', async () => {
    for (const tier of ['Admin', 'Baseline']) {
      const h = await ModuleHarness.load(release, { tier });
      expect(h.subjects()).toBe('all');
    }
  });
});

describe('the cluster-network-policy module subjects', () => {
  const podNames = (h: ModuleHarness, ids: number[]) => ids.map((id) => {
    const p = podsFromObjects(topology).find((x) => x.id === id);
    return p ? `${p.namespace}/${p.name}` : `id ${id}`;
  }).sort();

  it('names exactly the pods a policy of its own tier selects', async () => {
    const admin = cnp('admin-deny', 'Admin', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'a', action: 'Deny', to: [toNamespace('slytherin')] }] });
    const baseline = cnp('baseline-deny', 'Baseline', 1, subjectNamespace('ravenclaw'), { ingress: [{ name: 'b', action: 'Deny', from: [toNamespace('slytherin')] }] });
    const a = await moduleWith([admin, baseline], { tier: 'Admin' });
    const b = await moduleWith([admin, baseline], { tier: 'Baseline' });
    const inNamespace = (house: string) => podsFromObjects(topology).filter((p) => p.namespace === ns(house) && !p.hostNetwork).map((p) => `${p.namespace}/${p.name}`).sort();
    expect(podNames(a, a.subjects() as number[])).toEqual(inNamespace('gryffindor'));
    expect(podNames(b, b.subjects() as number[])).toEqual(inNamespace('ravenclaw'));
  });

  it('names no pod when its tier has no policy, and follows a policy added later', async () => {
    const h = await moduleWith([]);
    expect(h.subjects()).toEqual([]);
    h.upsert(cnp('late', 'Admin', 1, subjectNamespace('hufflepuff'), { egress: [{ name: 'a', action: 'Deny', to: [toNamespace('slytherin')] }] }), KIND_CNP);
    expect(podNames(h, h.subjects() as number[])).toEqual(podsFromObjects(topology).filter((p) => p.namespace === ns('hufflepuff') && !p.hostNetwork).map((p) => `${p.namespace}/${p.name}`).sort());
  });
});

describe('the cluster-network-policy module', () => {
  it('only evaluates policies of its own tier, and warns about a tier that is neither', async () => {
    const admin = cnp('admin-deny', 'Admin', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'a', action: 'Deny', to: [toNamespace('slytherin')] }] });
    const baseline = cnp('baseline-deny', 'Baseline', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'b', action: 'Deny', to: [toNamespace('ravenclaw')] }] });
    const odd = cnp('odd-tier', 'Middle' as never, 1, subjectNamespace('gryffindor'), { egress: [{ name: 'c', action: 'Deny', to: [toNamespace('hufflepuff')] }] });
    const a = await moduleWith([admin, baseline, odd], { tier: 'Admin' });
    const b = await moduleWith([admin, baseline, odd], { tier: 'Baseline' });
    expect(a.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.text).toBe('a');
    expect(a.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(b.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.text).toBe('b');
    expect(b.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(a.probe({ src: harry0, dst: cedric0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(warnings(a)).toContain('ClusterNetworkPolicy "odd-tier": spec.tier "Middle" is not Admin or Baseline; the policy is ignored');
    // Only one of the two tier instances says so.
    expect(warnings(b).some((w) => w.includes('odd-tier'))).toBe(false);
  });

  it('answers a Pass rule with the Pass verdict and its name, neither Next nor Accept, and ends its tier there', async () => {
    const h = await moduleWith([
      cnp('pass-80', 'Admin', 5, subjectHousePods('gryffindor'), {
        egress: [{ name: 'pass-slytherin-80', action: 'Pass', to: [toNamespace('slytherin')], protocols: [tcp(80)] }],
      }),
      cnp('deny-all', 'Admin', 9, subjectHousePods('gryffindor'), {
        egress: [{ name: 'deny-slytherin', action: 'Deny', to: [toNamespace('slytherin')] }],
      }),
    ]);
    const passed = h.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress;
    expect([passed.verdict, passed.text]).toEqual(['Pass', 'pass-slytherin-80']);
    // The later policy still decides what the Pass rule does not match.
    expect(h.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 81 }).egress.verdict).toBe('Deny');
    expect(h.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
  });

  it('denies ICMP through a rule without protocols and lets it pass a rule with protocols', async () => {
    const h = await moduleWith([cnp('icmp', 'Admin', 1, subjectNamespace('gryffindor'), {
      egress: [
        { name: 'deny-web', action: 'Deny', to: [toNamespace('slytherin')], protocols: [tcp(80)] },
        { name: 'deny-ravenclaw', action: 'Deny', to: [toNamespace('ravenclaw')] },
      ],
    })]);
    expect(h.probe({ src: harry0, dst: draco0, protocol: 'ICMP', port: 0 }).egress.verdict).toBe('Next');
    expect(h.probe({ src: harry0, dst: luna0, protocol: 'ICMP', port: 0 }).egress.text).toBe('deny-ravenclaw');
  });

  it('warns once per pair of same-priority policies that select one pod, naming both', async () => {
    const first = cnp('alpha', 'Admin', 7, subjectNamespace('gryffindor'), { egress: [{ name: 'x', action: 'Deny', to: [toNamespace('slytherin')] }] });
    const second = cnp('beta', 'Admin', 7, { namespaces: {} }, { egress: [{ name: 'y', action: 'Accept', to: [toNamespace('slytherin')] }] });
    const disjoint = cnp('gamma', 'Admin', 7, subjectNamespace('ravenclaw'), { ingress: [{ name: 'z', action: 'Deny', from: [toNamespace('slytherin')] }] });
    const h = await moduleWith([first, second, disjoint]);
    const ties = warnings(h).filter((w) => w.includes('both have priority 7'));
    expect(ties).toEqual([
      'ClusterNetworkPolicy Admin tier: ClusterNetworkPolicy "alpha" and "beta" both have priority 7 and select pod '
      + `${ns('gryffindor')}/harry-potter-0 (egress); "alpha" is evaluated first because its name sorts first. Give them distinct priorities to make the order explicit.`,
    ]);
    const harry = h.probe({ src: harry1, dst: draco0, protocol: 'TCP', port: 80 }).egress;
    expect(harry.text).toBe('x; note: policy "alpha" shares priority 7 with another policy selecting this pod, and the tie was broken by name');
    // Off the tie, the same rule ids explain without the note.
    expect(h.probe({ src: draco0, dst: student('slytherin', 1), protocol: 'TCP', port: 80 }).egress.text).toBe('y');
  });

  it('keeps deciding with the old policies during a relist until the snapshot is complete', async () => {
    const deny = cnp('deny', 'Admin', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'deny-slytherin', action: 'Deny', to: [toNamespace('slytherin')] }] });
    const h = await moduleWith([deny]);
    const probe: Probe = { src: harry0, dst: draco0, protocol: 'TCP', port: 80 };
    h.reset(KIND_CNP);
    expect(h.probe(probe).egress.verdict).toBe('Deny');
    h.synced(KIND_CNP);
    expect(h.probe(probe).egress.verdict).toBe('Next');
    h.upsert(deny, KIND_CNP);
    expect(h.probe(probe).egress.verdict).toBe('Deny');
    h.delete(deny, KIND_CNP);
    expect(h.probe(probe).egress.verdict).toBe('Next');
  });

  it('follows pods whose labels change', async () => {
    const h = await moduleWith([cnp('by-label', 'Admin', 1, { pods: { namespaceSelector: {}, podSelector: { matchLabels: { locked: 'yes' } } } }, {
      egress: [{ name: 'deny-locked', action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }],
    })]);
    const probe: Probe = { src: harry0, dst: luna0, protocol: 'TCP', port: 80 };
    expect(h.probe(probe).egress.verdict).toBe('Next');
    const harry = podsFromObjects(topology).find((p) => `${p.namespace}/${p.name}` === harry0)!;
    h.upsertPod({ ...harry, podLabels: { ...harry.podLabels, locked: 'yes' } });
    expect(h.probe(probe).egress.text).toBe('deny-locked');
    h.upsertPod(harry);
    expect(h.probe(probe).egress.verdict).toBe('Next');
  });

  it('logs every problem of a rule that fails closed with the policy and the field', async () => {
    const h = await moduleWith([cnp('broken', 'Admin', 1, subjectNamespace('gryffindor'), {
      egress: [{ name: 'bad', action: 'Deny', to: [{ networks: ['10.0.0.0/33'] }, { nodes: { matchExpressions: [{ key: 'k', operator: 'Sometimes' }] } }], protocols: [{ tcp: {}, udp: {} }] }],
    })]);
    const w = warnings(h);
    expect(w).toContain('ClusterNetworkPolicy "broken": spec.egress[0].to[0].networks[0]: "10.0.0.0/33" is not a CIDR: the prefix length must be 0-32; the rule fails closed');
    expect(w.some((l) => l.startsWith('ClusterNetworkPolicy "broken": spec.egress[0].to[1].nodes: matchExpressions[0].operator "Sometimes"'))).toBe(true);
    expect(w).toContain('ClusterNetworkPolicy "broken": spec.egress[0].protocols[0]: sets more than one of tcp, udp, sctp, destinationNamedPort; the rule fails closed');
    expect(h.probe({ src: harry0, dst: '192.0.2.1', protocol: 'UDP', port: 53 }).egress.text)
      .toBe('bad (fails closed: spec.egress[0].to[0].networks[0]: "10.0.0.0/33" is not a CIDR: the prefix length must be 0-32)');
  });

  it('explains a reason code whose rule has since been replaced', async () => {
    const policy = cnp('changing', 'Admin', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'old-rule', action: 'Deny', to: [toNamespace('slytherin')] }] });
    const h = await moduleWith([policy]);
    const { reason } = h.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress;
    expect(h.explain(reason)).toBe('old-rule');
    h.upsert({ ...policy, spec: { ...policy.spec, egress: [{ name: 'new-rule', action: 'Deny', to: [toNamespace('slytherin')] }] } }, KIND_CNP);
    expect(h.explain(reason)).toBe('a rule that has since been changed or removed');
  });
});

describe('the cluster-network-policy decision path', () => {
  const [harryV4] = studentIPs('gryffindor', 0);
  const probes: Probe[] = [
    { src: harry0, dst: draco0, protocol: 'TCP', port: 80 },
    { src: harry0, dst: luna0, protocol: 'TCP', port: 80 },
    { src: harry1, dst: cedric0, protocol: 'UDP', port: 53 },
    { src: harryV4, dst: NODES[1].ip, protocol: 'TCP', port: 36363 },
    { src: harryV4, dst: '192.0.2.10', protocol: 'TCP', port: 443 },
    { src: harryV4, dst: '198.51.100.7', protocol: 'TCP', port: 443 },
    { src: draco0, dst: harry0, protocol: 'SCTP', port: 9003 },
    { src: harry0, dst: harry0, protocol: 'TCP', port: 80 },
    { src: luna0, dst: draco0, protocol: 'ICMP', port: 0 },
  ];
  const policies = [
    cnp('tie-a', 'Admin', 10, subjectNamespace('gryffindor'), {
      egress: [
        { name: 'accept-web', action: 'Accept', to: [toNamespace('hufflepuff')], protocols: [destinationNamedPort('dns')] },
        { name: 'accept-nodes', action: 'Accept', to: [{ nodes: { matchLabels: { 'kubernetes.io/os': 'linux' } } }], protocols: [tcp(36363)] },
        { name: 'accept-domains', action: 'Accept', to: [{ domainNames: ['*.example.com'] }] },
      ],
      ingress: [{ name: 'deny-sctp', action: 'Deny', from: [toHousePods('slytherin')], protocols: [{ sctp: { destinationPort: { range: { start: 9000, end: 9010 } } } }] }],
    }),
    cnp('tie-b', 'Admin', 10, subjectHousePods('gryffindor'), {
      egress: [
        { name: 'pass-slytherin', action: 'Pass', to: [toNamespace('slytherin')], protocols: [udp(53), tcp(80)] },
        { name: 'deny-rest', action: 'Deny', to: [{ networks: ['0.0.0.0/0', '::/0'] }] },
      ],
    }),
  ];

  it('allocates nothing and does not grow memory over 100,000 decisions', async () => {
    const h = await moduleWith(policies, { file: rtraced, names: [{ apiVersion: 'dns.kwp.io/v1', kind: 'ResolvedName', metadata: { name: 'www.example.com' }, addresses: ['192.0.2.10'] }] });
    // The caches are filled when objects and pods arrive, so even the first
    // decision allocates nothing.
    expect(h.allocations).toBeGreaterThan(0);
    const records = h.writeProbes(probes);
    const before = h.allocations;
    const bytes = h.memory.buffer.byteLength;
    for (let done = 0; done < 100_000; done += records) h.decideBatch(records);
    expect(h.allocations - before).toBe(0);
    const texts = probes.map((p) => {
      const o = h.probe(p);
      return `${o.egress.text}|${o.ingress.text}`;
    });
    expect(texts).toEqual([
      expect.stringMatching(/^pass-slytherin; note: policy "tie-b" shares priority 10.*\|$/),
      expect.stringMatching(/^deny-rest; note/),
      expect.stringMatching(/^accept-web; note/),
      expect.stringMatching(/^accept-nodes; note/),
      expect.stringMatching(/^accept-domains; note/),
      expect.stringMatching(/^deny-rest; note/),
      '|deny-sctp',
      '|',
      '|',
    ]);
    expect(h.memory.buffer.byteLength).toBe(bytes);
  });
});
