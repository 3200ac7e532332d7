// Seeded random clusters and recorded flows for the property tests of
// `kwp recommend` and `kwp diff`. Unlike bench/generator.ts it aims at the
// corners a recommendation can get wrong: workloads told apart only by one
// extra label (a canary beside its stable sibling), per-pod labels of each
// controller, container ports named differently by two replicas, TCP, UDP and
// SCTP ports, dual-stack pods, sources and destinations outside the cluster,
// pods no selector can pick, and pre-existing policies of both tiers. The
// generator also says which workload each pod belongs to, so the tests judge
// the output by that and not by the code under test's own grouping.
import type { KubeObject } from '../contract.js';
import { seededRandom } from '../dataplane/seeded-random.js';

export type Random = () => number;
export const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)];
export const int = (random: Random, n: number): number => Math.floor(random() * n);

export type Proto = 'TCP' | 'UDP' | 'SCTP';
export interface GenPort { name?: string; port: number; protocol: Proto }

export interface GenPod {
  namespace: string;
  name: string;
  ref: string;
  /** `namespace/id` of the workload it was generated for; undefined for a pod no selector can pick. */
  workload?: string;
  ips: string[];
  ports: GenPort[];
  /** On the node's network: policies see its node address, never a pod. */
  hostNetwork?: true;
}

export interface GenCluster {
  /** Namespaces and pods. */
  base: KubeObject[];
  /** Policies that were there before any recommendation. */
  policies: KubeObject[];
  pods: GenPod[];
  namespaces: string[];
}

export interface GenFlow { src: string; dst: string; protocol: Proto; port: number }

const NAMESPACES = ['web', 'shop', 'data', 'ops'];
const TEAMS = ['red', 'blue'];
const APP_KEYS = ['app.kubernetes.io/name', 'app', 'k8s-app', 'role'];
const BASES = ['api', 'web', 'db', 'cache', 'worker', 'queue'];
export const PORTS: readonly GenPort[] = [
  { name: 'http', port: 8080, protocol: 'TCP' },
  { name: 'metrics', port: 9090, protocol: 'TCP' },
  { name: 'dns', port: 53, protocol: 'UDP' },
  { name: 'diameter', port: 3868, protocol: 'SCTP' },
  { port: 5432, protocol: 'TCP' },
  { name: 'grpc', port: 50051, protocol: 'TCP' },
  { port: 4789, protocol: 'UDP' },
];
export const EXTERNAL_V4 = ['203.0.113.7', '198.51.100.20', '192.0.2.33'];
export const EXTERNAL_V6 = ['2001:db8::7', '2001:db8:1::20'];

const alnum = 'bcdfghjklmnpqrstvwxz2456789';
const token = (random: Random, n: number) => Array.from({ length: n }, () => pick(random, [...alnum])).join('');

function podObject(p: GenPod, labels: Record<string, string>): KubeObject {
  const ports = p.ports.map((q) => ({ ...(q.name ? { name: q.name } : {}), containerPort: q.port, protocol: q.protocol }));
  return {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: p.name, namespace: p.namespace, labels },
    spec: { containers: [{ name: 'main', image: 'registry.example/app:1', ...(ports.length ? { ports } : {}) }] },
    status: { phase: 'Running', podIP: p.ips[0], podIPs: p.ips.map((ip) => ({ ip })) },
  };
}

export interface GenOptions { policies?: boolean }

export function generateRandomCluster(seed: number, options: GenOptions = {}): GenCluster {
  const random = seededRandom(seed);
  const namespaces = NAMESPACES.slice(0, 2 + int(random, 3));
  const base: KubeObject[] = namespaces.map((name, i) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { team: TEAMS[i % 2] } } }));
  const pods: GenPod[] = [];
  let index = 0;
  const addPod = (namespace: string, name: string, labels: Record<string, string>, workload: string | undefined, ports: GenPort[], dual: boolean) => {
    index++;
    const ips = [`10.20.${index >> 7}.${(index & 127) + 1}`, ...(dual ? [`fd00:20::${index.toString(16)}`] : [])];
    const p: GenPod = { namespace, name, ref: `${namespace}/${name}`, workload, ips, ports };
    pods.push(p);
    base.push(podObject(p, labels));
  };

  namespaces.forEach((ns) => {
    const workloads: Array<{ labels: Record<string, string>; style: string; id: string }> = [];
    const count = 2 + int(random, 3);
    for (let w = 0; w < count; w++) {
      const key = pick(random, APP_KEYS);
      const labels: Record<string, string> = { [key]: `${pick(random, BASES)}${w}` };
      if (random() < 0.4) labels.version = 'v1';
      workloads.push({ labels, style: pick(random, ['deploy', 'deploy', 'sts', 'plain']), id: `${ns}/w${w}` });
      // A sibling told apart by one more label (a canary) or another version: selecting either by the labels they share would pick both.
      if (random() < 0.35) {
        const sibling = random() < 0.5 ? { ...labels, track: 'canary' } : { ...labels, version: 'v2' };
        workloads.push({ labels: sibling, style: 'deploy', id: `${ns}/w${w}s` });
      }
    }
    for (const wl of workloads) {
      const ports = PORTS.filter(() => random() < 0.45);
      if (ports.length === 0) ports.push(pick(random, PORTS));
      // Replicas that name one port differently (two revisions of a pod template): a policy may name it only if all agree.
      const renamed = random() < 0.3 ? ports.find((p) => p.name) : undefined;
      const replicas = 1 + int(random, 3);
      const hash = token(random, 9);
      const dual = random() < 0.5;
      const stem = Object.values(wl.labels)[0];
      for (let r = 0; r < replicas; r++) {
        const podPorts = ports.map((p) => (p === renamed && r % 2 === 1 ? { ...p, name: `${p.name}-alt` } : p));
        if (wl.style === 'sts') {
          const name = `${stem}-${r}`;
          addPod(ns, name, { ...wl.labels, 'statefulset.kubernetes.io/pod-name': name, 'controller-revision-hash': `${stem}-${hash}` }, wl.id, podPorts, dual);
        } else if (wl.style === 'deploy') {
          addPod(ns, `${stem}-${hash}-${token(random, 5)}`, { ...wl.labels, 'pod-template-hash': hash }, wl.id, podPorts, dual);
        } else {
          addPod(ns, `${stem}-${r}x`, { ...wl.labels }, wl.id, podPorts, dual);
        }
      }
    }
    if (random() < 0.3) {
      // A node agent: its traffic is the node's, so recommend admits its address, and no policy is written for it as a destination.
      const ip = `192.168.50.${pods.length + 1}`;
      const p: GenPod = { namespace: ns, name: `node-agent-${token(random, 5)}`, ref: '', ips: [ip], ports: [PORTS[1]], hostNetwork: true };
      p.ref = `${ns}/${p.name}`;
      pods.push(p);
      const obj = podObject(p, { app: 'node-agent' });
      obj.spec.hostNetwork = true;
      base.push(obj);
    }
    if (random() < 0.4) addPod(ns, `loner-${token(random, 9)}-${token(random, 5)}`, { 'pod-template-hash': token(random, 9) }, undefined, [PORTS[0]], false);
  });

  const policies = options.policies ? randomPolicies(random, namespaces, base) : [];
  return { base, policies, pods, namespaces };
}

function randomPolicies(random: Random, namespaces: string[], base: KubeObject[]): KubeObject[] {
  const out: KubeObject[] = [];
  const podsOf = (ns: string) => base.filter((o) => o.kind === 'Pod' && o.metadata.namespace === ns);
  namespaces.forEach((ns, i) => {
    const roll = random();
    if (roll < 0.25) {
      out.push({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'default-deny', namespace: ns }, spec: { podSelector: {}, policyTypes: ['Ingress'] } });
    } else if (roll < 0.45) {
      out.push({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'allow-all', namespace: ns }, spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] } });
    }
    if (random() < 0.4) {
      const target = pick(random, podsOf(ns));
      const labels = Object.fromEntries(Object.entries(target.metadata.labels ?? {}).filter(([k]) => k !== 'pod-template-hash' && !k.startsWith('statefulset') && k !== 'controller-revision-hash'));
      out.push({
        apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: `from-team-${i}`, namespace: ns },
        spec: {
          podSelector: { matchLabels: labels },
          policyTypes: ['Ingress'],
          ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: pick(random, TEAMS) } } }], ports: [{ protocol: 'TCP', port: pick(random, [8080, 9090, 'http']) }] }],
        },
      });
    }
    if (random() < 0.1) {
      out.push({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'egress-lockdown', namespace: ns }, spec: { podSelector: {}, policyTypes: ['Egress'], egress: [{ ports: [{ protocol: 'UDP', port: 53 }] }] } });
    }
  });
  const cnps = int(random, 3);
  for (let i = 0; i < cnps; i++) {
    const action = pick(random, ['Accept', 'Deny', 'Pass'] as const);
    const tier = random() < 0.7 ? 'Admin' : 'Baseline';
    out.push({
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: `pre-${tier.toLowerCase()}-${i}` },
      spec: {
        tier, priority: random() < 0.4 ? 100 + int(random, 3) : int(random, 150),
        subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': pick(random, namespaces) } } },
        ingress: [{
          name: `${action.toLowerCase()}-${i}`, action: tier === 'Baseline' && action === 'Pass' ? 'Deny' : action,
          from: [{ namespaces: { matchLabels: { team: pick(random, TEAMS) } } }],
          ...(random() < 0.6 ? { protocols: [{ tcp: { destinationPort: { number: pick(random, [8080, 9090, 5432]) } } }] } : {}),
        }],
      },
    });
  }
  // Drawn last, so the clusters of earlier seeds keep their policies above.
  if (random() < 0.3) {
    out.push({
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: 'pre-admin-egress' },
      spec: {
        tier: 'Admin', priority: int(random, 150),
        subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': pick(random, namespaces) } } },
        egress: [{ name: 'deny-metrics-out', action: 'Deny', to: [{ namespaces: { matchLabels: { team: pick(random, TEAMS) } } }], protocols: [{ tcp: { destinationPort: { number: 9090 } } }] }],
      },
    });
  }
  if (random() < 0.4) {
    out.push({
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'v1-from-stable', namespace: pick(random, namespaces) },
      spec: {
        podSelector: { matchExpressions: [{ key: 'version', operator: 'In', values: ['v1'] }] },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'track', operator: 'DoesNotExist' }] } }], ports: [{ protocol: 'TCP', port: 8080 }, { protocol: 'UDP', port: 'dns' }] }],
      },
    });
  }
  return out;
}

/** One end as a flow names it: mostly `namespace/pod`, sometimes the pod's address of that family. */
function endOf(random: Random, p: GenPod, family: 4 | 6): string {
  const ip = p.ips.find((a) => (family === 6) === a.includes(':'))!;
  return random() < 0.15 ? ip : p.ref;
}

/** Observed flows: pod to pod on the destination's ports (and some other), outside addresses to pods and back. */
export function generateRandomFlows(cluster: GenCluster, seed: number, count: number): GenFlow[] {
  const random = seededRandom(seed);
  const flows: GenFlow[] = [];
  const portOf = (dst: GenPod): { protocol: Proto; port: number } => {
    if (random() < 0.8) { const p = pick(random, dst.ports); return { protocol: p.protocol, port: p.port }; }
    return pick(random, [{ protocol: 'TCP', port: 443 }, { protocol: 'UDP', port: 5000 }, { protocol: 'SCTP', port: 9999 }] as const);
  };
  while (flows.length < count) {
    const roll = random();
    const dst = pick(random, cluster.pods);
    if (roll < 0.65) {
      const src = pick(random, cluster.pods);
      const v6 = src.ips.length > 1 && dst.ips.length > 1 && random() < 0.3;
      const family = v6 ? 6 : 4;
      flows.push({ src: v6 ? endOf(random, src, 6) : endOf(random, src, 4), dst: endOf(random, dst, family), ...portOf(dst) });
      if (v6 && flows.at(-1)!.src === src.ref && flows.at(-1)!.dst === dst.ref) flows.at(-1)!.dst = dst.ips[1];
    } else if (roll < 0.85) {
      const v6 = dst.ips.length > 1 && random() < 0.4;
      flows.push({ src: pick(random, v6 ? EXTERNAL_V6 : EXTERNAL_V4), dst: v6 ? dst.ips[1] : endOf(random, dst, 4), ...portOf(dst) });
    } else {
      const src = pick(random, cluster.pods);
      flows.push({ src: src.ref, dst: pick(random, EXTERNAL_V4), protocol: 'TCP', port: pick(random, [443, 80]) });
    }
  }
  return flows;
}

/** The pod an end names (by reference or address), if any. */
export function podAt(cluster: GenCluster, end: string): GenPod | undefined {
  return cluster.pods.find((p) => !p.hostNetwork && (p.ref === end || p.ips.includes(end)));
}

/** An end as policies see it: a host-networked pod is its node's address. */
export function addressOf(cluster: GenCluster, end: string): string {
  const host = cluster.pods.find((p) => p.hostNetwork && (p.ref === end || p.ips.includes(end)));
  return host ? host.ips[0] : end;
}

/** An end's identity at workload level: the generated workload of its pod, or the address. */
export function identityOf(cluster: GenCluster, end: string): string | undefined {
  const p = podAt(cluster, end);
  return p ? p.workload : `ip ${addressOf(cluster, end)}`;
}

/** A flow as the agent records it: the fields `kwp flows -o json` writes, not only the four a reader needs. */
export function agentRecord(cluster: GenCluster, f: GenFlow, count: number, verdict: 'allow' | 'deny'): Record<string, unknown> {
  const src = podAt(cluster, f.src);
  const dst = podAt(cluster, f.dst);
  const workload = (p: GenPod | undefined, end: string) => (p ? `${p.namespace}/Deployment/${p.name.split('-')[0]}` : end);
  const named = dst?.ports.find((p) => p.port === f.port && p.protocol === f.protocol)?.name ?? '';
  return {
    src: f.src, dst: f.dst, port: f.port, protocol: f.protocol, family: f.src.includes(':') || f.dst.includes(':') ? 6 : 4,
    srcPort: 40000 + count, srcWorkload: workload(src, f.src), dstWorkload: workload(dst, f.dst),
    srcLabels: {}, dstLabels: {}, srcNamespaceLabels: {}, dstNamespaceLabels: {}, dstPortName: named, verdict,
    egress: { stage: '', policy: '', rule: '', action: 'Default' }, ingress: { stage: '', policy: '', rule: '', action: 'Default' },
    audit: [], count, firstSeen: '2026-12-04T10:00:00.000Z', lastSeen: '2026-12-04T10:05:00.000Z', revision: 3, node: 'node-a',
  };
}
