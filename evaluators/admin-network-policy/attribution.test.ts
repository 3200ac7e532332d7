// Rule attribution (ABI 1.3) of the AdminNetworkPolicy module: a Pass rule of
// an ANP is named with its policy, the first match by priority wins, and the
// BaselineAdminNetworkPolicy names its own rule.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student } from '../../test/cnp/topology.js';
import { anp, banp, portNumber, portRange, namedPort, subjectNamespace, toNamespace, toHousePods } from '../../test/cnp/policies.js';
import { RANDOM_RESOLVED_NAMES } from '../../test/netpol/random-cluster.js';

const release = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/wasm/admin-network-policy.wasm');
const topology = conformanceTopology();

async function moduleWith(tier: 'Admin' | 'Baseline', anps: unknown[], banps: unknown[], ruleIndex = true): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { tier, ruleIndex });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(anps, 0);
  h.snapshot(banps, 1);
  h.snapshot(topology.filter((o) => o.kind === 'Node'), 2);
  // api.example.com is 203.0.113.5.
  h.snapshot(RANDOM_RESOLVED_NAMES, 3);
  return h;
}

const harry0 = student('gryffindor', 0);
const draco0 = student('slytherin', 0);

describe('AdminNetworkPolicy rule attribution', () => {
  const passWeb = anp('pass-web', 1, subjectNamespace('gryffindor'), {
    egress: [{ name: 'pass-80', action: 'Pass', to: [toNamespace('slytherin')], ports: [portNumber(80)] }],
  });
  const denyAll = anp('deny-slytherin', 2, subjectNamespace('gryffindor'), {
    egress: [{ name: 'deny-rest', action: 'Deny', to: [toNamespace('slytherin')] }],
  });

  it('names the Pass rule of the higher-priority ANP, and the Deny of the next one for what it does not pass', async () => {
    const h = await moduleWith('Admin', [denyAll, passWeb], []);
    expect(h.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Pass');
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress)
      .toEqual({ policy: 'pass-web', rule: 'pass-80', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-slytherin', port: 'TCP/80' });
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 81 }).egress).toMatchObject({ policy: 'deny-slytherin', rule: 'deny-rest' });
  });

  it('names the BaselineAdminNetworkPolicy rule in the Baseline tier', async () => {
    const h = await moduleWith('Baseline', [denyAll], [banp(subjectNamespace('gryffindor'), { egress: [{ name: 'banp-deny', action: 'Deny', to: [toNamespace('slytherin')] }] })]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress).toMatchObject({ policy: 'default', rule: 'banp-deny', port: 'any port' });
  });

  // A rule per kind of peer, each with more than one peer or port entry so
  // the entry named is the one that matched, not the first.
  const everyKind = (rule: (name: string, action: string, to: unknown[], ports?: unknown[]) => Record<string, unknown>) => [
    rule('to-pods', 'Allow', [toNamespace('hufflepuff'), toHousePods('slytherin', 'draco-malfoy-1')], [portNumber(80), portRange(8000, 8090)]),
    rule('to-named-port', 'Allow', [toNamespace('hufflepuff'), toNamespace('ravenclaw')], [portNumber(53, 'UDP'), namedPort('web')]),
    rule('to-nodes', 'Deny', [{ nodes: { matchLabels: { 'kubernetes.io/os': 'windows' } } }, { nodes: { matchLabels: { 'kubernetes.io/os': 'linux' } } }], [portNumber(53, 'UDP'), portNumber(36363)]),
    rule('to-networks', 'Deny', [{ networks: ['192.0.2.0/24'] }, { networks: ['198.51.100.0/24', '2001:db8::/32'] }]),
  ];
  const egressRule = (name: string, action: string, to: unknown[], ports?: unknown[]) => ({ name, action, to, ...(ports ? { ports } : {}) });
  const pods = 'pods conformance-house=slytherin + statefulset.kubernetes.io/pod-name=draco-malfoy-1';
  const cases = (h: ModuleHarness, policy: string) => {
    const egress = (dst: string, protocol: 'TCP' | 'UDP', port: number) => h.attribute({ src: harry0, dst, protocol, port }).egress;
    expect(egress(student('slytherin', 1), 'TCP', 8080)).toEqual({ policy, rule: 'to-pods', peer: pods, port: 'TCP/8000-8090' });
    expect(egress(student('slytherin', 1), 'TCP', 80)).toEqual({ policy, rule: 'to-pods', peer: pods, port: 'TCP/80' });
    expect(egress(student('ravenclaw', 0), 'TCP', 80)).toEqual({ policy, rule: 'to-named-port', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-ravenclaw', port: 'web' });
    expect(egress('172.18.0.3', 'TCP', 36363)).toEqual({ policy, rule: 'to-nodes', peer: 'nodes kubernetes.io/os=linux', port: 'TCP/36363' });
    expect(egress('198.51.100.7', 'UDP', 53)).toEqual({ policy, rule: 'to-networks', peer: 'networks 198.51.100.0/24,2001:db8::/32', port: 'any port' });
  };

  it.each([true, false])('names each kind of peer (namespaces, pods, nodes, networks, domainNames) and port (number, range, named) of an AdminNetworkPolicy, rule index %s', async (ruleIndex) => {
    const rules = [...everyKind(egressRule), egressRule('to-domains', 'Allow', [{ domainNames: ['other.org'] }, { domainNames: ['*.example.com'] }], [portNumber(443)])];
    const h = await moduleWith('Admin', [anp('every-kind', 1, subjectNamespace('gryffindor'), { egress: rules })], [], ruleIndex);
    cases(h, 'every-kind');
    expect(h.attribute({ src: harry0, dst: '203.0.113.5', protocol: 'TCP', port: 443 }).egress)
      .toEqual({ policy: 'every-kind', rule: 'to-domains', peer: 'domainNames *.example.com', port: 'TCP/443' });
  });

  it.each([true, false])('names each kind of peer and port of the BaselineAdminNetworkPolicy (which has no domainNames), rule index %s', async (ruleIndex) => {
    const h = await moduleWith('Baseline', [], [banp(subjectNamespace('gryffindor'), { egress: everyKind(egressRule) })], ruleIndex);
    cases(h, 'default');
  });
});
