// Services as a Service proxy (kube-proxy) sees them: which Service a name, a
// ClusterIP or a NodePort names, and which endpoints a connection to one of
// its ports may be sent to, with the port it is rewritten to. Policies never
// see a Service address: the packet the agent judges has already been
// rewritten to an endpoint (docs/semantics.md, "Services"), so `kwp eval`,
// `kwp explain` and DNS-learnt names all go through here to find the pods a
// Service address stands for.
//
// Endpoints come from the Service's EndpointSlices (discovery.k8s.io/v1, label
// kubernetes.io/service-name), which carry the target port already resolved
// per slice. A Service with a selector and no slices yet gets what the
// EndpointSlice controller would write: the pods of its namespace matching the
// selector, with a named targetPort resolved on each pod's containers (a pod
// without that port is not an endpoint).

import { Kinds, Protocol, type KubeObject, type PodInfo } from '../contract.js';
import { normalizeIP, parseIP } from '../net/ip.js';
import type { ClusterState } from '../state/cluster-state.js';

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

export type ServiceProtocol = 'TCP' | 'UDP' | 'SCTP';

const PROTOCOL_NUMBERS: Record<ServiceProtocol, number> = { TCP: Protocol.TCP, UDP: Protocol.UDP, SCTP: Protocol.SCTP };

export interface ServicePortSpec {
  name: string;
  protocol: ServiceProtocol;
  port: number;
  /** A number, or the name of a container port. */
  targetPort: number | string;
  nodePort?: number;
}

export interface ServiceEndpoint {
  /** The address the Service proxy rewrites the destination to. */
  address: string;
  /** The port it rewrites the destination port to. */
  port: number;
  /** The pod at that address, when it is one the state knows. */
  pod?: PodInfo;
  /** `namespace/name` of the pod, or the address for an endpoint that is not a known pod. */
  label: string;
}

export interface ServiceRoute {
  /** `namespace/name`. */
  service: string;
  servicePort: ServicePortSpec;
  endpoints: ServiceEndpoint[];
  /** Where the endpoints came from. */
  from: 'EndpointSlices' | 'selector';
}

export class ServiceLookupError extends Error {}

function protocolOf(value: unknown): ServiceProtocol {
  const name = String(value ?? 'TCP').toUpperCase();
  return name === 'UDP' || name === 'SCTP' ? name : 'TCP';
}

/** The Service's ports, defaults filled in as the API server would. */
export function servicePorts(service: KubeObject): ServicePortSpec[] {
  const ports: unknown[] = Array.isArray(service.spec?.ports) ? service.spec.ports : [];
  const out: ServicePortSpec[] = [];
  for (const raw of ports) {
    const p = raw as Record<string, unknown>;
    const port = Number(p?.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) continue;
    const target = p.targetPort;
    const targetPort = typeof target === 'string' && !/^\d+$/.test(target) ? target : target === undefined ? port : Number(target);
    const nodePort = Number(p.nodePort);
    out.push({
      name: typeof p.name === 'string' ? p.name : '',
      protocol: protocolOf(p.protocol),
      port,
      targetPort,
      ...(Number.isInteger(nodePort) && nodePort > 0 ? { nodePort } : {}),
    });
  }
  return out;
}

/** spec.clusterIPs (or spec.clusterIP), canonical, without "None". */
export function clusterIPs(service: KubeObject): string[] {
  const spec = service.spec ?? {};
  const raw: unknown[] = Array.isArray(spec.clusterIPs) && spec.clusterIPs.length > 0 ? spec.clusterIPs : [spec.clusterIP];
  return raw.map((ip) => (typeof ip === 'string' ? normalizeIP(ip) : undefined)).filter((ip): ip is string => ip !== undefined);
}

const keyOf = (obj: KubeObject) => `${obj.metadata.namespace ?? 'default'}/${obj.metadata.name}`;

function selects(selector: Record<string, string>, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(selector)) if (labels[k] !== v) return false;
  return true;
}

export class ServiceDirectory {
  constructor(private readonly state: ClusterState) {}

  services(): KubeObject[] {
    return this.state.objects(Kinds.Service);
  }

  /** The Service `namespace/name`, if the state holds it. */
  byName(ref: string): KubeObject | undefined {
    return this.state.object(Kinds.Service, ref);
  }

  /** The Service whose ClusterIP this is. */
  byClusterIP(address: string): KubeObject | undefined {
    const ip = normalizeIP(address);
    if (ip === undefined) return undefined;
    return this.services().find((s) => clusterIPs(s).includes(ip));
  }

  /** The Service with a NodePort `port` for `protocol`. */
  byNodePort(port: number, protocol: ServiceProtocol): KubeObject | undefined {
    return this.services().find((s) => servicePorts(s).some((p) => p.nodePort === port && p.protocol === protocol));
  }

  /**
   * Where a connection to `port`/`protocol` of the Service goes. `port` is a
   * Service port, or a NodePort when `nodePort` is set. Throws
   * ServiceLookupError with what to fix when the Service has no such port.
   */
  route(service: KubeObject, protocol: ServiceProtocol, port: number, nodePort = false): ServiceRoute {
    const key = keyOf(service);
    const ports = servicePorts(service);
    const servicePort = ports.find((p) => p.protocol === protocol && (nodePort ? p.nodePort === port : p.port === port));
    if (!servicePort) {
      const known = ports.map((p) => `${p.protocol}/${nodePort ? p.nodePort ?? '-' : p.port}`).join(', ') || 'none';
      throw new ServiceLookupError(`Service ${key} has no ${nodePort ? 'NodePort' : 'port'} ${protocol}/${port} (its ${nodePort ? 'NodePorts' : 'ports'}: ${known})`);
    }
    const slices = this.state
      .objects(Kinds.EndpointSlice)
      .filter((s) => (s.metadata.namespace ?? 'default') === (service.metadata.namespace ?? 'default') && s.metadata.labels?.[SERVICE_NAME_LABEL] === service.metadata.name);
    if (slices.length > 0) return { service: key, servicePort, endpoints: this.sliceEndpoints(slices, servicePort), from: 'EndpointSlices' };
    return { service: key, servicePort, endpoints: this.selectorEndpoints(service, servicePort), from: 'selector' };
  }

  private sliceEndpoints(slices: KubeObject[], servicePort: ServicePortSpec): ServiceEndpoint[] {
    const out: ServiceEndpoint[] = [];
    const seen = new Set<string>();
    for (const slice of slices) {
      const ports: any[] = Array.isArray(slice.ports) ? (slice.ports as any[]) : [];
      // A slice port answers the Service port of the same name (both "" when unnamed).
      const match = ports.find((p) => (p?.name ?? '') === servicePort.name && protocolOf(p?.protocol) === servicePort.protocol);
      const port = Number(match?.port);
      if (!Number.isInteger(port) || port < 1 || port > 65535) continue;
      const endpoints: any[] = Array.isArray(slice.endpoints) ? (slice.endpoints as any[]) : [];
      for (const endpoint of endpoints) {
        // kube-proxy sends new connections to ready endpoints only (ready unset means ready).
        if (endpoint?.conditions?.ready === false) continue;
        for (const raw of Array.isArray(endpoint?.addresses) ? endpoint.addresses : []) {
          const address = typeof raw === 'string' ? normalizeIP(raw) : undefined;
          if (address === undefined || seen.has(`${address}:${port}`)) continue;
          seen.add(`${address}:${port}`);
          out.push(this.endpoint(address, port));
        }
      }
    }
    return out;
  }

  private selectorEndpoints(service: KubeObject, servicePort: ServicePortSpec): ServiceEndpoint[] {
    const selector = service.spec?.selector;
    if (typeof selector !== 'object' || selector === null || Object.keys(selector).length === 0) return [];
    const namespace = service.metadata.namespace ?? 'default';
    const out: ServiceEndpoint[] = [];
    for (const pod of this.state.pods()) {
      if (pod.namespace !== namespace || pod.hostNetwork || pod.clusterId !== this.state.localClusterId || !selects(selector, pod.podLabels)) continue;
      let port: number | undefined;
      if (typeof servicePort.targetPort === 'number') port = servicePort.targetPort;
      else {
        const wanted = PROTOCOL_NUMBERS[servicePort.protocol];
        port = pod.containerPorts.find((p) => p.name === servicePort.targetPort && p.protocol === wanted)?.port;
      }
      if (port === undefined) continue;
      for (const address of pod.ips) out.push({ address, port, pod, label: `${pod.namespace}/${pod.name}` });
    }
    return out.sort((a, b) => a.label.localeCompare(b.label) || a.address.localeCompare(b.address));
  }

  private endpoint(address: string, port: number): ServiceEndpoint {
    const pod = this.state.podByIP(address);
    return { address, port, ...(pod ? { pod } : {}), label: pod ? `${pod.namespace}/${pod.name}` : address };
  }

  /** The Service a flow end names: `namespace/name` of a Service, or one of its ClusterIPs. */
  resolve(ref: string): KubeObject | undefined {
    return parseIP(ref) ? this.byClusterIP(ref) : this.byName(ref);
  }
}

/**
 * The endpoint addresses a ClusterIP stands for (every port, ready endpoints),
 * or none when it is no Service's. A DNS answer naming a Service's ClusterIP
 * is recorded for these too: the packets the agent judges carry the endpoint,
 * never the ClusterIP (docs/semantics.md, "Domain names").
 */
export function endpointAddressesOf(state: ClusterState, address: string): string[] {
  const directory = new ServiceDirectory(state);
  const service = directory.byClusterIP(address);
  if (!service) return [];
  const out = new Set<string>();
  for (const port of servicePorts(service)) {
    for (const endpoint of directory.route(service, port.protocol, port.port).endpoints) out.add(endpoint.address);
  }
  return [...out];
}
