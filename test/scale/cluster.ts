// The cluster of the scale suites, shared by the test and the API-server
// emulator it runs in a child process (cluster-server.ts): the bench
// generator's 1,000 namespaces, 20,000 pods and 100,000 NetworkPolicies, and
// the relabelling both sides apply.
import { generateCluster, clusterObjects } from '../../bench/generator.js';
import type { KubeObject } from '../../host/contract.js';

export const SCALE_SHAPE = { name: 'cluster-scale', namespaces: 1000, pods: 20_000, networkPolicies: 100_000, clusterNetworkPolicies: 0 };

/** Every object of the cluster, namespaces first. */
export function scaleObjects(): KubeObject[] {
  return clusterObjects(generateCluster(SCALE_SHAPE, 7)).flatMap(([, list]) => list);
}

/** A pod with its `app` label moved to the next app (app-3 becomes app-4, app-9 app-0): other policies select it. */
export function relabelled(pod: KubeObject): KubeObject {
  const app = Number(/\d+$/.exec(pod.metadata.labels!.app)![0]);
  return { ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, app: `app-${(app + 1) % 10}` } } };
}
