import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { isKwpError } from '../../host/errors.js';
import { renderManifests } from '../../host/cli/install-yaml-command.js';
import { parseAgentFlags } from '../../host/cli/agent.js';
import { parseIpTrackerFlags } from '../../host/cli/ip-tracker.js';
import { parsePipelineText } from '../../host/pipeline/spec.js';

function objects(argv: string[]): any[] {
  const docs = parseAllDocuments(renderManifests(argv));
  for (const d of docs) expect(d.errors).toEqual([]);
  return docs.map((d) => d.toJS()).filter(Boolean);
}

const find = (objs: any[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);

describe('kwp manifests --multicluster', () => {
  it('adds the tracker Deployment, its ServiceAccount, read-only RBAC and the kubeconfig Secret', () => {
    const objs = objects(['--multicluster', '--namespace', 'kwp-system']);
    const deployment = find(objs, 'Deployment', 'kwp-ip-tracker');
    expect(deployment.metadata.namespace).toBe('kwp-system');
    expect(deployment.spec.replicas).toBeGreaterThan(1);
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe('kwp-ip-tracker');
    expect(pod.volumes).toEqual([{ name: 'clusters', secret: { secretName: 'kwp-clusters', optional: true } }]);
    expect(find(objs, 'Secret', 'kwp-clusters').metadata.namespace).toBe('kwp-system');
    expect(find(objs, 'ServiceAccount', 'kwp-ip-tracker')).toBeDefined();
    const role = find(objs, 'ClusterRole', 'kwp-ip-tracker');
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['namespaces', 'nodes', 'pods'], verbs: ['list', 'watch'] }]);
    expect(find(objs, 'ClusterRoleBinding', 'kwp-ip-tracker').subjects).toEqual([{ kind: 'ServiceAccount', name: 'kwp-ip-tracker', namespace: 'kwp-system' }]);
  });

  it('gives the tracker arguments its own parser accepts, pointing at the same etcd as the agents', () => {
    const objs = objects(['--multicluster', '--etcd', 'http://etcd.example:2379', '--cluster-id', 'east', '--tracker-cluster-id', 'east=east', '--tracker-cluster-id', 'west=west']);
    const [command, ...trackerArgs] = find(objs, 'Deployment', 'kwp-ip-tracker').spec.template.spec.containers[0].args;
    expect(command).toBe('ip-tracker');
    const tracker = parseIpTrackerFlags(trackerArgs);
    expect(tracker).toMatchObject({ help: false, endpoints: ['http://etcd.example:2379'], kubeconfigDir: '/etc/kwp/clusters' });
    if (!tracker.help) expect([...tracker.clusterIds]).toEqual([['east', 'east'], ['west', 'west']]);
    const [, ...agentArgs] = find(objs, 'DaemonSet', 'kwp-agent').spec.template.spec.containers[0].args;
    const agent = parseAgentFlags(agentArgs);
    expect(agent['ip-tracker-etcd']).toBe('http://etcd.example:2379');
    expect(agent['cluster-id']).toBe('east');
  });

  it('ships a pipeline whose NetworkPolicy stage is the multicluster one', () => {
    const withId = parsePipelineText(find(objects(['--multicluster', '--cluster-id', 'east']), 'ConfigMap', 'kwp-pipeline').data['pipeline.yaml'], 'configmap');
    expect(withId.stages.find((s) => s.name === 'np')).toMatchObject({ module: 'multicluster-network-policy', config: { clusterId: 'east' } });
    // Without an id the agent fills in its own (the kube-system uid) at start.
    const withoutId = parsePipelineText(find(objects(['--multicluster']), 'ConfigMap', 'kwp-pipeline').data['pipeline.yaml'], 'configmap');
    expect(withoutId.stages.find((s) => s.name === 'np')).toMatchObject({ module: 'multicluster-network-policy', config: {} });
  });

  it('leaves the single-cluster install as it was', () => {
    const objs = objects([]);
    expect(objs.map((o) => o.kind)).not.toContain('Deployment');
    expect(objs.map((o) => o.kind)).not.toContain('Secret');
    expect(find(objs, 'DaemonSet', 'kwp-agent').spec.template.spec.containers[0].args.join(' ')).not.toContain('ip-tracker');
  });

  it.each([
    [['--etcd', 'http://e:2379'], /only apply with --multicluster/],
    [['--multicluster', '--etcd', 'e:2379'], /must start with http/],
    [['--multicluster', '--tracker-cluster-id', 'east'], /must be CONTEXT=ID/],
    [['--tracker-cluster-id', 'east=east'], /only apply with --multicluster/],
  ])('refuses %j with a usage error', (argv, message) => {
    let caught: unknown;
    try {
      renderManifests(argv);
    } catch (err) {
      caught = err;
    }
    expect(isKwpError(caught) && caught.code).toBe('KWP_ERR_USAGE');
    expect((caught as Error).message).toMatch(message);
  });
});
