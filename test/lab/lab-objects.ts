// The Kubernetes objects that describe a lab, so the policy pipeline (through
// a manifest source or `kwp eval`) sees the same pods the lab wired.

import type { KubeObject } from '../../host/contract.js';
import type { LabPod } from './lab.js';
import { serviceManifests, type LabService } from './services.js';

export interface LabDescription {
  nodeName: string;
  nodeIp: string;
  nodeIpv6?: string;
  pods: LabPod[];
  namespaceLabels: Record<string, Record<string, string>>;
  services?: readonly LabService[];
  /** The node's address on the outside link, when the lab has one (a NodePort answers there too). */
  nodeOutsideIp?: string;
}

export function labManifests(lab: LabDescription): KubeObject[] {
  const namespaces = [...new Set(lab.pods.map((p) => p.namespace))].sort();
  const objects: KubeObject[] = [];
  for (const name of namespaces) {
    objects.push({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...(lab.namespaceLabels[name] ?? {}) } },
    });
  }
  objects.push({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: lab.nodeName, labels: { 'kubernetes.io/hostname': lab.nodeName } },
    status: { addresses: [lab.nodeIp, ...(lab.nodeIpv6 ? [lab.nodeIpv6] : []), ...(lab.nodeOutsideIp ? [lab.nodeOutsideIp] : [])].map((address) => ({ type: 'InternalIP', address })) },
  });
  for (const pod of lab.pods) {
    const ports = [
      ...pod.tcpPorts.map((port) => ({ name: `tcp-${port}`, containerPort: port, protocol: 'TCP' })),
      ...pod.udpPorts.map((port) => ({ name: `udp-${port}`, containerPort: port, protocol: 'UDP' })),
      ...(pod.dnsRecords ? [{ name: 'dns', containerPort: 53, protocol: 'UDP' }] : []),
    ];
    objects.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pod.name, namespace: pod.namespace, labels: { ...pod.labels }, uid: `lab-${pod.namespace}-${pod.name}` },
      spec: { nodeName: lab.nodeName, containers: [{ name: 'app', image: 'kwp-lab/pod-agent', ports }] },
      status: { phase: 'Running', hostIP: lab.nodeIp, podIP: pod.ip, podIPs: [pod.ip, ...(pod.ipv6 ? [pod.ipv6] : [])].map((ip) => ({ ip })) },
    });
  }
  const pods = new Map(lab.pods.map((p) => [p.key, p]));
  for (const service of lab.services ?? []) objects.push(...serviceManifests(service, pods));
  return objects;
}
