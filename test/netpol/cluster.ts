// The sig-network netpol e2e cluster as manifests: namespaces x, y, z, each
// with pods a, b, c serving ports 80 and 81 over TCP, UDP and SCTP, plus small
// builders for NetworkPolicy objects.
import type { KubeObject } from '../../host/contract.js';

export const NAMESPACES = ['x', 'y', 'z'] as const;
export const POD_NAMES = ['a', 'b', 'c'] as const;
export const PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
export type ProtocolName = (typeof PROTOCOLS)[number];

/** `ns/pod` of every pod of the cluster, in table order. */
export const ALL_PODS: string[] = NAMESPACES.flatMap((ns) => POD_NAMES.map((p) => `${ns}/${p}`));

/** x/a = 10.0.1.1, y/b = 10.0.2.2, ...: namespace index in the third octet, pod index in the fourth. */
export function podIP(key: string): string {
  const [ns, pod] = key.split('/');
  return `10.0.${NAMESPACES.indexOf(ns as never) + 1}.${POD_NAMES.indexOf(pod as never) + 1}`;
}

/** The IPv6 address of a pod in a dual-stack cluster: x/a = fd00:1::1. */
export function podIPv6(key: string): string {
  const [ns, pod] = key.split('/');
  return `fd00:${NAMESPACES.indexOf(ns as never) + 1}::${POD_NAMES.indexOf(pod as never) + 1}`;
}

// The test kit's builder: labels the namespace with its name, as the API server does.
export { namespace } from '../../host/testing/objects.js';
import { namespace } from '../../host/testing/objects.js';

export interface PodOptions {
  labels?: Record<string, string>;
  ip: string;
  /** A second, IPv6 address (dual stack). */
  ipv6?: string;
  hostNetwork?: boolean;
  /** Container ports; the e2e set (serve-80-tcp, serve-81-udp, ...) when absent. */
  ports?: { name: string; containerPort: number; protocol: ProtocolName }[];
}

export const E2E_PORTS = [80, 81].flatMap((port) =>
  PROTOCOLS.map((protocol) => ({ name: `serve-${port}-${protocol.toLowerCase()}`, containerPort: port, protocol })));

export function pod(ns: string, name: string, opts: PodOptions): KubeObject {
  const ports = opts.ports ?? E2E_PORTS;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: ns, name, labels: opts.labels ?? { pod: name } },
    spec: {
      nodeName: 'node-1',
      hostNetwork: opts.hostNetwork === true,
      // One container per port, as the e2e agnhost pods do.
      containers: ports.map((p) => ({
        name: `cont-${p.containerPort}-${p.protocol.toLowerCase()}`,
        image: 'registry.k8s.io/e2e-test-images/agnhost:2.53',
        ports: [{ name: p.name, containerPort: p.containerPort, protocol: p.protocol }],
      })),
    },
    status: { phase: 'Running', podIP: opts.ip, podIPs: [{ ip: opts.ip }, ...(opts.ipv6 ? [{ ip: opts.ipv6 }] : [])] },
  };
}

/** Namespaces x, y, z labelled `ns: <name>` and pods a, b, c labelled `pod: <name>` in each; `dualStack` adds IPv6 addresses. */
export function xyzCluster(opts: { dualStack?: boolean } = {}): KubeObject[] {
  const objects: KubeObject[] = [
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1', labels: { 'kubernetes.io/hostname': 'node-1' } } },
  ];
  for (const ns of NAMESPACES) objects.push(namespace(ns, { ns }));
  for (const key of ALL_PODS) {
    const [ns, name] = key.split('/');
    objects.push(pod(ns, name, { ip: podIP(key), ipv6: opts.dualStack ? podIPv6(key) : undefined }));
  }
  return objects;
}

export type Selector = { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };
export type Peer = { podSelector?: Selector; namespaceSelector?: Selector; ipBlock?: { cidr: string; except?: string[] } };
export type Port = { protocol?: ProtocolName; port?: number | string; endPort?: number };
export type IngressRule = { from?: Peer[]; ports?: Port[] };
export type EgressRule = { to?: Peer[]; ports?: Port[] };

export interface PolicySpec {
  podSelector: Selector;
  policyTypes?: ('Ingress' | 'Egress')[];
  ingress?: IngressRule[];
  egress?: EgressRule[];
}

export function networkPolicy(ns: string, name: string, spec: PolicySpec): KubeObject {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: ns, name }, spec };
}

/** `{matchLabels: {pod: "a"}}`-style shorthands. */
export const podLabel = (name: string): Selector => ({ matchLabels: { pod: name } });
export const nsLabel = (name: string): Selector => ({ matchLabels: { ns: name } });
export const all: Selector = {};
