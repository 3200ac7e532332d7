// kube-proxy-style Services for the lab: the iptables nat rules a Service
// proxy installs in the node namespace, and the Service and EndpointSlice
// objects that describe them, computed from one description so the kernel and
// the policy pipeline always agree on where a Service sends a connection.
//
// As kube-proxy's iptables mode does it: a ClusterIP (and a NodePort on any
// local address) jumps to a per-port chain that picks an endpoint with the
// `statistic` match (endpoint k of n taken with probability 1/(n-k), the last
// unconditionally), and each endpoint chain DNATs to the pod's address and
// target port. A connection a pod makes to a Service that sends it back to
// the same pod is the hairpin: its source is rewritten to the pods' gateway
// (169.254.1.1) in POSTROUTING, or the pod would answer itself directly and
// drop the reply. The policy agent's queue runs between the two (after the
// DNAT in PREROUTING/OUTPUT, before the SNAT in POSTROUTING), so it judges
// the pod-to-pod tuple, as on a real node.

import type { KubeObject } from '../../host/contract.js';

export const HAIRPIN_SNAT_ADDRESS = '169.254.1.1';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

export interface LabServicePort {
  /** Needed when the Service has several ports. */
  name?: string;
  port: number;
  /** A number, or the name of a lab pod's container port (`tcp-80`, `udp-5353`). Default: `port`. */
  targetPort?: number | string;
  protocol?: 'TCP' | 'UDP';
  /** Also reachable on this port of every node address (from the "outside" namespace, say). */
  nodePort?: number;
}

export interface LabServiceSpec {
  name: string;
  namespace: string;
  /** Default 10.96.0.(10 + index). */
  clusterIP?: string;
  /** Lab pods of the namespace with these labels are the endpoints (unless setServiceEndpoints overrides). */
  selector: Record<string, string>;
  ports: LabServicePort[];
}

/** The part of a lab pod a Service needs. */
export interface ServiceEndpointPod {
  key: string;
  name: string;
  namespace: string;
  labels: Record<string, string>;
  ip: string;
  tcpPorts: number[];
  udpPorts: number[];
}

export interface LabService {
  name: string;
  namespace: string;
  /** `namespace/name`. */
  key: string;
  clusterIP: string;
  selector: Record<string, string>;
  ports: Array<Required<Pick<LabServicePort, 'port' | 'protocol'>> & Pick<LabServicePort, 'name' | 'nodePort'> & { targetPort: number | string }>;
  /** Keys of the endpoint pods, in the order the rules try them. */
  endpoints: string[];
}

export function labService(spec: LabServiceSpec, index: number, pods: readonly ServiceEndpointPod[]): LabService {
  const ports = spec.ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, protocol: p.protocol ?? 'TCP', targetPort: p.targetPort ?? p.port, ...(p.nodePort ? { nodePort: p.nodePort } : {}) }));
  if (ports.length > 1 && ports.some((p) => !p.name)) throw new Error(`lab: Service ${spec.namespace}/${spec.name} has several ports, so each needs a name`);
  const endpoints = pods.filter((p) => p.namespace === spec.namespace && Object.entries(spec.selector).every(([k, v]) => p.labels[k] === v)).map((p) => p.key);
  return { name: spec.name, namespace: spec.namespace, key: `${spec.namespace}/${spec.name}`, clusterIP: spec.clusterIP ?? `10.96.0.${10 + index}`, selector: { ...spec.selector }, ports, endpoints };
}

/** The pod port a Service port's targetPort names on this pod, or undefined when the pod has no such port. */
export function targetPortOn(pod: ServiceEndpointPod, port: LabService['ports'][number]): number | undefined {
  const ports = port.protocol === 'TCP' ? pod.tcpPorts : pod.udpPorts;
  if (typeof port.targetPort === 'number') return port.targetPort;
  const match = /^(tcp|udp)-(\d+)$/.exec(port.targetPort);
  if (!match || match[1] !== port.protocol.toLowerCase()) return undefined;
  const number = Number(match[2]);
  return ports.includes(number) ? number : undefined;
}

const CHAIN_PREFIX = 'KWPLAB';
const chain = (...parts: Array<string | number>) => [CHAIN_PREFIX, ...parts].join('-');

/**
 * `iptables-restore` input for the nat table: every Service, endpoint
 * selection, DNAT and the hairpin SNAT. Loaded with --noflush it replaces only
 * the lab's own chains, so reprogramming after an endpoint change is one
 * atomic load, as kube-proxy's sync is.
 */
export function natRules(services: readonly LabService[], pods: ReadonlyMap<string, ServiceEndpointPod>): string {
  const chains = [chain('SERVICES'), chain('NODEPORTS'), chain('POSTROUTING')];
  const rules: string[] = [];
  services.forEach((service, s) => {
    service.ports.forEach((port, p) => {
      const svc = chain('SVC', s, p);
      chains.push(svc);
      const proto = port.protocol.toLowerCase();
      rules.push(`-A ${chain('SERVICES')} -d ${service.clusterIP}/32 -p ${proto} -m ${proto} --dport ${port.port} -j ${svc}`);
      if (port.nodePort) rules.push(`-A ${chain('NODEPORTS')} -p ${proto} -m ${proto} --dport ${port.nodePort} -j ${svc}`);
      const targets = service.endpoints
        .map((key) => pods.get(key))
        .filter((pod): pod is ServiceEndpointPod => pod !== undefined)
        .map((pod) => ({ pod, target: targetPortOn(pod, port) }))
        .filter((e): e is { pod: ServiceEndpointPod; target: number } => e.target !== undefined);
      // No endpoints: no DNAT, and the ClusterIP is routed nowhere in the node
      // namespace, so the connection fails (kube-proxy rejects it in the filter table).
      targets.forEach(({ pod, target }, e) => {
        const sep = chain('SEP', s, p, e);
        chains.push(sep);
        const left = targets.length - e;
        const pick = left > 1 ? ` -m statistic --mode random --probability ${(1 / left).toFixed(10)}` : '';
        rules.push(`-A ${svc}${pick} -j ${sep}`);
        rules.push(`-A ${sep} -p ${proto} -m ${proto} -j DNAT --to-destination ${pod.ip}:${target}`);
      });
    });
  });
  // The hairpin SNAT: a packet a pod sent that comes back to the same pod.
  const endpointIPs = [...new Set(services.flatMap((s) => s.endpoints).map((key) => pods.get(key)?.ip).filter((ip): ip is string => ip !== undefined))].sort();
  for (const ip of endpointIPs) rules.push(`-A ${chain('POSTROUTING')} -s ${ip}/32 -d ${ip}/32 -j SNAT --to-source ${HAIRPIN_SNAT_ADDRESS}`);
  // NodePorts last, on local addresses only, as kube-proxy's KUBE-NODEPORTS.
  rules.push(`-A ${chain('SERVICES')} -m addrtype --dst-type LOCAL -j ${chain('NODEPORTS')}`);
  return ['*nat', ...chains.map((c) => `:${c} - [0:0]`), ...rules, 'COMMIT', ''].join('\n');
}

/** The jumps from the built-in nat chains into the lab's, installed once. */
export function natHooks(): string[][] {
  return [
    ['-t', 'nat', '-A', 'PREROUTING', '-j', chain('SERVICES')],
    ['-t', 'nat', '-A', 'OUTPUT', '-j', chain('SERVICES')],
    ['-t', 'nat', '-A', 'POSTROUTING', '-j', chain('POSTROUTING')],
  ];
}

/** The Service and its EndpointSlice, as the API server and the EndpointSlice controller would write them. */
export function serviceManifests(service: LabService, pods: ReadonlyMap<string, ServiceEndpointPod>): KubeObject[] {
  const nodePort = service.ports.some((p) => p.nodePort);
  const svc: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: service.name, namespace: service.namespace },
    spec: {
      type: nodePort ? 'NodePort' : 'ClusterIP',
      clusterIP: service.clusterIP,
      clusterIPs: [service.clusterIP],
      selector: { ...service.selector },
      ports: service.ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), protocol: p.protocol, port: p.port, targetPort: p.targetPort, ...(p.nodePort ? { nodePort: p.nodePort } : {}) })),
    },
  };
  const endpointPods = service.endpoints.map((key) => pods.get(key)).filter((pod): pod is ServiceEndpointPod => pod !== undefined);
  // One slice per distinct set of resolved target ports, as the controller groups them.
  const groups = new Map<string, { ports: Array<{ name: string; protocol: string; port: number }>; pods: ServiceEndpointPod[] }>();
  for (const pod of endpointPods) {
    const ports = service.ports.map((p) => ({ name: p.name ?? '', protocol: p.protocol, port: targetPortOn(pod, p) }));
    if (ports.some((p) => p.port === undefined)) continue;
    const key = JSON.stringify(ports);
    const group = groups.get(key) ?? { ports: ports as Array<{ name: string; protocol: string; port: number }>, pods: [] };
    group.pods.push(pod);
    groups.set(key, group);
  }
  const slices: KubeObject[] = [...groups.values()].map((group, i) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${service.name}-${i}`, namespace: service.namespace, labels: { [SERVICE_NAME_LABEL]: service.name } },
    addressType: 'IPv4',
    ports: group.ports,
    endpoints: group.pods.map((pod) => ({ addresses: [pod.ip], conditions: { ready: true }, targetRef: { kind: 'Pod', namespace: pod.namespace, name: pod.name } })),
  }));
  return [svc, ...slices];
}
