// The shop scenario the demo and the agent matrix tests share: four pods in two
// namespaces, NetworkPolicies that isolate the shop, an AdminNetworkPolicy that
// lets monitoring in on port 80 regardless, and a second phase that tightens
// the database further.

import type { KubeObject } from '../../host/contract.js';
import type { LabOptions } from './lab.js';

export const scenarioLab: LabOptions = {
  pods: [
    { name: 'web', namespace: 'shop', labels: { app: 'web' }, tcpPorts: [80] },
    { name: 'db', namespace: 'shop', labels: { app: 'db' }, tcpPorts: [80, 5432] },
    { name: 'cache', namespace: 'shop', labels: { app: 'cache' }, tcpPorts: [80], udpPorts: [5353] },
    { name: 'monitor', namespace: 'ops', labels: { app: 'monitor' }, tcpPorts: [80] },
  ],
  namespaceLabels: { shop: { team: 'shop' }, ops: { team: 'ops' } },
};

/** Phase one: shop pods take traffic only from the shop; db only from web on 5432; monitoring gets port 80 everywhere. */
export const phaseOnePolicies: KubeObject[] = [
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'shop-internal-only', namespace: 'shop' },
    spec: {
      podSelector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['db'] }] },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: {} }] }],
    },
  },
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'db-from-web', namespace: 'shop' },
    spec: {
      podSelector: { matchLabels: { app: 'db' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ protocol: 'TCP', port: 5432 }] }],
    },
  },
  {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name: 'monitoring-allowed' },
    spec: {
      priority: 10,
      subject: { namespaces: {} },
      ingress: [
        {
          name: 'monitor-http',
          action: 'Allow',
          from: [{ namespaces: { matchLabels: { team: 'ops' } } }],
          ports: [{ portNumber: { protocol: 'TCP', port: 80 } }],
        },
      ],
    },
  },
];

/** Phase two, added on top: the cache may only talk to web (so no longer to ops/monitor). */
export const phaseTwoPolicies: KubeObject[] = [
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'cache-egress-to-web', namespace: 'shop' },
    spec: {
      podSelector: { matchLabels: { app: 'cache' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: { app: 'web' } } }] }],
    },
  },
];
