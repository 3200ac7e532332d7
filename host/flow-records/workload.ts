// Which workload a pod belongs to, for aggregating flow records the way
// operators think of traffic (Calico's flow logs aggregate by the same): the
// pod's controller, found through its ownerReferences. A ReplicaSet made by
// a Deployment is named after it plus the pod-template-hash label, so the
// Deployment's name is the ReplicaSet's without that suffix; a Job made by a
// CronJob is not resolved further (its name has a schedule suffix that no
// label records).
import type { KubeObject } from '../contract.js';

interface OwnerReference { kind?: unknown; name?: unknown; controller?: unknown }

/** `namespace/Kind/name` of the pod's controller, or `namespace/Pod/name` for a bare pod. */
export function workloadOf(pod: KubeObject): string {
  const ns = pod.metadata.namespace ?? '';
  const refs = Array.isArray(pod.metadata.ownerReferences) ? (pod.metadata.ownerReferences as OwnerReference[]) : [];
  const owner = refs.find((r) => r && r.controller === true) ?? refs[0];
  if (!owner || typeof owner.kind !== 'string' || typeof owner.name !== 'string') return `${ns}/Pod/${pod.metadata.name}`;
  if (owner.kind === 'ReplicaSet') {
    const hash = pod.metadata.labels?.['pod-template-hash'];
    if (hash && owner.name.endsWith(`-${hash}`)) return `${ns}/Deployment/${owner.name.slice(0, -hash.length - 1)}`;
  }
  return `${ns}/${owner.kind}/${owner.name}`;
}
