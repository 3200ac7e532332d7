// Which workload a pod belongs to, as a policy can select it: its labels
// without the ones that tell replicas apart (a ReplicaSet's
// pod-template-hash, a StatefulSet pod's name or index, a Job's controller
// uid), narrowed to app-style labels when those alone still pick exactly the
// workload's pods. Policies written by `kwp recommend` select with these.
import type { PodInfo } from '../contract.js';

/** Labels controllers set per pod or per revision: selecting by them would pin a policy to one replica or one rollout. */
export const POD_SPECIFIC_LABELS: readonly string[] = [
  'pod-template-hash',
  'controller-revision-hash',
  'pod-template-generation',
  'statefulset.kubernetes.io/pod-name',
  'apps.kubernetes.io/pod-index',
  'batch.kubernetes.io/controller-uid',
  'controller-uid',
  'batch.kubernetes.io/job-completion-index',
];

/** Labels that name an application, the usual way policies select: preferred when they alone are precise. */
export const APPLICATION_LABELS: readonly string[] = [
  'app.kubernetes.io/name',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/component',
  'app',
  'k8s-app',
  'component',
];

export interface Workload {
  namespace: string;
  /** A name for messages and for the policies written for it. */
  name: string;
  /** The labels a selector matches it by. */
  selector: Record<string, string>;
  /**
   * Labels its pods lack and a sibling workload's pods carry (a canary's
   * `track`): the selector requires them absent, since the labels alone
   * would pick the sibling too. Sorted; empty for most workloads.
   */
  absent: string[];
  /** The known pods it stands for. */
  pods: PodInfo[];
}

function stableLabels(pod: PodInfo): Record<string, string> {
  return Object.fromEntries(Object.entries(pod.podLabels).filter(([k]) => !POD_SPECIFIC_LABELS.includes(k)));
}

function selects(selector: Record<string, string>, pod: PodInfo): boolean {
  return Object.entries(selector).every(([k, v]) => pod.podLabels[k] === v);
}

function canonical(labels: Record<string, string>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The replica suffixes Deployments (-<hash>-<id>), StatefulSets (-N) and Jobs add to a pod's name. */
function baseName(pod: PodInfo): string {
  return pod.name.replace(/-[a-z0-9]{8,10}-[a-z0-9]{5}$/, '').replace(/-[a-z0-9]{5}$/, '').replace(/-\d+$/, '');
}

/**
 * Groups known pods into workloads: pods of one namespace with the same
 * stable labels. A pod without any stable label has no workload (a selector
 * could not tell it from its neighbours) and is left out.
 */
export class WorkloadIndex {
  private readonly byPod = new Map<number, Workload>();
  /** Pods with no label a policy could select them by. */
  readonly unlabelled: PodInfo[] = [];

  constructor(pods: Iterable<PodInfo>) {
    const all = [...pods].filter((p) => !p.hostNetwork);
    const groups = new Map<string, PodInfo[]>();
    for (const pod of all) {
      const labels = stableLabels(pod);
      if (Object.keys(labels).length === 0) { this.unlabelled.push(pod); continue; }
      const key = `${pod.namespace} ${canonical(labels)}`;
      const group = groups.get(key) ?? [];
      group.push(pod);
      groups.set(key, group);
    }
    const names = new Set<string>();
    for (const group of groups.values()) {
      const first = group[0];
      const stable = stableLabels(first);
      const neighbours = all.filter((p) => p.namespace === first.namespace);
      const preferred = Object.fromEntries(Object.entries(stable).filter(([k]) => APPLICATION_LABELS.includes(k)));
      // The app labels alone when they pick exactly this group among the namespace's pods; all stable labels otherwise.
      const exact = Object.keys(preferred).length > 0 && neighbours.filter((p) => selects(preferred, p)).every((p) => group.includes(p));
      const selector = exact ? preferred : stable;
      // Pods of other workloads the labels still pick carry every label of this one and more; one of theirs, required absent, leaves them out.
      const absent = new Set<string>();
      for (const p of neighbours) {
        if (group.includes(p) || !selects(selector, p)) continue;
        const extra = Object.keys(stableLabels(p)).filter((k) => !(k in stable)).sort();
        if (extra.length) absent.add(extra[0]);
      }
      const named = preferred['app.kubernetes.io/name'] ?? preferred.app ?? preferred['k8s-app'] ?? baseName(first);
      let name = named;
      for (let i = 2; names.has(`${first.namespace}/${name}`); i++) name = `${named}-${i}`;
      names.add(`${first.namespace}/${name}`);
      const workload: Workload = { namespace: first.namespace, name, selector, absent: [...absent].sort(), pods: group };
      for (const pod of group) this.byPod.set(pod.id, workload);
    }
  }

  of(pod: PodInfo): Workload | undefined {
    return this.byPod.get(pod.id);
  }
}
