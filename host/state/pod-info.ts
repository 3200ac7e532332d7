// PodInfo derivation: what the pipeline knows about a pod, computed from its
// Pod object with its Namespace's and Node's labels (a local pod), or from an
// IP tracker's record (a remote pod). Pure functions: ClusterState decides
// when to derive and what to do with the result.

import { Protocol, type ContainerPort, type KubeObject, type PodInfo } from '../contract.js';
import { formatIP, parseIP } from '../net/ip.js';
import { sharedJson, sharedLabels } from './stored-form.js';

/** The namespace label naming a pod's cluster in multicluster mode (SIG-Multicluster's ClusterSet naming). */
export const CLUSTER_LABEL = 'cluster.clusterset.k8s.io';

/** Kubernetes puts this label on every namespace; policies select namespaces by name through it. */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/**
 * A pod of another cluster of the set, as an IP tracker publishes it: the
 * pod's shape without the host's id (it gets one here) and hostNetwork
 * (such pods publish nothing). Remote pods only answer address lookups the
 * local cluster leaves open: a local pod always wins an address.
 */
export interface RemotePod extends Omit<PodInfo, 'id' | 'hostNetwork'> {
  /** Changes the pod's host id when it changes (a new pod under an old name). */
  uid?: string;
}

export const EMPTY_LABELS: Readonly<Record<string, string>> = Object.freeze({});

export function labelsOf(obj: KubeObject | undefined): Record<string, string> {
  return obj?.metadata?.labels ?? EMPTY_LABELS;
}

export function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const aKeys = Object.keys(a);
  if (aKeys.length !== Object.keys(b).length) return false;
  for (const key of aKeys) if (a[key] !== b[key] || !Object.prototype.hasOwnProperty.call(b, key)) return false;
  return true;
}

/** Equal PodInfos need no event: listeners (every stage) hear only of real changes. */
export function samePodInfo(a: PodInfo, b: PodInfo): boolean {
  return (
    a.id === b.id &&
    a.name === b.name &&
    a.namespace === b.namespace &&
    a.nodeName === b.nodeName &&
    a.clusterId === b.clusterId &&
    a.hostNetwork === b.hostNetwork &&
    a.ips.length === b.ips.length &&
    a.ips.every((ip, i) => ip === b.ips[i]) &&
    a.containerPorts.length === b.containerPorts.length &&
    a.containerPorts.every(
      (p, i) =>
        p.name === b.containerPorts[i].name &&
        p.port === b.containerPorts[i].port &&
        p.protocol === b.containerPorts[i].protocol,
    ) &&
    sameLabels(a.podLabels, b.podLabels) &&
    sameLabels(a.namespaceLabels, b.namespaceLabels) &&
    sameLabels(a.nodeLabels, b.nodeLabels)
  );
}

const PROTOCOL_NUMBERS: Record<string, number> = { TCP: Protocol.TCP, UDP: Protocol.UDP, SCTP: Protocol.SCTP };

/** Every named or numbered container port, native sidecars' included; malformed ones are skipped. */
export function containerPortsOf(spec: any): ContainerPort[] {
  const ports: ContainerPort[] = [];
  // Native sidecars (init containers that keep running) serve traffic like regular containers.
  const sidecars = Array.isArray(spec?.initContainers)
    ? spec.initContainers.filter((c: any) => c?.restartPolicy === 'Always')
    : [];
  const containers = [...(Array.isArray(spec?.containers) ? spec.containers : []), ...sidecars];
  for (const container of containers) {
    if (!Array.isArray(container?.ports)) continue;
    for (const port of container.ports) {
      const number = Number(port?.containerPort);
      if (!Number.isInteger(number) || number < 1 || number > 65535) continue;
      const protocol = PROTOCOL_NUMBERS[String(port.protocol ?? 'TCP').toUpperCase()];
      if (protocol === undefined) continue;
      ports.push({ name: typeof port.name === 'string' ? port.name : '', port: number, protocol });
    }
  }
  return ports;
}

/** `status.podIPs` (or `status.podIP`), canonical text, each address once, unparsable ones skipped. */
export function podIPsOf(status: any): string[] {
  const candidates: unknown[] = [];
  if (Array.isArray(status?.podIPs)) for (const entry of status.podIPs) candidates.push(entry?.ip);
  if (candidates.length === 0) candidates.push(status?.podIP);
  const ips: string[] = [];
  for (const candidate of candidates) {
    if (typeof candidate !== 'string') continue;
    const parsed = parseIP(candidate);
    if (!parsed) continue;
    const formatted = formatIP(parsed.bytes);
    // The stored object's string when it is already canonical: one copy of each address.
    const text = formatted === candidate ? candidate : formatted;
    if (!ips.includes(text)) ips.push(text);
  }
  return ips;
}

/** Where a PodInfo is derived: the local cluster's id, and whether it is one of a cluster set. */
export interface ClusterScope {
  clusterId: string;
  multicluster: boolean;
}

/** A local pod's PodInfo under host id `id`; undefined while the pod has no IP (it cannot be the end of any packet). */
export function localPodInfo(id: number, obj: KubeObject, namespaceObject: KubeObject | undefined, nodeObject: KubeObject | undefined, scope: ClusterScope): PodInfo | undefined {
  const ips = podIPsOf(obj.status);
  if (ips.length === 0) return undefined;
  const namespace = obj.metadata.namespace ?? 'default';
  return Object.freeze({
    id,
    name: obj.metadata.name,
    namespace,
    // Stored labels are already shared and frozen (stored-form.ts).
    podLabels: labelsOf(obj),
    namespaceLabels: sharedLabels({
      ...labelsOf(namespaceObject),
      [NAMESPACE_NAME_LABEL]: namespace,
      ...(scope.multicluster ? { [CLUSTER_LABEL]: scope.clusterId } : {}),
    }),
    nodeName: podNodeName(obj),
    nodeLabels: labelsOf(nodeObject),
    clusterId: scope.clusterId,
    containerPorts: sharedJson(containerPortsOf(obj.spec)),
    hostNetwork: obj.spec?.hostNetwork === true,
    ips: Object.freeze(ips) as string[],
  });
}

/** `spec.nodeName`, "" when unscheduled. */
export function podNodeName(obj: KubeObject): string {
  return typeof obj.spec?.nodeName === 'string' ? obj.spec.nodeName : '';
}

/** A remote pod's PodInfo under host id `id`; undefined when none of its addresses parses. */
export function remotePodInfo(id: number, pod: RemotePod, multicluster: boolean): PodInfo | undefined {
  const ips: string[] = [];
  for (const ip of pod.ips) {
    const parsed = parseIP(ip);
    if (!parsed) continue;
    const text = formatIP(parsed.bytes);
    if (!ips.includes(text)) ips.push(text);
  }
  if (ips.length === 0) return undefined;
  return Object.freeze({
    id,
    name: pod.name,
    namespace: pod.namespace,
    podLabels: sharedLabels(pod.podLabels),
    namespaceLabels: sharedLabels({
      ...pod.namespaceLabels,
      [NAMESPACE_NAME_LABEL]: pod.namespace,
      ...(multicluster ? { [CLUSTER_LABEL]: pod.clusterId } : {}),
    }),
    nodeName: pod.nodeName,
    nodeLabels: sharedLabels(pod.nodeLabels),
    clusterId: pod.clusterId,
    containerPorts: sharedJson(pod.containerPorts.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol }))),
    hostNetwork: false,
    ips: Object.freeze(ips) as string[],
  });
}
