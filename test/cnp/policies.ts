// Builders for the policy objects the cases use, in both API generations:
// policy.networking.k8s.io/v1alpha1 AdminNetworkPolicy / BaselineAdminNetworkPolicy
// (v0.1.7) and v1alpha2 ClusterNetworkPolicy.
import type { KubeObject } from '../../host/contract.js';
import { ns } from './topology.js';

type Rule = Record<string, unknown>;

/** Selects the namespace of one house by its kubernetes.io/metadata.name label. */
export function houseNamespace(house: string): { matchLabels: Record<string, string> } {
  return { matchLabels: { 'kubernetes.io/metadata.name': ns(house) } };
}

/** Selects by the conformance-house label, as the upstream pods/namespaces carry it. */
export function house(h: string): { matchLabels: Record<string, string> } {
  return { matchLabels: { 'conformance-house': h } };
}

export function anp(name: string, priority: number, subject: unknown, rules: { ingress?: Rule[]; egress?: Rule[] }): KubeObject {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name }, spec: { priority, subject, ...rules } };
}

export function banp(subject: unknown, rules: { ingress?: Rule[]; egress?: Rule[] }, name = 'default'): KubeObject {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'BaselineAdminNetworkPolicy', metadata: { name }, spec: { subject, ...rules } };
}

export function cnp(name: string, tier: 'Admin' | 'Baseline', priority: number, subject: unknown, rules: { ingress?: Rule[]; egress?: Rule[] }): KubeObject {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name }, spec: { tier, priority, subject, ...rules } };
}

export function networkPolicy(namespace: string, name: string, spec: Record<string, unknown>): KubeObject {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace }, spec };
}

/** v1alpha1 port entries. */
export const portNumber = (port: number, protocol = 'TCP') => ({ portNumber: { protocol, port } });
export const portRange = (start: number, end: number, protocol = 'TCP') => ({ portRange: { protocol, start, end } });
export const namedPort = (name: string) => ({ namedPort: name });

/** v1alpha2 protocol entries. */
export const tcp = (port: number) => ({ tcp: { destinationPort: { number: port } } });
export const udp = (port: number) => ({ udp: { destinationPort: { number: port } } });
export const sctp = (port: number) => ({ sctp: { destinationPort: { number: port } } });
export const tcpRange = (start: number, end: number) => ({ tcp: { destinationPort: { range: { start, end } } } });
export const udpRange = (start: number, end: number) => ({ udp: { destinationPort: { range: { start, end } } } });
export const sctpRange = (start: number, end: number) => ({ sctp: { destinationPort: { range: { start, end } } } });
export const destinationNamedPort = (name: string) => ({ destinationNamedPort: name });

/** Peers (the same field names in both generations). */
export const toNamespace = (h: string) => ({ namespaces: houseNamespace(h) });
export const toHousePods = (h: string, podName?: string) => ({
  pods: {
    namespaceSelector: house(h),
    podSelector: podName ? { matchLabels: { 'statefulset.kubernetes.io/pod-name': podName } } : house(h),
  },
});
export const subjectNamespace = (h: string) => ({ namespaces: houseNamespace(h) });
export const subjectHousePods = (h: string) => ({ pods: { namespaceSelector: house(h), podSelector: house(h) } });
