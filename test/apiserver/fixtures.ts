// Small objects of every kind the agent watches, for API-server tests.

import { Kinds, type KindKey, type KubeObject } from '../../host/contract.js';

export function pod(namespace: string, name: string, labels: Record<string, string> = {}, ip = '10.0.0.1'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'nginx', ports: [{ name: 'http', containerPort: 80, protocol: 'TCP' }] }] },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  };
}

export function namespace(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

export function node(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels }, spec: { podCIDR: '10.0.0.0/24' } };
}

export function networkPolicy(ns: string, name: string, podSelector: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: ns },
    spec: { podSelector: { matchLabels: podSelector }, policyTypes: ['Ingress'], ingress: [] },
  };
}

export function clusterNetworkPolicy(name: string, priority = 10): KubeObject {
  return {
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    metadata: { name },
    spec: { tier: 'Admin', priority, subject: { namespaces: {} }, ingress: [{ name: 'deny-all', action: 'Deny', from: [{ namespaces: {} }] }] },
  };
}

export function adminNetworkPolicy(name: string, priority = 10): KubeObject {
  return {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name },
    spec: { priority, subject: { namespaces: {} }, ingress: [{ name: 'allow', action: 'Allow', from: [{ namespaces: {} }] }] },
  };
}

export function baselineAdminNetworkPolicy(): KubeObject {
  return {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'BaselineAdminNetworkPolicy',
    // The API only accepts the singleton named `default`.
    metadata: { name: 'default' },
    spec: { subject: { namespaces: {} }, ingress: [{ name: 'deny', action: 'Deny', from: [{ namespaces: {} }] }] },
  };
}

/** One sample object per default watched kind, keyed by kind. */
export function oneOfEachKind(): Record<KindKey, KubeObject> {
  return {
    [Kinds.Pod]: pod('default', 'web', { app: 'web' }),
    [Kinds.Namespace]: namespace('default'),
    [Kinds.Node]: node('node-a', { zone: 'a' }),
    [Kinds.NetworkPolicy]: networkPolicy('default', 'deny-web', { app: 'web' }),
    [Kinds.ClusterNetworkPolicy]: clusterNetworkPolicy('deny-all'),
    [Kinds.AdminNetworkPolicy]: adminNetworkPolicy('allow-all'),
    [Kinds.BaselineAdminNetworkPolicy]: baselineAdminNetworkPolicy(),
  };
}
