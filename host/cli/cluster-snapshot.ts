// `kwp eval --kubeconfig`: the objects of a live cluster, listed once by the
// same informers the agent runs, then the watches are closed. The API server
// has validated them already, so they skip the manifest checks.
import type { KindKey, KubeObject, ObjectSink } from '../contract.js';
import { KwpError } from '../errors.js';
import { KubernetesSource } from '../sources/kubernetes.js';

/** Lists every kind the evaluators read; KWP_ERR_KUBECONFIG when the cluster cannot be listed in time. */
export async function clusterSnapshot(kubeconfig: string, timeoutMs: number): Promise<KubeObject[]> {
  const byKind = new Map<KindKey, KubeObject[]>();
  const sink: ObjectSink = {
    replace: (kind, objects) => { byKind.set(kind, [...objects]); },
    apply: () => {}, // a snapshot: changes after the first list are not wanted
  };
  const source = new KubernetesSource({ kubeconfig, backoff: { initialMs: 200, maxMs: 1000 } });
  await source.start(sink);
  try {
    if (!(await source.waitUntilReady(timeoutMs))) {
      const lagging = source.status().filter((s) => !s.synced).map((s) => s.kind);
      throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${kubeconfig}: the API server did not list ${lagging.join(', ') || 'every kind'} within ${timeoutMs / 1000} s; check that the cluster is reachable and the credentials may list them`);
    }
  } finally {
    await source.stop();
  }
  return [...byKind.values()].flat();
}
