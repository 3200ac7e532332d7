// The subject index (evaluators/cluster-common/subject-index.ts) in the
// admin-network-policy module: AdminNetworkPolicies (v1alpha1, v0.1.7 shape)
// with subjects of every shape the index files differently, against the
// unindexed evaluation of the same module (`ruleIndex: false`), through pod and
// namespace relabels, policy churn and relists
// (test/netpol/rule-index-differential.ts).
import { describe, it } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import type { ModuleHarness } from '../../test/fixtures/abi-harness.js';
import { RANDOM_NODES, pick, randomSubjectSelector, type Random } from '../../test/netpol/random-cluster.js';
import { differential, expectSubjectChurnCovered } from '../../test/netpol/rule-index-differential.js';

const KIND_BANP = 1;
const KIND_NODE = 2;
const KIND_RESOLVED_NAME = 3;

const otherKinds = (h: ModuleHarness) => {
  h.snapshot([], KIND_BANP);
  h.snapshot(RANDOM_NODES, KIND_NODE);
  h.snapshot([], KIND_RESOLVED_NAME);
};

function peer(random: Random, egress: boolean): Record<string, unknown> {
  const roll = random();
  if (roll < 0.4) return { namespaces: randomSubjectSelector(random, 'namespace') };
  if (roll < 0.8) return { pods: { namespaceSelector: randomSubjectSelector(random, 'namespace'), podSelector: randomSubjectSelector(random, 'pod') } };
  return egress ? { networks: [pick(random, ['10.1.0.0/24', '10.1.0.8/29', '192.168.0.0/16'])] } : { namespaces: {} };
}

function rule(random: Random, egress: boolean, i: number): Record<string, unknown> {
  const r: Record<string, unknown> = {
    name: `${egress ? 'e' : 'i'}${i}`, action: pick(random, ['Allow', 'Deny', 'Pass']),
    [egress ? 'to' : 'from']: Array.from({ length: 1 + Math.floor(random() * 2) }, () => peer(random, egress)),
  };
  if (random() < 0.6) r.ports = [pick(random, [{ portNumber: { protocol: 'TCP', port: 80 } }, { portNumber: { protocol: 'UDP', port: 53 } }, { namedPort: 'http' }, { portRange: { protocol: 'TCP', start: 1000, end: 2000 } }])];
  return r;
}

function randomAdminNetworkPolicy(random: Random, name: string): KubeObject {
  const subject = random() < 0.5
    ? { namespaces: randomSubjectSelector(random, 'namespace') }
    : { pods: { namespaceSelector: randomSubjectSelector(random, 'namespace'), podSelector: randomSubjectSelector(random, 'pod') } };
  const spec: Record<string, unknown> = { priority: Math.floor(random() * 12), subject };
  if (random() < 0.8) spec.ingress = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => rule(random, false, i));
  if (random() < 0.7) spec.egress = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => rule(random, true, i));
  return { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name }, spec };
}

describe('the AdminNetworkPolicy subject index', () => {
  it('selects for every pod the AdminNetworkPolicies the unindexed evaluation selects, through relabels and policy churn', async () => {
    const run = await differential({
      module: 'admin-network-policy', config: { tier: 'Admin' }, otherKinds, policy: randomAdminNetworkPolicy,
    }, 50, 160, 32);
    expectSubjectChurnCovered(run);
  }, 120_000);
});
