// Standard Kubernetes kinds that a manifest directory may well hold (it is
// often the one that deploys the application) but that no evaluator reads:
// they are skipped with a warning instead of refused, as kubectl would know
// them. Their names still count for "did you mean".

const UNREAD: Record<string, string[]> = {
  v1: ['ConfigMap', 'Secret', 'ServiceAccount', 'Endpoints', 'PersistentVolumeClaim', 'PersistentVolume', 'ReplicationController', 'LimitRange', 'ResourceQuota', 'Event'],
  'apps/v1': ['Deployment', 'DaemonSet', 'StatefulSet', 'ReplicaSet', 'ControllerRevision'],
  'batch/v1': ['Job', 'CronJob'],
  'rbac.authorization.k8s.io/v1': ['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'],
  'networking.k8s.io/v1': ['Ingress', 'IngressClass'],
  'policy/v1': ['PodDisruptionBudget'],
  'autoscaling/v2': ['HorizontalPodAutoscaler'],
  'scheduling.k8s.io/v1': ['PriorityClass'],
  'admissionregistration.k8s.io/v1': ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration'],
  'apiextensions.k8s.io/v1': ['CustomResourceDefinition'],
};

export const UNREAD_KINDS: ReadonlySet<string> = new Set(Object.entries(UNREAD).flatMap(([v, kinds]) => kinds.map((k) => `${v}/${k}`)));

/** Why a kind is skipped, for the warning; a workload's pods are what kwp needs. */
export function unreadReason(kind: string): string {
  return ['Deployment', 'DaemonSet', 'StatefulSet', 'ReplicaSet', 'Job', 'CronJob', 'ReplicationController'].includes(kind)
    ? 'kwp reads the pods a workload runs, not the workload: list those Pods (with status.podIPs) to evaluate traffic to them'
    : 'no evaluator reads it';
}
