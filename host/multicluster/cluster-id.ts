// A cluster's id in the cluster set when the operator does not name it: the
// uid of its kube-system namespace, as SIG-Multicluster's ClusterProperty
// suggests. The agent and the IP tracker must agree on it, so both derive it
// the same way.

import type { KubeConfig } from '@kubernetes/client-node';
import { KwpError } from '../errors.js';

export async function kubeSystemUid(kubeConfig: KubeConfig, where: string): Promise<string> {
  const server = kubeConfig.getCurrentCluster()?.server ?? '(no server)';
  let uid: string | undefined;
  try {
    // A list narrowed to one name needs only the list permission every agent already has.
    // The generated API only when asked (it is most of the client's memory; host/sources/kubernetes/narrow-client.ts).
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const list = await kubeConfig.makeApiClient(CoreV1Api).listNamespace({ fieldSelector: 'metadata.name=kube-system' });
    uid = list.items[0]?.metadata?.uid;
  } catch (err) {
    throw new KwpError('KWP_ERR_KUBECONFIG', `${where}: cannot read the kube-system namespace of ${server} to derive the cluster id (${(err as Error).message}); pass --cluster-id or grant "list" on namespaces`, { cause: err });
  }
  if (!uid) throw new KwpError('KWP_ERR_KUBECONFIG', `${where}: ${server} has no kube-system namespace with a uid to derive the cluster id from; pass --cluster-id`);
  return uid;
}
