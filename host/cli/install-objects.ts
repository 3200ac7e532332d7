// The objects that install the agent on a cluster: a DaemonSet on every node,
// its ServiceAccount and read-only RBAC, and the pipeline as a ConfigMap. The
// RBAC rules come from the same kind list the informers watch, and every
// agent argument is checked against the agent's own flag list.

import { Document } from 'yaml';
// Types only: the object literals below get the API's excess-property checks, so a misspelled field fails to compile.
import type { V1ClusterRole, V1ClusterRoleBinding, V1ConfigMap, V1DaemonSet, V1HTTPGetAction, V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { clusterIdentity, namespaceGrant } from '../sources/kubernetes/rbac-objects.js';
import { defaultWatchedKinds, rbacRulesFor } from '../sources/kubernetes/resources.js';
import type { KindKey } from '../contract.js';
import { agentFlags, flagSpelling } from './agent-flags.js';
import { multiclusterAgentArgs, multiclusterObjects, type MulticlusterInstallOptions } from '../multicluster/install-objects.js';
import { fleetCrds, nodeFleetRules } from '../fleet/crds.js';
import { fleetControllerObjects } from '../fleet/install-objects.js';

export interface InstallOptions {
  namespace: string;
  image: string;
  /** The pipeline file's text, stored in the ConfigMap as-is. */
  pipelineYaml: string;
  failOpen: boolean;
  strict: boolean;
  /** HOST:PORT the admin API listens on in the host network namespace. */
  adminAddress: string;
  /** The agent's `--fast-path` (the kernel fast path, docs/dataplane.md). */
  fastPath: boolean;
  /** The agent's `--packet-thread-nice`; absent leaves the packet thread at the inherited priority. */
  packetThreadNice?: number;
  /** Kinds the agent watches; the ClusterRole grants exactly these. */
  kinds?: readonly KindKey[];
  /** The cluster-level admin API (kwp agent --fleet) as a Deployment, with the registry it pushes to (docs/fleet.md). */
  fleetController?: { registry?: string };
  /** Flat-network multicluster: the IP tracker objects, and the agent flags that read its records. */
  multicluster?: Omit<MulticlusterInstallOptions, 'namespace' | 'image'>;
}

export const AGENT_NAME = 'kwp-agent';
export const PIPELINE_CONFIGMAP = 'kwp-pipeline';
const PIPELINE_DIR = '/etc/kwp';
const STATE_DIR = '/var/lib/kwp';
const labels = { 'app.kubernetes.io/name': AGENT_NAME, 'app.kubernetes.io/part-of': 'kube-wasm-policies' };

/** Splits HOST:PORT (IPv6 in brackets); throws a plain Error naming the value. */
export function parseHostPort(address: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]*)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) throw new Error(`"${address}" is not HOST:PORT (e.g. 127.0.0.1:9443 or [::1]:9443)`);
  return { host: m[1] ?? m[2] ?? '', port };
}

/**
 * The kubelet probes a hostNetwork pod from the node's own network namespace,
 * so an admin API bound to loopback is reachable at 127.0.0.1. A wildcard bind
 * is probed on loopback too; a specific address is probed there.
 */
function probeTarget(adminAddress: string): { host: string; port: number } {
  const { host, port } = parseHostPort(adminAddress);
  if (host === '' || host === '0.0.0.0' || host === '127.0.0.1' || host === 'localhost') return { host: '127.0.0.1', port };
  if (host === '::' || host === '::1') return { host: '::1', port };
  return { host, port };
}

/** The agent's command-line, every flag spelled `--name=value`. */
export function agentArgs(opts: InstallOptions): string[] {
  const values: [string, string | boolean][] = [
    ['node-name', '$(NODE_NAME)'],
    ['pipeline', `${PIPELINE_DIR}/pipeline.yaml`],
    ['fail-open', opts.failOpen],
    ['strict', opts.strict],
    ['fast-path', opts.fastPath],
    ['admin-address', opts.adminAddress],
    ['state-dir', STATE_DIR],
    ['dataplane', 'on'],
    ['fleet-namespace', opts.namespace],
    ...(opts.packetThreadNice !== undefined ? [['packet-thread-nice', String(opts.packetThreadNice)] as [string, string]] : []),
    ...(opts.multicluster ? multiclusterAgentArgs({ namespace: opts.namespace, image: opts.image, ...opts.multicluster }) : []),
  ];
  return spellAgentFlags(values);
}

/** Each flag as the agent spells it; a name the agent does not know is a bug here. */
function spellAgentFlags(values: Array<[string, string | boolean]>): string[] {
  return values.map(([name, value]) => {
    if (!agentFlags.some((f) => f.name === name)) throw new Error(`internal: "${name}" is not an agent flag`);
    return `${flagSpelling(name)}=${value}`;
  });
}

export function installObjects(opts: InstallOptions): (V1ServiceAccount | V1ClusterRole | V1ClusterRoleBinding | V1Role | V1RoleBinding | V1ConfigMap | V1DaemonSet | ReturnType<typeof fleetCrds>[number] | ReturnType<typeof multiclusterObjects>[number] | ReturnType<typeof fleetControllerObjects>[number])[] {
  const ns = opts.namespace;
  const probe = probeTarget(opts.adminAddress);
  const httpGet = (path: string): V1HTTPGetAction => ({ host: probe.host, port: probe.port, path, scheme: 'HTTP' });
  // The policy kinds the informers watch, the node's own Node object (a Pipeline's target), and the fleet's kinds (docs/fleet.md).
  const [serviceAccount, clusterRole, binding] = clusterIdentity(AGENT_NAME, ns, labels,
    [...rbacRulesFor(opts.kinds ?? defaultWatchedKinds), { apiGroups: [''], resources: ['nodes'], verbs: ['get'] }, ...nodeFleetRules()]);
  // Small modules travel in ConfigMaps (or Secrets) of this namespace only: the agent reads nothing of the kind elsewhere.
  const [moduleReader, moduleReaderBinding] = namespaceGrant(`${AGENT_NAME}-modules`, AGENT_NAME, ns, labels,
    [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['get'] }]);
  const configMap: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: PIPELINE_CONFIGMAP, namespace: ns, labels },
    data: { 'pipeline.yaml': opts.pipelineYaml },
  };
  const daemonSet: V1DaemonSet = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: AGENT_NAME, namespace: ns, labels },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': AGENT_NAME } },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: AGENT_NAME,
          // The agent filters the node's own traffic, so it lives in the node's network namespace.
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          priorityClassName: 'system-node-critical',
          // Every node needs enforcement, whatever its taints.
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 30,
          containers: [
            {
              name: 'agent',
              image: opts.image,
              imagePullPolicy: 'IfNotPresent',
              args: ['agent', ...agentArgs(opts)],
              env: [{ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
              securityContext: {
                // NET_ADMIN: nftables/iptables rules, NFQUEUE and conntrack; NET_RAW: iptables' raw sockets;
                // SYS_NICE only to raise the packet thread (a negative nice), which root alone may not do in a
                // container. No more.
                privileged: false,
                capabilities: { add: ['NET_ADMIN', 'NET_RAW', ...((opts.packetThreadNice ?? 0) < 0 ? ['SYS_NICE'] : [])] },
              },
              resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
              livenessProbe: { httpGet: httpGet('/healthz'), initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 2, failureThreshold: 6 },
              readinessProbe: { httpGet: httpGet('/readyz'), periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 3 },
              volumeMounts: [
                { name: 'pipeline', mountPath: PIPELINE_DIR, readOnly: true },
                { name: 'state', mountPath: STATE_DIR },
                // Shared with kube-proxy and every other iptables user on the node.
                { name: 'xtables-lock', mountPath: '/run/xtables.lock' },
              ],
            },
          ],
          volumes: [
            { name: 'pipeline', configMap: { name: PIPELINE_CONFIGMAP } },
            { name: 'state', hostPath: { path: STATE_DIR, type: 'DirectoryOrCreate' } },
            { name: 'xtables-lock', hostPath: { path: '/run/xtables.lock', type: 'FileOrCreate' } },
          ],
        },
      },
    },
  };
  const tracker = opts.multicluster ? multiclusterObjects({ namespace: ns, image: opts.image, ...opts.multicluster }) : [];
  const fleet = opts.fleetController ? fleetControllerObjects({ namespace: ns, image: opts.image, ...opts.fleetController, args: spellAgentFlags }) : [];
  return [...fleetCrds(), serviceAccount, clusterRole, binding, moduleReader, moduleReaderBinding, configMap, daemonSet, ...tracker, ...fleet];
}

/** The install YAML: a comment header, then one document per object. */
export function renderInstallYaml(opts: InstallOptions, header: string): string {
  const docs = installObjects(opts).map((o) => {
    // Plain YAML for humans and for kubectl: no anchors where objects repeat.
    const doc = new Document(o, { aliasDuplicateObjects: false });
    return doc.toString({ lineWidth: 0 });
  });
  const comment = header
    .split('\n')
    .map((l) => (l ? `# ${l}` : '#'))
    .join('\n');
  return `${comment}\n---\n${docs.join('---\n')}`;
}
