// Rule attribution (ABI 1.3) of the tiered ClusterNetworkPolicy module: the
// rule named is the first match in evaluation order (priority, then policy
// name, then rule order), a Pass rule is named like any other, and the peer
// and port entries that matched come with it.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student } from '../../test/cnp/topology.js';
import { cnp, tcp, udp, tcpRange, destinationNamedPort, subjectNamespace, toNamespace, toHousePods } from '../../test/cnp/policies.js';
import { RANDOM_RESOLVED_NAMES } from '../../test/netpol/random-cluster.js';

const release = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/wasm/cluster-network-policy.wasm');
const topology = conformanceTopology();

async function moduleWith(policies: unknown[], tier = 'Admin', ruleIndex = true): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { tier, ruleIndex });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(policies, 0);
  h.snapshot(topology.filter((o) => o.kind === 'Node'), 1);
  // api.example.com is 203.0.113.5.
  h.snapshot(RANDOM_RESOLVED_NAMES, 2);
  return h;
}

const harry0 = student('gryffindor', 0);
const draco0 = student('slytherin', 0);
const luna0 = student('ravenclaw', 0);
const slytherinNs = 'namespaces kubernetes.io/metadata.name=network-policy-conformance-slytherin';

describe('ClusterNetworkPolicy rule attribution', () => {
  it('names the first matching rule in priority order, not a later policy that also matches', async () => {
    const h = await moduleWith([
      cnp('late', 'Admin', 20, subjectNamespace('gryffindor'), { egress: [{ name: 'late-accept', action: 'Accept', to: [toNamespace('slytherin')] }] }),
      cnp('early', 'Admin', 10, subjectNamespace('gryffindor'), {
        egress: [
          { name: 'early-udp', action: 'Deny', to: [toNamespace('slytherin')], protocols: [udp(53)] },
          { name: 'early-deny', action: 'Deny', to: [toNamespace('ravenclaw'), toNamespace('slytherin')], protocols: [tcp(81), tcp(80)] },
        ],
      }),
    ]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress)
      .toEqual({ policy: 'early', rule: 'early-deny', peer: slytherinNs, port: 'TCP/80' });
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'UDP', port: 53 }).egress)
      .toEqual({ policy: 'early', rule: 'early-udp', peer: slytherinNs, port: 'UDP/53' });
    // What "early" does not match falls to "late".
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 443 }).egress)
      .toEqual({ policy: 'late', rule: 'late-accept', peer: slytherinNs, port: 'any port' });
  });

  it('breaks a priority tie by policy name, as evaluation does', async () => {
    const h = await moduleWith([
      cnp('zeta', 'Admin', 5, subjectNamespace('gryffindor'), { egress: [{ name: 'z-accept', action: 'Accept', to: [toNamespace('slytherin')] }] }),
      cnp('alpha', 'Admin', 5, subjectNamespace('gryffindor'), { egress: [{ name: 'a-deny', action: 'Deny', to: [toNamespace('slytherin')] }] }),
    ]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress).toMatchObject({ policy: 'alpha', rule: 'a-deny' });
  });

  it('names a Pass rule, and names an unnamed rule by its direction and index', async () => {
    const h = await moduleWith([
      cnp('pass-first', 'Admin', 1, subjectNamespace('ravenclaw'), {
        ingress: [
          { action: 'Deny', from: [toNamespace('hufflepuff')] },
          { name: 'pass-gryffindor', action: 'Pass', from: [toNamespace('gryffindor')], protocols: [tcp(80)] },
        ],
      }),
    ]);
    const passed = h.attribute({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).ingress;
    expect(passed).toEqual({ policy: 'pass-first', rule: 'pass-gryffindor', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-gryffindor', port: 'TCP/80' });
    expect(h.attribute({ src: student('hufflepuff', 0), dst: luna0, protocol: 'TCP', port: 80 }).ingress).toMatchObject({ policy: 'pass-first', rule: 'ingress rule 0' });
  });

  it('names the Baseline tier rule that denies by default', async () => {
    const h = await moduleWith([
      cnp('baseline', 'Baseline', 1, subjectNamespace('gryffindor'), { ingress: [{ name: 'default-deny', action: 'Deny', from: [{ namespaces: {} }] }] }),
    ], 'Baseline');
    expect(h.attribute({ src: draco0, dst: harry0, protocol: 'TCP', port: 80 }).ingress)
      .toEqual({ policy: 'baseline', rule: 'default-deny', peer: 'namespaces all', port: 'any port' });
  });

  // One policy with a rule per kind of peer, each with more than one peer or
  // port entry so the entry named is the one that matched, not the first.
  const everyKind = cnp('every-kind', 'Admin', 1, subjectNamespace('gryffindor'), {
    egress: [
      { name: 'to-pods', action: 'Accept', to: [toNamespace('hufflepuff'), toHousePods('slytherin', 'draco-malfoy-1')], protocols: [tcp(80), tcpRange(8000, 8090)] },
      { name: 'to-named-port', action: 'Accept', to: [toNamespace('hufflepuff'), toNamespace('ravenclaw')], protocols: [udp(53), destinationNamedPort('web')] },
      { name: 'to-nodes', action: 'Deny', to: [{ nodes: { matchLabels: { 'kubernetes.io/os': 'windows' } } }, { nodes: { matchLabels: { 'kubernetes.io/os': 'linux' } } }], protocols: [udp(53), tcp(36363)] },
      { name: 'to-networks', action: 'Deny', to: [{ networks: ['192.0.2.0/24'] }, { networks: ['198.51.100.0/24', '2001:db8::/32'] }] },
      { name: 'to-domains', action: 'Accept', to: [{ domainNames: ['other.org'] }, { domainNames: ['*.example.com'] }], protocols: [tcp(443)] },
    ],
  });
  const pods = 'pods conformance-house=slytherin + statefulset.kubernetes.io/pod-name=draco-malfoy-1';

  it.each([true, false])('names each kind of peer (namespaces, pods, nodes, networks, domainNames) and port (number, range, named) that matched, rule index %s', async (ruleIndex) => {
    const h = await moduleWith([everyKind], 'Admin', ruleIndex);
    const egress = (dst: string, protocol: 'TCP' | 'UDP', port: number) => h.attribute({ src: harry0, dst, protocol, port }).egress;
    expect(egress(student('slytherin', 1), 'TCP', 8080)).toEqual({ policy: 'every-kind', rule: 'to-pods', peer: pods, port: 'TCP/8000-8090' });
    expect(egress(student('slytherin', 1), 'TCP', 80)).toEqual({ policy: 'every-kind', rule: 'to-pods', peer: pods, port: 'TCP/80' });
    expect(egress(luna0, 'TCP', 80)).toEqual({
      policy: 'every-kind', rule: 'to-named-port', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-ravenclaw', port: 'web',
    });
    expect(egress('172.18.0.3', 'TCP', 36363)).toEqual({ policy: 'every-kind', rule: 'to-nodes', peer: 'nodes kubernetes.io/os=linux', port: 'TCP/36363' });
    expect(egress('198.51.100.7', 'UDP', 53)).toEqual({ policy: 'every-kind', rule: 'to-networks', peer: 'networks 198.51.100.0/24,2001:db8::/32', port: 'any port' });
    expect(egress('203.0.113.5', 'TCP', 443)).toEqual({ policy: 'every-kind', rule: 'to-domains', peer: 'domainNames *.example.com', port: 'TCP/443' });
  });
});
