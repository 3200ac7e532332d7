// The tiered evaluators' rule index (evaluators/cluster-common/rule-index.ts
// over sdk/port-index.ts, the selector memo) against the unindexed evaluation
// of the same module (`ruleIndex: false`): test/netpol/rule-index-differential.ts.
// Random ClusterNetworkPolicies of both tiers with tied priorities, Pass and
// fail-closed rules, nodes, networks and domainNames peers.
import { describe, it, expect } from 'vitest';
import type { ModuleHarness } from '../../test/fixtures/abi-harness.js';
import { RANDOM_NODES, RANDOM_RESOLVED_NAMES, randomClusterNetworkPolicy } from '../../test/netpol/random-cluster.js';
import { differential } from '../../test/netpol/rule-index-differential.js';

const KIND_NODE = 1;
const KIND_RESOLVED_NAME = 2;
const otherKinds = (h: ModuleHarness) => {
  h.snapshot(RANDOM_NODES, KIND_NODE);
  h.snapshot(RANDOM_RESOLVED_NAMES, KIND_RESOLVED_NAME);
};

describe('the ClusterNetworkPolicy rule index', () => {
  it.each(['Admin', 'Baseline'] as const)('answers every record of the %s tier as the unindexed evaluation does, through relabels and policy churn', async (tier) => {
    const run = await differential({
      module: 'cluster-network-policy', config: { tier }, otherKinds,
      policy: (random, name) => randomClusterNetworkPolicy(random, name, tier),
    }, tier === 'Admin' ? 30 : 31, 120, 32);
    expect(run.accepted).toBeGreaterThan(run.compared / 50);
    expect(run.denied).toBeGreaterThan(run.compared / 50);
    expect(Object.keys(run.changes)).toHaveLength(6);
  }, 120_000);
});
