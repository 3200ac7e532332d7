// The NetworkPolicy rule index (sdk/port-index.ts, sdk/networkpolicy/rule-index.ts,
// the selector memo) against the unindexed evaluation of the same module
// (`ruleIndex: false`): test/netpol/rule-index-differential.ts.
import { describe, it, expect } from 'vitest';
import { ModuleHarness } from '../../test/fixtures/abi-harness.js';
import { randomNetworkPolicy } from '../../test/netpol/random-cluster.js';
import { builtWasm, differential } from '../../test/netpol/rule-index-differential.js';

const ALL_CHANGES = ['namespace relabel', 'pod relabel', 'policy added', 'policy changed', 'policy deleted', 'relist'];

describe('the NetworkPolicy rule index', () => {
  it('answers every record as the unindexed evaluation does, through relabels and policy churn', async () => {
    const run = await differential({ module: 'network-policy', policy: randomNetworkPolicy }, 20, 150, 32);
    // Both outcomes and every kind of change occurred, so the comparison covers them.
    expect(run.accepted).toBeGreaterThan(run.compared / 20);
    expect(run.denied).toBeGreaterThan(run.compared / 20);
    expect(Object.keys(run.changes).sort()).toEqual(ALL_CHANGES);
  }, 120_000);

  it('answers as the unindexed evaluation in the multicluster module that shares the code', async () => {
    // Pods of three clusters; a third of the policies are cluster-local (remote pods are plain addresses to them).
    const run = await differential({
      module: 'multicluster-network-policy', config: { clusterId: 'east' }, clusterIds: ['east', 'east', 'west', 'north'],
      policy: (random, name) => {
        const p = randomNetworkPolicy(random, name);
        if (random() < 0.35) p.metadata.annotations = { 'multicluster.kube-wasm-policies.io/scope': 'cluster-local' };
        return p;
      },
    }, 21, 60, 32);
    expect(run.accepted).toBeGreaterThan(run.compared / 20);
  }, 120_000);

  it('refuses a ruleIndex that is not true or false', async () => {
    await expect(ModuleHarness.load(builtWasm('network-policy'), { ruleIndex: 'off' })).rejects.toThrow('config.ruleIndex must be true or false');
  });
});
