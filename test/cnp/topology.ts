// The network-policy-api conformance topology as plain objects: four house
// namespaces with two pods each (harry-potter-0/1, draco-malfoy-0/1,
// cedric-diggory-0/1, luna-lovegood-0/1), three nodes, and host-networked
// centaur pods in forbidden-forrest, whose addresses are their nodes'.
import type { KubeObject } from '../../host/contract.js';

export const HOUSES = ['gryffindor', 'slytherin', 'hufflepuff', 'ravenclaw'] as const;
export type House = (typeof HOUSES)[number];

export const STUDENT: Record<House, string> = {
  gryffindor: 'harry-potter',
  slytherin: 'draco-malfoy',
  hufflepuff: 'cedric-diggory',
  ravenclaw: 'luna-lovegood',
};

export const ns = (house: string): string => `network-policy-conformance-${house}`;

/** `gryffindor/0` style shorthand to the `namespace/pod` a flow names. */
export function student(house: House, replica: 0 | 1): string {
  return `${ns(house)}/${STUDENT[house]}-${replica}`;
}

/** Every pod serves the ports the upstream agnhost containers do, with names for the named-port cases. */
const SERVER_PORTS = [
  { name: 'web', containerPort: 80, protocol: 'TCP' },
  { name: 'web-8080', containerPort: 8080, protocol: 'TCP' },
  { name: 'dns', containerPort: 53, protocol: 'UDP' },
  { name: 'mdns', containerPort: 5353, protocol: 'UDP' },
  { name: 'sctp-9003', containerPort: 9003, protocol: 'SCTP' },
  { name: 'sctp-9005', containerPort: 9005, protocol: 'SCTP' },
];

export const NODES = [
  { name: 'kind-control-plane', ip: '172.18.0.2', ip6: 'fc00:f853:ccd:e793::2', os: 'linux', role: 'control-plane' },
  { name: 'kind-worker', ip: '172.18.0.3', ip6: 'fc00:f853:ccd:e793::3', os: 'linux', role: 'worker' },
  { name: 'kind-worker2', ip: '172.18.0.4', ip6: 'fc00:f853:ccd:e793::4', os: 'linux', role: 'worker' },
] as const;

export function namespace(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

export function node(n: (typeof NODES)[number]): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: n.name,
      labels: { 'kubernetes.io/os': n.os, 'kubernetes.io/hostname': n.name, [`node-role.kubernetes.io/${n.role}`]: '' },
    },
    status: {
      addresses: [
        { type: 'InternalIP', address: n.ip },
        { type: 'InternalIP', address: n.ip6 },
        { type: 'Hostname', address: n.name },
      ],
    },
  };
}

export function pod(opts: {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  ips: string[];
  nodeName: string;
  hostNetwork?: boolean;
  ports?: Array<{ name: string; containerPort: number; protocol: string }>;
}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: opts.name, namespace: opts.namespace, labels: opts.labels },
    spec: {
      nodeName: opts.nodeName,
      ...(opts.hostNetwork ? { hostNetwork: true } : {}),
      containers: [{ name: 'server', image: 'registry.k8s.io/e2e-test-images/agnhost:2.43', ports: opts.ports ?? [] }],
    },
    status: { phase: 'Running', podIP: opts.ips[0], podIPs: opts.ips.map((ip) => ({ ip })) },
  };
}

/** Pod addresses: 10.244.<house index + 1>.<replica + 10>, and the matching fd00:10:244:: IPv6 address. */
export function studentIPs(house: House, replica: number): [string, string] {
  const h = HOUSES.indexOf(house) + 1;
  return [`10.244.${h}.${replica + 10}`, `fd00:10:244:${h}::${(replica + 10).toString(16)}`];
}

export function conformanceTopology(): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const n of NODES) objects.push(node(n));
  for (const house of HOUSES) objects.push(namespace(ns(house), { 'conformance-house': house }));
  objects.push(namespace(ns('forbidden-forrest'), { 'conformance-house': 'forbidden-forrest' }));
  for (const house of HOUSES) {
    for (const replica of [0, 1]) {
      const name = `${STUDENT[house]}-${replica}`;
      objects.push(pod({
        namespace: ns(house),
        name,
        labels: { 'conformance-house': house, 'statefulset.kubernetes.io/pod-name': name },
        ips: studentIPs(house, replica),
        nodeName: NODES[1 + replica].name,
        ports: SERVER_PORTS,
      }));
    }
  }
  // centaur-<i> runs host-networked on kind-worker / kind-worker2.
  for (const replica of [0, 1]) {
    const n = NODES[1 + replica];
    objects.push(pod({
      namespace: ns('forbidden-forrest'),
      name: `centaur-${replica}`,
      labels: { 'conformance-house': 'forbidden-forrest', 'statefulset.kubernetes.io/pod-name': `centaur-${replica}` },
      ips: [n.ip, n.ip6],
      nodeName: n.name,
      hostNetwork: true,
      ports: [{ name: 'serve-36363', containerPort: 36363, protocol: 'TCP' }],
    }));
  }
  return objects;
}
