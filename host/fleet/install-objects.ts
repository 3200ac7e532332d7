// The cluster-level admin API as install objects (`kwp manifests
// --fleet-controller`): one Deployment running `kwp agent --fleet` with no
// dataplane, its ServiceAccount and the RBAC of clusterFleetRules(), a Role
// for module ConfigMaps in its namespace, and a Service in front of its admin
// API. One replica with the Recreate strategy: the rollout controller has no
// leader election, so two must never run at once.
import type { V1ClusterRole, V1ClusterRoleBinding, V1Deployment, V1Role, V1RoleBinding, V1Service, V1ServiceAccount } from '@kubernetes/client-node';
import { clusterFleetRules } from './crds.js';
import { clusterIdentity, namespaceGrant } from '../sources/kubernetes/rbac-objects.js';

export const FLEET_CONTROLLER_NAME = 'kwp-fleet';
/** The Secret (key `token`) the operator creates with the admin token; the Deployment mounts it. */
export const FLEET_TOKEN_SECRET = 'kwp-fleet-admin-token';
export const FLEET_ADMIN_PORT = 9443;

export interface FleetControllerInstallOptions {
  namespace: string;
  image: string;
  /** `HOST[:PORT]/PREFIX` modules are pushed to; ConfigMaps in the namespace without it. */
  registry?: string;
  /** Builds each agent flag as the agent spells it (checked against the agent's flag list). */
  args: (values: Array<[string, string | boolean]>) => string[];
}

const labels = { 'app.kubernetes.io/name': FLEET_CONTROLLER_NAME, 'app.kubernetes.io/part-of': 'kube-wasm-policies' };

export function fleetControllerObjects(opts: FleetControllerInstallOptions): (V1ServiceAccount | V1ClusterRole | V1ClusterRoleBinding | V1Role | V1RoleBinding | V1Service | V1Deployment)[] {
  const ns = opts.namespace;
  const name = FLEET_CONTROLLER_NAME;
  const [serviceAccount, clusterRole, binding] = clusterIdentity(name, ns, labels, clusterFleetRules());
  // Without a registry, uploads become ConfigMaps here (the nodes' Role lets them read them); DELETE /v1/modules removes them.
  const [configMaps, configMapsBinding] = namespaceGrant(`${name}-modules`, name, ns, labels,
    [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'create', 'update', 'delete'] }]);
  const service: V1Service = {
    apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: ns, labels },
    spec: { selector: { 'app.kubernetes.io/name': name }, ports: [{ name: 'admin', port: FLEET_ADMIN_PORT, targetPort: FLEET_ADMIN_PORT, protocol: 'TCP' }] },
  };
  const probe = (path: string) => ({ httpGet: { path, port: FLEET_ADMIN_PORT, scheme: 'HTTP' } });
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name, namespace: ns, labels },
    spec: {
      replicas: 1,
      // Never two at once: the old pod is gone before the new one starts its rollout controller.
      strategy: { type: 'Recreate' },
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: name,
          containers: [{
            name: 'fleet',
            image: opts.image,
            imagePullPolicy: 'IfNotPresent',
            args: ['agent', ...opts.args([
              ['fleet', true],
              ['dataplane', 'off'],
              // Reached through the Service, so not loopback; changes still need the token.
              ['admin-address', `0.0.0.0:${FLEET_ADMIN_PORT}`],
              ['admin-token-file', '/etc/kwp-fleet/token'],
              ['state-dir', '/var/lib/kwp-fleet'],
              ['fleet-namespace', ns],
              ...(opts.registry ? [['registry', opts.registry] as [string, string]] : []),
            ])],
            securityContext: { privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
            resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
            livenessProbe: { ...probe('/healthz'), initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 2, failureThreshold: 6 },
            readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 3 },
            volumeMounts: [
              { name: 'token', mountPath: '/etc/kwp-fleet', readOnly: true },
              // Its module store: what it validated and pushed; the cluster objects are the record, so an emptyDir will do.
              { name: 'state', mountPath: '/var/lib/kwp-fleet' },
            ],
          }],
          volumes: [
            { name: 'token', secret: { secretName: FLEET_TOKEN_SECRET, items: [{ key: 'token', path: 'token' }] } },
            { name: 'state', emptyDir: {} },
          ],
        },
      },
    },
  };
  return [serviceAccount, clusterRole, binding, configMaps, configMapsBinding, service, deployment];
}
