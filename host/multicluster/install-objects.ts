// What `kwp manifests --multicluster` adds to the install: the IP tracker
// Deployment, its ServiceAccount and read-only RBAC over the local cluster, and
// the Secret whose keys are the kubeconfig files of every cluster of the set
// (the tracker reads it as a directory, so adding a cluster is a Secret edit).

import type { V1ClusterRole, V1ClusterRoleBinding, V1Deployment, V1Secret, V1ServiceAccount } from '@kubernetes/client-node';
import { Kinds } from '../contract.js';
import { rbacRulesFor } from '../sources/kubernetes/resources.js';
import { clusterIdentity } from '../sources/kubernetes/rbac-objects.js';

export interface MulticlusterInstallOptions {
  namespace: string;
  image: string;
  /** etcd client URL(s), comma-separated, as both the tracker and the agents reach them. */
  etcd: string;
  /** This cluster's id; the agents derive the kube-system uid when absent. */
  clusterId?: string;
  /** Tracker replicas; they publish the same keys harmlessly. */
  replicas?: number;
  /** `CONTEXT=ID` per cluster of the kubeconfig Secret, passed to the tracker as `--cluster-id`. */
  trackerClusterIds?: string[];
}

export const TRACKER_NAME = 'kwp-ip-tracker';
export const CLUSTERS_SECRET = 'kwp-clusters';
const CLUSTERS_DIR = '/etc/kwp/clusters';
const labels = { 'app.kubernetes.io/name': TRACKER_NAME, 'app.kubernetes.io/part-of': 'kube-wasm-policies' };

/** The agent flags multicluster mode adds to the DaemonSet. */
export function multiclusterAgentArgs(opts: MulticlusterInstallOptions): [string, string][] {
  const args: [string, string][] = [['ip-tracker-etcd', opts.etcd]];
  if (opts.clusterId) args.push(['cluster-id', opts.clusterId]);
  return args;
}

export function trackerArgs(opts: MulticlusterInstallOptions): string[] {
  return ['ip-tracker', `--kubeconfig-dir=${CLUSTERS_DIR}`, `--etcd=${opts.etcd}`, ...(opts.trackerClusterIds ?? []).map((id) => `--cluster-id=${id}`)];
}

export function multiclusterObjects(opts: MulticlusterInstallOptions): (V1ServiceAccount | V1ClusterRole | V1ClusterRoleBinding | V1Secret | V1Deployment)[] {
  const ns = opts.namespace;
  // What a remote tracker needs of this cluster, too: its kubeconfig for this
  // cluster should use a ServiceAccount bound to this role.
  const [serviceAccount, clusterRole, binding] = clusterIdentity(TRACKER_NAME, ns, labels, rbacRulesFor([Kinds.Pod, Kinds.Namespace, Kinds.Node]));
  // Empty on purpose: fill it with one kubeconfig per cluster (docs/multicluster.md);
  // re-applying these manifests leaves keys added since in place.
  const secret: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: CLUSTERS_SECRET, namespace: ns, labels },
    type: 'Opaque',
  };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: TRACKER_NAME, namespace: ns, labels },
    spec: {
      replicas: opts.replicas ?? 2,
      selector: { matchLabels: { 'app.kubernetes.io/name': TRACKER_NAME } },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: TRACKER_NAME,
          containers: [
            {
              name: 'ip-tracker',
              image: opts.image,
              imagePullPolicy: 'IfNotPresent',
              args: trackerArgs(opts),
              securityContext: { runAsNonRoot: true, runAsUser: 65532, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              resources: { requests: { cpu: '50m', memory: '96Mi' }, limits: { memory: '384Mi' } },
              volumeMounts: [{ name: 'clusters', mountPath: CLUSTERS_DIR, readOnly: true }],
            },
          ],
          volumes: [{ name: 'clusters', secret: { secretName: CLUSTERS_SECRET, optional: true } }],
        },
      },
    },
  };
  return [serviceAccount, clusterRole, binding, secret, deployment];
}
