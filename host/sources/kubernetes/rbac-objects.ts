// The identity every kube-wasm-policies workload runs as: a ServiceAccount,
// the ClusterRole of what it reads cluster-wide and the binding between them,
// plus, where a workload also needs objects of its own namespace, a Role and
// RoleBinding for the same account. The agent, the multicluster IP tracker and
// the fleet controller differ only in names and rules, so their install
// objects are built here once.
import type { V1ClusterRole, V1ClusterRoleBinding, V1PolicyRule, V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';

const RBAC = 'rbac.authorization.k8s.io/v1';
type Labels = Record<string, string>;

function accountSubject(name: string, namespace: string) {
  return [{ kind: 'ServiceAccount', name, namespace }];
}

/** ServiceAccount `name` in `namespace`, bound to a ClusterRole of the same name granting `rules`. */
export function clusterIdentity(name: string, namespace: string, labels: Labels, rules: V1PolicyRule[]): [V1ServiceAccount, V1ClusterRole, V1ClusterRoleBinding] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace, labels } },
    { apiVersion: RBAC, kind: 'ClusterRole', metadata: { name, labels }, rules },
    {
      apiVersion: RBAC, kind: 'ClusterRoleBinding', metadata: { name, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name }, subjects: accountSubject(name, namespace),
    },
  ];
}

/** Role `roleName` in `namespace` granting `rules`, bound to the ServiceAccount `account` of that namespace. */
export function namespaceGrant(roleName: string, account: string, namespace: string, labels: Labels, rules: V1PolicyRule[]): [V1Role, V1RoleBinding] {
  return [
    { apiVersion: RBAC, kind: 'Role', metadata: { name: roleName, namespace, labels }, rules },
    {
      apiVersion: RBAC, kind: 'RoleBinding', metadata: { name: roleName, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: roleName }, subjects: accountSubject(account, namespace),
    },
  ];
}
