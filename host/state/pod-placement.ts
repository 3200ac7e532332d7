// Which pods live in a namespace and on a node, by object key: a Namespace's
// or a Node's labels changing re-derives exactly those pods' PodInfo.

import type { KubeObject } from '../contract.js';

export class PodPlacement {
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly byNode = new Map<string, Set<string>>();

  /** Files `key` under the pod's namespace and node (when scheduled). */
  add(key: string, pod: KubeObject): void {
    addTo(this.byNamespace, pod.metadata.namespace ?? 'default', key);
    const node = pod.spec?.nodeName;
    if (typeof node === 'string' && node) addTo(this.byNode, node, key);
  }

  /** Undoes add(key, pod) for the same object. */
  remove(key: string, pod: KubeObject): void {
    removeFrom(this.byNamespace, pod.metadata.namespace ?? 'default', key);
    const node = pod.spec?.nodeName;
    if (typeof node === 'string' && node) removeFrom(this.byNode, node, key);
  }

  inNamespace(namespace: string): ReadonlySet<string> | undefined {
    return this.byNamespace.get(namespace);
  }

  onNode(node: string): ReadonlySet<string> | undefined {
    return this.byNode.get(node);
  }
}

function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}
