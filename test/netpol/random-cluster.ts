// Random small clusters for differential tests of the indexed evaluators
// against their unindexed evaluation (`ruleIndex: false`): few label keys and
// values, so selectors often match; pods with named ports that differ in
// number and protocol between pods, so named ports resolve differently per
// destination; policies with many rules each, so a subject's rules are past
// the index's threshold; and the changes a cluster goes through (pod and
// namespace relabels, policies added, changed and deleted).
import type { KubeObject } from '../../host/contract.js';
import type { HarnessPod, Probe } from '../fixtures/abi-harness.js';

export type Random = () => number;
export const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)];

const NAMESPACES = ['n0', 'n1', 'n2', 'n3'];
const APPS = ['web', 'api', 'db'];
const TEAMS = ['red', 'blue'];
const PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
const PROTOCOL_NUMBERS = { TCP: 6, UDP: 17, SCTP: 132 } as const;
/** Ports the probes use: the named ports' numbers, range edges and others. */
export const PROBE_PORTS = [53, 80, 81, 443, 1000, 1999, 2000, 2001, 8080, 9090];
export const PORT_NAMES = ['http', 'metrics', 'dns'];
/** Addresses that are no pod: inside and outside the blocks policies name. */
const OUTSIDE_V4 = ['192.168.1.7', '192.168.2.9', '10.9.0.1', '10.1.0.200', '203.0.113.5'];
// a01::9 and c0a8:1::3 begin with the bytes of 10.1.0.0 and 192.168.1.0: an
// IPv6 address must not match an IPv4 block whose prefix its first word shares.
const OUTSIDE_V6 = ['fd00:9::5', 'fd00:1::77', 'a01::9', 'c0a8:107::3', 'cb00:7105::1'];

export interface RandomCluster {
  namespaceLabels: Map<string, Record<string, string>>;
  pods: HarnessPod[];
}

function podLabels(random: Random): Record<string, string> {
  const labels: Record<string, string> = { app: pick(random, APPS) };
  if (random() < 0.6) labels.tier = pick(random, ['front', 'back']);
  if (random() < 0.3) labels.canary = 'yes';
  return labels;
}

function namespaceLabels(random: Random, name: string): Record<string, string> {
  const labels: Record<string, string> = { 'kubernetes.io/metadata.name': name, team: pick(random, TEAMS) };
  if (random() < 0.5) labels.env = pick(random, ['prod', 'dev']);
  return labels;
}

/** `clusterIds`: the clusters pods are spread over (multicluster); the local cluster ("") by default. */
export function randomCluster(random: Random, podCount = 24, clusterIds: string[] = ['']): RandomCluster {
  const nsLabels = new Map<string, Record<string, string>>();
  for (const ns of NAMESPACES) nsLabels.set(ns, namespaceLabels(random, ns));
  const pods: HarnessPod[] = [];
  for (let i = 0; i < podCount; i++) {
    const namespace = NAMESPACES[i % NAMESPACES.length];
    // Named ports with numbers and protocols that vary between pods.
    const containerPorts = PORT_NAMES.filter(() => random() < 0.7).map((name) => ({
      name, port: pick(random, [80, 81, 53, 8080, 9090, 2000]), protocol: PROTOCOL_NUMBERS[pick(random, PROTOCOLS)],
    }));
    pods.push({
      id: i + 1, name: `p${i}`, namespace, hostNetwork: random() < 0.05,
      podLabels: podLabels(random), namespaceLabels: nsLabels.get(namespace)!, containerPorts,
      ips: [`10.1.${i >> 8}.${(i & 255) + 1}`, ...(random() < 0.3 ? [`fd00:1::${i + 1}`] : [])],
      clusterId: pick(random, clusterIds),
    });
  }
  return { namespaceLabels: nsLabels, pods };
}

function selector(random: Random, labelsOf: 'pod' | 'namespace'): Record<string, unknown> {
  const roll = random();
  if (roll < 0.2) return {};
  if (labelsOf === 'namespace') {
    if (roll < 0.7) return { matchLabels: { team: pick(random, TEAMS) } };
    if (roll < 0.85) return { matchExpressions: [{ key: 'env', operator: pick(random, ['Exists', 'DoesNotExist']) }] };
    return { matchExpressions: [{ key: 'team', operator: 'NotIn', values: [pick(random, TEAMS)] }] };
  }
  if (roll < 0.65) return { matchLabels: { app: pick(random, APPS) } };
  if (roll < 0.8) return { matchExpressions: [{ key: 'tier', operator: 'In', values: [pick(random, ['front', 'back'])] }] };
  if (roll < 0.9) return { matchLabels: { app: pick(random, APPS) }, matchExpressions: [{ key: 'canary', operator: 'DoesNotExist' }] };
  // Invalid: matches nothing.
  return { matchExpressions: [{ key: 'app', operator: 'Near', values: ['web'] }] };
}

function peer(random: Random): Record<string, unknown> {
  const roll = random();
  if (roll < 0.3) return { podSelector: selector(random, 'pod') };
  if (roll < 0.55) return { namespaceSelector: selector(random, 'namespace') };
  if (roll < 0.75) return { namespaceSelector: selector(random, 'namespace'), podSelector: selector(random, 'pod') };
  if (roll < 0.9) return { ipBlock: pick(random, [{ cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] }, { cidr: '10.1.0.0/24' }, { cidr: '10.1.0.8/29' }, { cidr: 'fd00:1::/64' }]) };
  if (roll < 0.95) return {};
  return { ipBlock: { cidr: '10.1.0.0/16' }, podSelector: {} };
}

function port(random: Random): Record<string, unknown> {
  const roll = random();
  const protocol = random() < 0.7 ? 'TCP' : pick(random, PROTOCOLS);
  if (roll < 0.35) return { protocol, port: pick(random, [80, 81, 53, 443, 8080]) };
  if (roll < 0.6) return { protocol, port: pick(random, PORT_NAMES) };
  if (roll < 0.75) return { protocol, port: 1000, endPort: pick(random, [1999, 2000, 9090]) };
  if (roll < 0.85) return { protocol };
  if (roll < 0.92) return {};
  // Invalid entries: the rule keeps its valid ones, or matches nothing.
  return pick(random, [{ protocol: 'ICMP', port: 80 }, { port: 70000 }, { port: 'http', endPort: 90 }]);
}

function rule(random: Random, peersKey: 'from' | 'to'): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  if (random() < 0.85) r[peersKey] = Array.from({ length: 1 + Math.floor(random() * 3) }, () => peer(random));
  if (random() < 0.8) r.ports = Array.from({ length: 1 + Math.floor(random() * 3) }, () => port(random));
  return r;
}

export function randomNetworkPolicy(random: Random, name: string): KubeObject {
  const namespace = pick(random, NAMESPACES);
  const spec: Record<string, unknown> = { podSelector: selector(random, 'pod') };
  const roll = random();
  spec.policyTypes = roll < 0.45 ? ['Ingress'] : roll < 0.65 ? ['Egress'] : roll < 0.95 ? ['Ingress', 'Egress'] : [];
  spec.ingress = Array.from({ length: Math.floor(random() * 4) }, () => rule(random, 'from'));
  spec.egress = Array.from({ length: Math.floor(random() * 4) }, () => rule(random, 'to'));
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name }, spec };
}

/** A pod with new labels (same id, name and addresses). */
export function relabelledPod(random: Random, pod: HarnessPod): HarnessPod {
  return { ...pod, podLabels: podLabels(random) };
}

/** New labels for one namespace: every pod of it as the host re-sends them. */
export function relabelledNamespace(random: Random, cluster: RandomCluster, namespace: string): HarnessPod[] {
  const labels = namespaceLabels(random, namespace);
  cluster.namespaceLabels.set(namespace, labels);
  const changed: HarnessPod[] = [];
  cluster.pods = cluster.pods.map((p) => {
    if (p.namespace !== namespace) return p;
    const q = { ...p, namespaceLabels: labels };
    changed.push(q);
    return q;
  });
  return changed;
}

export function randomProbes(random: Random, cluster: RandomCluster, count: number): Probe[] {
  const v4 = [...cluster.pods.map((p) => `${p.namespace}/${p.name}`), ...OUTSIDE_V4];
  const v6 = [...cluster.pods.flatMap((p) => p.ips.filter((ip) => ip.includes(':'))), ...OUTSIDE_V6];
  return Array.from({ length: count }, () => {
    // One family per probe: IPv6 pods are named by their address.
    const endpoints = random() < 0.8 ? v4 : v6;
    const roll = random();
    const protocol = roll < 0.6 ? 'TCP' : roll < 0.8 ? 'UDP' : roll < 0.95 ? 'SCTP' : 'ICMP';
    return { src: pick(random, endpoints), dst: pick(random, endpoints), protocol, port: pick(random, PROBE_PORTS) } as Probe;
  });
}

/** Nodes with labels and addresses inside and outside the probes' blocks, for `nodes` peers. */
export const RANDOM_NODES: KubeObject[] = [
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1', labels: { zone: 'a' } }, status: { addresses: [{ type: 'InternalIP', address: '10.9.0.1' }] } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-2', labels: { zone: 'b' } }, status: { addresses: [{ type: 'InternalIP', address: '192.168.2.9' }, { type: 'InternalIP', address: 'fd00:9::5' }] } },
];
/** Resolved names for `domainNames` peers. */
export const RANDOM_RESOLVED_NAMES: unknown[] = [
  { apiVersion: 'dns.kwp.io/v1', kind: 'ResolvedName', metadata: { name: 'api.example.com' }, addresses: ['203.0.113.5'] },
  { apiVersion: 'dns.kwp.io/v1', kind: 'ResolvedName', metadata: { name: 'example.com' }, addresses: ['192.168.1.7'] },
];

function cnpPeer(random: Random, egress: boolean): Record<string, unknown> {
  const roll = random() * (egress ? 1 : 0.6);
  if (roll < 0.3) return { namespaces: selector(random, 'namespace') };
  if (roll < 0.55) return { pods: { namespaceSelector: selector(random, 'namespace'), podSelector: selector(random, 'pod') } };
  if (roll < 0.6) return pick(random, [{ nodes: {} }, { ipBlock: { cidr: '10.0.0.0/8' } }]);
  if (roll < 0.75) return { networks: pick(random, [['192.168.0.0/16'], ['10.1.0.0/28', 'fd00:1::/64'], ['203.0.113.0/24']]) };
  if (roll < 0.87) return { nodes: pick(random, [{ matchLabels: { zone: 'a' } }, {}]) };
  return { domainNames: pick(random, [['*.example.com'], ['example.com'], ['other.org']]) };
}

function cnpProtocol(random: Random): Record<string, unknown> {
  const roll = random();
  const proto = pick(random, ['tcp', 'tcp', 'udp', 'sctp']);
  if (roll < 0.35) return { [proto]: { destinationPort: { number: pick(random, [80, 81, 53, 443, 8080]) } } };
  if (roll < 0.55) return { destinationNamedPort: pick(random, PORT_NAMES) };
  if (roll < 0.7) return { [proto]: { destinationPort: { range: { start: 1000, end: pick(random, [1999, 2000, 9090]) } } } };
  if (roll < 0.92) return { [proto]: {} };
  // Not understood: the rule fails closed.
  return pick(random, [{ icmp: {} }, { tcp: { destinationPort: { number: 0 } } }]);
}

function cnpRule(random: Random, egress: boolean, index: number): Record<string, unknown> {
  const r: Record<string, unknown> = { action: pick(random, ['Accept', 'Deny', 'Pass', 'Pass', 'Deny', 'Accept', 'Allow']) };
  if (random() < 0.6) r.name = `r${index}`;
  r[egress ? 'to' : 'from'] = random() < 0.97 ? Array.from({ length: 1 + Math.floor(random() * 2) }, () => cnpPeer(random, egress)) : [];
  if (random() < 0.75) r.protocols = Array.from({ length: 1 + Math.floor(random() * 3) }, () => cnpProtocol(random));
  return r;
}

/**
 * A subject selector of a shape the subject index must get right
 * (evaluators/cluster-common/subject-index.ts): empty; values it can file the
 * policy under (matchLabels, In, a value listed twice); only a key (Exists);
 * nothing to file under (NotIn, DoesNotExist only); a value no pod or
 * namespace has; an invalid selector (matches nothing).
 */
export function randomSubjectSelector(random: Random, labelsOf: 'pod' | 'namespace'): Record<string, unknown> {
  const [key, values, optional] = labelsOf === 'pod' ? ['app', APPS, 'tier'] : ['team', TEAMS, 'env'];
  const optionalValues = labelsOf === 'pod' ? ['front', 'back'] : ['prod', 'dev'];
  const roll = random();
  if (roll < 0.15) return {};
  if (roll < 0.3) return { matchLabels: { [key]: pick(random, values) } };
  if (roll < 0.4) return { matchLabels: { [key]: pick(random, values), [optional]: pick(random, optionalValues) } };
  if (roll < 0.5) return { matchExpressions: [{ key, operator: 'In', values: [pick(random, values), pick(random, values)] }] };
  if (roll < 0.58) return { matchExpressions: [{ key: optional, operator: 'Exists' }] };
  if (roll < 0.68) return { matchExpressions: [{ key, operator: 'NotIn', values: [pick(random, values)] }] };
  if (roll < 0.76) return { matchExpressions: [{ key: optional, operator: 'DoesNotExist' }] };
  if (roll < 0.84) {
    return { matchExpressions: [{ key: optional, operator: 'DoesNotExist' }, { key, operator: 'NotIn', values: [pick(random, values), pick(random, values)] }] };
  }
  if (roll < 0.9) return { matchLabels: { [key]: 'ghost' } };
  if (roll < 0.95) return { matchExpressions: [{ key: 'nobody-has-this', operator: 'Exists' }, { key, operator: 'NotIn', values: [pick(random, values)] }] };
  return { matchExpressions: [{ key, operator: 'Near', values: [pick(random, values)] }] };
}

/** A v1alpha2 ClusterNetworkPolicy of `tier` with random subject, priority (ties are common) and rules. */
export function randomClusterNetworkPolicy(random: Random, name: string, tier: 'Admin' | 'Baseline', subjects: 'rules' | 'subjects' = 'rules'): KubeObject {
  // 'subjects': the subject index's adversarial selector shapes instead of the common ones.
  const select = subjects === 'subjects' ? randomSubjectSelector : selector;
  const subject = random() < 0.5
    ? { namespaces: select(random, 'namespace') }
    : { pods: { namespaceSelector: select(random, 'namespace'), podSelector: select(random, 'pod') } };
  const spec: Record<string, unknown> = { tier, priority: Math.floor(random() * 12), subject };
  if (random() < 0.8) spec.ingress = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => cnpRule(random, false, i));
  if (random() < 0.7) spec.egress = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => cnpRule(random, true, i));
  return { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name }, spec };
}
