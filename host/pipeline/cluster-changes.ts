// Test support for the differential walk tests: one random change to a
// generated cluster between rounds, applied to the cluster and its state.
import { Kinds, type KubeObject } from '../contract.js';
import { policyChange, type generateCluster } from '../../bench/generator.js';
import type { ClusterState } from '../state/cluster-state.js';

/** A pod relabelled, a NetworkPolicy added, a ClusterNetworkPolicy deleted. */
export function changeCluster(cluster: ReturnType<typeof generateCluster>, state: ClusterState, random: () => number, round: number): void {
  const at = Math.floor(random() * cluster.pods.length);
  const pod = cluster.pods[at];
  const relabelled: KubeObject = { ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, tier: ['web', 'api', 'db'][round % 3] } } };
  cluster.pods[at] = relabelled;
  state.apply(Kinds.Pod, { type: 'upsert', object: relabelled });
  state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policyChange(cluster, round) });
  if (cluster.clusterNetworkPolicies.length > 0) state.apply(Kinds.ClusterNetworkPolicy, { type: 'delete', object: cluster.clusterNetworkPolicies.pop()! });
}
