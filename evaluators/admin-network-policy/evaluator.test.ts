// The admin-network-policy module on its own, through the ABI: which kind
// each tier instance evaluates, the BANP singleton, and the v1alpha1-only
// shape (Allow, ports, no Pass or domainNames in the baseline).
import { describe, it, expect, beforeAll } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student } from '../../test/cnp/topology.js';
import { anp, banp, tcp, portNumber, subjectNamespace, toNamespace } from '../../test/cnp/policies.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const release = join(root, 'dist/wasm/admin-network-policy.wasm');

const KIND_ANP = 0;
const KIND_BANP = 1;
const KIND_NODE = 2;
const KIND_RESOLVED_NAME = 3;

beforeAll(() => {
  if (!existsSync(release)) throw new Error(`${release} is missing: run "npm run build:wasm" first`);
});

const topology = conformanceTopology();

async function moduleWith(tier: 'Admin' | 'Baseline', anps: unknown[], banps: unknown[]): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { tier });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(anps, KIND_ANP);
  h.snapshot(banps, KIND_BANP);
  h.snapshot(topology.filter((o) => o.kind === 'Node'), KIND_NODE);
  h.snapshot([], KIND_RESOLVED_NAME);
  return h;
}

const harry0 = student('gryffindor', 0);
const draco0 = student('slytherin', 0);
const luna0 = student('ravenclaw', 0);
const warnings = (h: ModuleHarness) => h.logs.filter((l) => l.level === 2).map((l) => l.text);

const denySlytherin = anp('deny-slytherin', 3, subjectNamespace('gryffindor'), {
  egress: [{ name: 'anp-deny', action: 'Deny', to: [toNamespace('slytherin')] }],
});
const baselineDeny = banp(subjectNamespace('gryffindor'), {
  egress: [{ name: 'banp-deny', action: 'Deny', to: [toNamespace('ravenclaw')] }],
});

describe('the admin-network-policy module and pre-v0.1.7 shapes', () => {
  // Before v0.1.7 peers wrapped their selectors: namespaces: {namespaceSelector: ...}.
  // Read as a v0.1.7 selector that would select every namespace.
  const oldShapePeer = { namespaces: { namespaceSelector: { matchLabels: { 'conformance-house': 'slytherin' } } } };

  it('an Allow rule with a wrapped selector matches nothing, a Deny rule with one denies everything it reaches', async () => {
    const h = await moduleWith('Admin', [
      anp('old-allow', 1, subjectNamespace('gryffindor'), { egress: [{ name: 'old-allow', action: 'Allow', to: [oldShapePeer] }] }),
      anp('old-deny', 2, subjectNamespace('gryffindor'), { egress: [{ name: 'old-deny', action: 'Deny', to: [oldShapePeer] }] }),
    ], []);
    const egress = h.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress;
    expect(egress.verdict).toBe('Deny');
    expect(egress.text).toBe('old-deny (fails closed: spec.egress[0].to[0].namespaces: unknown field "namespaceSelector" (expected matchLabels, matchExpressions))');
    expect(warnings(h)).toContain('AdminNetworkPolicy "old-allow": spec.egress[0].to[0].namespaces: unknown field "namespaceSelector" (expected matchLabels, matchExpressions); the rule fails closed');
  });

  it('a subject with a field it does not know selects no pod', async () => {
    const h = await moduleWith('Admin', [
      anp('old-subject', 1, { namespaces: { namespaceSelector: {} } }, { egress: [{ name: 'deny-all', action: 'Deny', to: [{ namespaces: {} }] }] }),
    ], []);
    expect(h.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(warnings(h)).toContain('AdminNetworkPolicy "old-subject": spec.subject.namespaces: unknown field "namespaceSelector" (expected matchLabels, matchExpressions); the policy selects no pod');
  });
});

describe('the admin-network-policy module', () => {
  it('evaluates AdminNetworkPolicies with {"tier": "Admin"} and the BaselineAdminNetworkPolicy with {"tier": "Baseline"}', async () => {
    const admin = await moduleWith('Admin', [denySlytherin], [baselineDeny]);
    const baseline = await moduleWith('Baseline', [denySlytherin], [baselineDeny]);
    expect(admin.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.text).toBe('anp-deny');
    expect(admin.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(baseline.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.text).toBe('banp-deny');
    expect(baseline.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
  });

  it('refuses a config naming no tier', async () => {
    await expect(ModuleHarness.load(release, { tier: 'NetworkPolicy' })).rejects.toThrow('config.tier "NetworkPolicy" is not a tier');
  });

  it('ignores a BaselineAdminNetworkPolicy not named default, with a warning', async () => {
    const h = await moduleWith('Baseline', [], [banp(subjectNamespace('gryffindor'), baselineDeny.spec, 'extra')]);
    expect(h.probe({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(warnings(h)).toContain('BaselineAdminNetworkPolicy "extra" is ignored: the cluster\'s only BaselineAdminNetworkPolicy must be named "default"');
  });

  it('fails closed on v1alpha2 words in a v1alpha1 object: Accept, protocols, and domainNames in the baseline', async () => {
    const admin = await moduleWith('Admin', [anp('mixed', 1, subjectNamespace('gryffindor'), {
      egress: [
        { name: 'accept-word', action: 'Accept', to: [toNamespace('hufflepuff')] },
        { name: 'protocols-field', action: 'Allow', to: [toNamespace('ravenclaw')], protocols: [tcp(80)] },
        { name: 'allow-slytherin', action: 'Allow', to: [toNamespace('slytherin')], ports: [portNumber(80)] },
      ],
    })], []);
    expect(admin.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.text)
      .toBe('accept-word (fails closed: spec.egress[0].action: "Accept" is not one of Allow, Deny, Pass)');
    expect(warnings(admin)).toContain('AdminNetworkPolicy "mixed": spec.egress[0].action: "Accept" is not one of Allow, Deny, Pass; the rule fails closed');
    expect(warnings(admin)).toContain('AdminNetworkPolicy "mixed": spec.egress[1].protocols: is not a field of AdminNetworkPolicy (use ports); the rule fails closed');

    const baseline = await moduleWith('Baseline', [], [banp(subjectNamespace('gryffindor'), {
      egress: [
        { name: 'allow-domains', action: 'Allow', to: [{ domainNames: ['*.example.com'] }] },
        { name: 'allow-slytherin', action: 'Allow', to: [toNamespace('slytherin')] },
      ],
    })]);
    // An Allow rule that fails closed matches nothing, so the next rule decides.
    expect(baseline.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.text).toBe('allow-slytherin');
    expect(baseline.probe({ src: harry0, dst: '192.0.2.1', protocol: 'TCP', port: 80 }).egress.verdict).toBe('Next');
    expect(warnings(baseline).some((w) => w.includes('spec.egress[0].to[0]: unknown field "domainNames"'))).toBe(true);
  });
});
