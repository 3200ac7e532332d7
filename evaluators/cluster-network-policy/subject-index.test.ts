// The tiered evaluators' subject index (evaluators/cluster-common/subject-index.ts:
// which policies can select a pod, from the pod's labels and its namespace's)
// against the unindexed evaluation of the same module (`ruleIndex: false`,
// which matches every policy's subject against every pod):
// test/netpol/rule-index-differential.ts. Subjects of every shape the index
// files differently — empty, matchLabels, In (a value twice), Exists, only
// NotIn/DoesNotExist, values nobody carries, invalid — through pod and
// namespace relabels (a pod's candidates change with its labels), policy churn
// and relists.
import { describe, it } from 'vitest';
import type { ModuleHarness } from '../../test/fixtures/abi-harness.js';
import { RANDOM_NODES, RANDOM_RESOLVED_NAMES, randomClusterNetworkPolicy } from '../../test/netpol/random-cluster.js';
import { differential, expectSubjectChurnCovered } from '../../test/netpol/rule-index-differential.js';

const otherKinds = (h: ModuleHarness) => {
  h.snapshot(RANDOM_NODES, 1);
  h.snapshot(RANDOM_RESOLVED_NAMES, 2);
};

describe('the ClusterNetworkPolicy subject index', () => {
  it.each(['Admin', 'Baseline'] as const)('selects for every pod of the %s tier the policies the unindexed evaluation selects, through relabels and policy churn', async (tier) => {
    const run = await differential({
      module: 'cluster-network-policy', config: { tier }, otherKinds,
      policy: (random, name) => randomClusterNetworkPolicy(random, name, tier, 'subjects'),
    }, tier === 'Admin' ? 40 : 41, 160, 32);
    expectSubjectChurnCovered(run);
  }, 120_000);
});
