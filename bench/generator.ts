// Synthetic clusters for the bench: namespaces, pods, NetworkPolicies and
// ClusterNetworkPolicies at named scales, plus a flow mix over them. Everything
// comes from one seeded generator, so two runs with the same seed decide the
// same packets against the same objects and their figures can be compared.
import { Kinds, type KubeObject, type Packet } from '../host/contract.js';
import { buildPacket } from '../host/dataplane/packet-builder.js';
import { parsePacket } from '../host/dataplane/packet-parser.js';
import { seededRandom } from '../host/dataplane/seeded-random.js';

export interface Scale {
  name: string;
  namespaces: number;
  pods: number;
  networkPolicies: number;
  /** Split between the Admin and Baseline tiers (about 60/40). */
  clusterNetworkPolicies: number;
}

export const SCALES: Record<'small' | 'manyPods' | 'default' | 'large', Scale> = {
  small: { name: 'small', namespaces: 5, pods: 100, networkPolicies: 8, clusterNetworkPolicies: 2 },
  /** `small`'s policies over 100 times the pods: how cost grows with pods alone. */
  manyPods: { name: 'manyPods', namespaces: 5, pods: 10_000, networkPolicies: 8, clusterNetworkPolicies: 2 },
  default: { name: 'default', namespaces: 100, pods: 10_000, networkPolicies: 1_000, clusterNetworkPolicies: 100 },
  large: { name: 'large', namespaces: 100, pods: 10_000, networkPolicies: 10_000, clusterNetworkPolicies: 100 },
};

export interface SyntheticCluster {
  scale: Scale;
  namespaces: KubeObject[];
  pods: KubeObject[];
  networkPolicies: KubeObject[];
  clusterNetworkPolicies: KubeObject[];
  /** Every pod IP, in pod order. */
  podIPs: string[];
}

const TEAMS = ['frontend', 'backend', 'data', 'ops', 'batch'];
const ENVS = ['prod', 'staging', 'dev'];
const TIERS = ['web', 'api', 'db', 'cache'];
const APPS_PER_NAMESPACE = 10;
/** Ports every pod serves; the names are what NetworkPolicies' named ports refer to. */
export const POD_PORTS = [
  { name: 'http', containerPort: 8080, protocol: 'TCP' },
  { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
  { name: 'grpc', containerPort: 50051, protocol: 'TCP' },
  { name: 'dns', containerPort: 5353, protocol: 'UDP' },
];

export function podIP(index: number): string {
  // 10.64.0.0/10 holds four million pods; .0 and .255 are skipped for realism, not necessity.
  const host = index % 254;
  const subnet = Math.floor(index / 254);
  return `10.${64 + (subnet >> 8)}.${subnet & 255}.${host + 1}`;
}

const nsName = (i: number) => `ns-${String(i).padStart(3, '0')}`;

type Random = () => number;
const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)];
const int = (random: Random, n: number) => Math.floor(random() * n);

export function generateCluster(scale: Scale, seed = 1): SyntheticCluster {
  const random = seededRandom(seed);
  const namespaces: KubeObject[] = [];
  const nsLabels: Array<Record<string, string>> = [];
  for (let i = 0; i < scale.namespaces; i++) {
    const labels = { team: TEAMS[i % TEAMS.length], env: ENVS[Math.floor(i / TEAMS.length) % ENVS.length] };
    nsLabels.push(labels);
    namespaces.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsName(i), labels } });
  }

  const pods: KubeObject[] = [];
  const podIPs: string[] = [];
  for (let i = 0; i < scale.pods; i++) {
    const ns = i % scale.namespaces;
    const app = int(random, APPS_PER_NAMESPACE);
    const ip = podIP(i);
    podIPs.push(ip);
    pods.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `pod-${i}`,
        namespace: nsName(ns),
        uid: `uid-${i}`,
        labels: { app: `app-${app}`, tier: TIERS[app % TIERS.length], version: `v${1 + int(random, 3)}` },
      },
      spec: { nodeName: `node-${i % 20}`, containers: [{ name: 'main', ports: POD_PORTS.map((p) => ({ ...p })) }] },
      status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
    });
  }

  const networkPolicies: KubeObject[] = [];
  for (let i = 0; i < scale.networkPolicies; i++) {
    const ns = i % scale.namespaces;
    networkPolicies.push(networkPolicy(random, i, nsName(ns), scale));
  }

  const clusterNetworkPolicies: KubeObject[] = [];
  const admin = Math.ceil(scale.clusterNetworkPolicies * 0.6);
  for (let i = 0; i < scale.clusterNetworkPolicies; i++) {
    clusterNetworkPolicies.push(clusterNetworkPolicy(random, i, i < admin ? 'Admin' : 'Baseline'));
  }
  return { scale, namespaces, pods, networkPolicies, clusterNetworkPolicies, podIPs };
}

/** All objects in the order a source would list them. */
export function clusterObjects(cluster: SyntheticCluster): Array<[string, KubeObject[]]> {
  return [
    [Kinds.Namespace, cluster.namespaces],
    [Kinds.Pod, cluster.pods],
    [Kinds.NetworkPolicy, cluster.networkPolicies],
    [Kinds.ClusterNetworkPolicy, cluster.clusterNetworkPolicies],
  ];
}

function appSelector(random: Random): Record<string, unknown> {
  // Mostly matchLabels, sometimes matchExpressions, like real manifests.
  const roll = random();
  if (roll < 0.7) return { matchLabels: { app: `app-${int(random, APPS_PER_NAMESPACE)}` } };
  if (roll < 0.85) return { matchExpressions: [{ key: 'tier', operator: 'In', values: [pick(random, TIERS), pick(random, TIERS)] }] };
  return { matchLabels: { tier: pick(random, TIERS) }, matchExpressions: [{ key: 'version', operator: 'NotIn', values: ['v3'] }] };
}

/**
 * The mix: default-deny ingress, allow from a namespace selector on a named
 * port, allow from a pod selector on a port, ipBlock ingress with except,
 * egress to an ipBlock with an endPort range, and egress to DNS plus a peer app.
 */
function networkPolicy(random: Random, i: number, namespace: string, scale: Scale): KubeObject {
  const meta = { name: `np-${i}`, namespace };
  const kind = i < scale.namespaces && i % 3 === 0 ? 0 : 1 + (i % 5);
  let spec: Record<string, unknown>;
  switch (kind) {
    case 0:
      spec = { podSelector: {}, policyTypes: ['Ingress'] };
      break;
    case 1:
      spec = {
        podSelector: appSelector(random),
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: pick(random, TEAMS) } } }], ports: [{ protocol: 'TCP', port: 'http' }] }],
      };
      break;
    case 2:
      spec = {
        podSelector: appSelector(random),
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: appSelector(random) }], ports: [{ protocol: 'TCP', port: 8080 }, { protocol: 'TCP', port: 'grpc' }] }],
      };
      break;
    case 3:
      spec = {
        podSelector: appSelector(random),
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } }], ports: [{ protocol: 'TCP', port: 8080 }] }],
      };
      break;
    case 4:
      spec = {
        podSelector: appSelector(random),
        policyTypes: ['Egress'],
        egress: [{ to: [{ ipBlock: { cidr: '172.16.0.0/12' } }], ports: [{ protocol: 'TCP', port: 30000, endPort: 32767 }] }],
      };
      break;
    default:
      spec = {
        podSelector: appSelector(random),
        policyTypes: ['Egress', 'Ingress'],
        egress: [
          { to: [{ namespaceSelector: { matchLabels: { team: 'ops' } } }], ports: [{ protocol: 'UDP', port: 5353 }] },
          { to: [{ namespaceSelector: {}, podSelector: appSelector(random) }], ports: [{ protocol: 'TCP', port: 'http' }, { protocol: 'TCP', port: 9090 }] },
        ],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { env: pick(random, ENVS) } }, podSelector: appSelector(random) }] }],
      };
  }
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: meta, spec };
}

function clusterNetworkPolicy(random: Random, i: number, tier: 'Admin' | 'Baseline'): KubeObject {
  const subject = random() < 0.5
    ? { namespaces: { matchLabels: { env: pick(random, ENVS) } } }
    : { pods: { namespaceSelector: { matchLabels: { team: pick(random, TEAMS) } }, podSelector: { matchLabels: { tier: pick(random, TIERS) } } } };
  const roll = i % 4;
  const ingress: unknown[] = [];
  const egress: unknown[] = [];
  if (tier === 'Admin') {
    if (roll === 0) {
      ingress.push({ name: 'deny-batch', action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'batch', env: pick(random, ENVS) } } }], protocols: [{ tcp: { destinationPort: { number: 9090 } } }] });
    } else if (roll === 1) {
      ingress.push({ name: 'pass-http', action: 'Pass', from: [{ namespaces: {} }], protocols: [{ destinationNamedPort: 'http' }] });
    } else if (roll === 2) {
      ingress.push({ name: 'accept-ops', action: 'Accept', from: [{ pods: { namespaceSelector: { matchLabels: { team: 'ops' } }, podSelector: { matchLabels: { tier: pick(random, TIERS) } } } }] });
    } else {
      egress.push({ name: 'deny-docs-net', action: 'Deny', to: [{ networks: [`203.0.${113 + (i % 3)}.0/24`] }] });
    }
  } else {
    if (roll === 0) {
      egress.push({ name: 'baseline-deny-internet', action: 'Deny', to: [{ networks: ['8.8.0.0/16'] }] });
    } else if (roll === 1) {
      ingress.push({ name: 'baseline-accept-same-team', action: 'Accept', from: [{ namespaces: { matchLabels: { team: pick(random, TEAMS) } } }], protocols: [{ tcp: { destinationPort: { range: { start: 8000, end: 9000 } } } }] });
    } else if (roll === 2) {
      ingress.push({ name: 'baseline-deny-dev', action: 'Deny', from: [{ namespaces: { matchLabels: { env: 'dev' } } }] });
    } else {
      egress.push({ name: 'baseline-accept-private', action: 'Accept', to: [{ networks: ['172.16.0.0/12', '10.0.0.0/8'] }] });
    }
  }
  const spec: Record<string, unknown> = { tier, priority: tier === 'Admin' ? i : 500 + i, subject };
  if (ingress.length) spec.ingress = ingress;
  if (egress.length) spec.egress = egress;
  return { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: `cnp-${tier.toLowerCase()}-${i}` }, spec };
}

export type FlowClass = 'pod-to-pod' | 'pod-to-pod-udp' | 'pod-to-external' | 'external-to-pod' | 'icmp';

export interface FlowMix {
  packets: Packet[];
  classes: FlowClass[];
}

/**
 * `count` packets as the dataplane sees them: raw IPv4 bytes built from
 * header fields, parsed by the dataplane's own parser. 60% pod-to-pod TCP on
 * the pods' ports (allowed or denied by the policies), 10% pod-to-pod UDP,
 * 15% pod-to-external, 10% external-to-pod, 5% ICMP echo.
 */
export function generateFlows(cluster: SyntheticCluster, count: number, seed = 2): FlowMix {
  const random = seededRandom(seed);
  const ips = cluster.podIPs;
  const packets: Packet[] = [];
  const classes: FlowClass[] = [];
  const externalDst = ['8.8.8.8', '203.0.113.7', '203.0.114.9', '172.20.1.5', '1.1.1.1'];
  const externalSrc = ['192.168.7.20', '192.168.1.9', '198.51.100.4', '10.0.5.5'];
  for (let i = 0; i < count; i++) {
    const roll = random();
    const srcPort = 32768 + int(random, 28000);
    let cls: FlowClass;
    let spec: Parameters<typeof buildPacket>[0];
    if (roll < 0.6) {
      cls = 'pod-to-pod';
      spec = { src: pick(random, ips), dst: pick(random, ips), protocol: 6, srcPort, dstPort: pick(random, [8080, 8080, 9090, 50051, 443]) };
    } else if (roll < 0.7) {
      cls = 'pod-to-pod-udp';
      spec = { src: pick(random, ips), dst: pick(random, ips), protocol: 17, srcPort, dstPort: 5353 };
    } else if (roll < 0.85) {
      cls = 'pod-to-external';
      spec = { src: pick(random, ips), dst: pick(random, externalDst), protocol: 6, srcPort, dstPort: pick(random, [443, 31000, 80]) };
    } else if (roll < 0.95) {
      cls = 'external-to-pod';
      spec = { src: pick(random, externalSrc), dst: pick(random, ips), protocol: 6, srcPort, dstPort: 8080 };
    } else {
      cls = 'icmp';
      spec = { src: pick(random, ips), dst: pick(random, ips), protocol: 1, icmpType: 8, icmpCode: 0 };
    }
    const packet = parsePacket(buildPacket(spec));
    if (!packet) throw new Error(`bench generator: the dataplane parser refused ${JSON.stringify(spec)}`);
    packets.push(packet);
    classes.push(cls);
  }
  return { packets, classes };
}

/** A NetworkPolicy change for the update benchmark: one policy's allowed port moves. */
export function policyChange(cluster: SyntheticCluster, round: number): KubeObject {
  const base = cluster.networkPolicies[round % cluster.networkPolicies.length];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: `bench-change-${round % 8}`, namespace: base.metadata.namespace },
    spec: {
      podSelector: { matchLabels: { app: `app-${round % APPS_PER_NAMESPACE}` } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: { tier: TIERS[round % TIERS.length] } } }], ports: [{ protocol: 'TCP', port: 20000 + (round % 1000) }] }],
    },
  };
}
