// Hairpin traffic under every policy kind, decided through Services the way a
// Service proxy sends it. network-policy-api PR #390 (site-src/api-overview.md):
// ClusterNetworkPolicy is enforced logically outside the pod's network
// namespace, so a pod connecting to its own pod IP is not subject to it, while
// a pod connecting to a Service IP that is load-balanced back to itself is.
// AdminNetworkPolicy and BaselineAdminNetworkPolicy follow the same rule.
// NetworkPolicy v1 leaves hairpin implementation-defined: kube-wasm-policies
// judges a pod's traffic to itself like traffic between two pods.
import { describe, it } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import { runCase } from './harness.js';
import { anp, banp, cnp, networkPolicy, subjectNamespace, toNamespace } from './policies.js';
import { ns, student, studentIPs } from './topology.js';

const harry0 = student('gryffindor', 0);
const harry1 = student('gryffindor', 1);
const gryffindor = ns('gryffindor');

/** A Service in gryffindor whose only endpoint is harry-potter-0 (so every connection to it from harry-potter-0 hairpins). */
const harryService: KubeObject = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'harry', namespace: gryffindor },
  spec: { clusterIP: '10.96.0.20', selector: { 'statefulset.kubernetes.io/pod-name': 'harry-potter-0' }, ports: [{ name: 'http', port: 8000, targetPort: 'web' }] },
};
const harrySvc = `${gryffindor}/harry`;

const denyGryffindor = {
  ingress: [{ name: 'deny-from-gryffindor', action: 'Deny', from: [toNamespace('gryffindor')] }],
  egress: [{ name: 'deny-to-gryffindor', action: 'Deny', to: [toNamespace('gryffindor')] }],
};

describe('an Admin-tier ClusterNetworkPolicy denying the namespace', () => {
  it('denies a pod that reaches itself through its Service, and leaves its connection to its own pod IP alone', async () => {
    await runCase({
      name: 'cnp-admin-hairpin',
      objects: [harryService, cnp('deny-gryffindor', 'Admin', 10, subjectNamespace('gryffindor'), denyGryffindor)],
      probes: [
        { src: harry0, dst: harrySvc, port: 8000, expect: 'deny', egress: ['[CNP:Admin] Deny (deny-gryffindor, deny-to-gryffindor: '], ingress: ['[CNP:Admin] Deny (deny-gryffindor, deny-from-gryffindor: '] },
        { src: harry0, dst: '10.96.0.20', port: 8000, expect: 'deny', egress: ['[CNP:Admin] Deny (deny-gryffindor, deny-to-gryffindor: '] },
        { src: harry0, dst: harry0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: harry0, dst: studentIPs('gryffindor', 0)[0], port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: harry1, dst: harrySvc, port: 8000, expect: 'deny', egress: ['[CNP:Admin] Deny (deny-gryffindor, deny-to-gryffindor: '] },
      ],
    });
  });
});

describe('a Baseline-tier ClusterNetworkPolicy denying the namespace', () => {
  it('denies the Service hairpin and not the pod-IP one', async () => {
    await runCase({
      name: 'cnp-baseline-hairpin',
      objects: [harryService, cnp('baseline-deny-gryffindor', 'Baseline', 10, subjectNamespace('gryffindor'), denyGryffindor)],
      probes: [
        { src: harry0, dst: harrySvc, port: 8000, expect: 'deny', egress: ['[CNP:Baseline] Deny (baseline-deny-gryffindor, deny-to-gryffindor: '] },
        { src: harry0, dst: harry0, port: 80, expect: 'allow', hides: ['[CNP:Baseline]'] },
      ],
    });
  });
});

describe('AdminNetworkPolicy and BaselineAdminNetworkPolicy follow the same rule', () => {
  it('an AdminNetworkPolicy Deny applies to the Service hairpin only', async () => {
    await runCase({
      name: 'anp-hairpin',
      objects: [harryService, anp('deny-gryffindor', 10, subjectNamespace('gryffindor'), denyGryffindor)],
      probes: [
        { src: harry0, dst: harrySvc, port: 8000, expect: 'deny', egress: ['[ANP] Deny (deny-gryffindor, deny-to-gryffindor: '] },
        { src: harry0, dst: harry0, port: 80, expect: 'allow', hides: ['[ANP]'] },
      ],
    });
  });

  it('a BaselineAdminNetworkPolicy Deny applies to the Service hairpin only', async () => {
    await runCase({
      name: 'banp-hairpin',
      objects: [harryService, banp(subjectNamespace('gryffindor'), denyGryffindor)],
      probes: [
        { src: harry0, dst: harrySvc, port: 8000, expect: 'deny', egress: ['[BANP] Deny (default, deny-to-gryffindor: '] },
        { src: harry0, dst: harry0, port: 80, expect: 'allow', hides: ['[BANP]'] },
      ],
    });
  });
});

describe('NetworkPolicy v1 (hairpin implementation-defined upstream)', () => {
  it('judges a pod reaching itself like any pod-to-pod traffic, through a Service or not', async () => {
    const isolated = networkPolicy(gryffindor, 'only-from-slytherin', {
      podSelector: {},
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns('slytherin') } } }] }],
    });
    await runCase({
      name: 'np-hairpin',
      objects: [harryService, isolated],
      probes: [
        { src: harry0, dst: harrySvc, port: 8000, expect: 'deny', ingress: ['[NP] Deny'] },
        { src: harry0, dst: harry0, port: 80, expect: 'deny', ingress: ['[NP] Deny'] },
      ],
    });
  });
});
