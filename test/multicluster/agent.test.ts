import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Protocol, type Packet } from '../../host/contract.js';
import { Agent } from '../../host/agent.js';
import { createLogger } from '../../host/log.js';
import { parseIP } from '../../host/net/ip.js';
import { kubeSystemUid } from '../../host/multicluster/cluster-id.js';
import { loadKubeConfig } from '../../host/sources/kubernetes.js';
import { pollUntil } from '../apiserver/poll.js';
import { namespace, pod, startClusterSet, type ClusterSet } from './cluster-set.js';
import { Writable } from 'node:stream';

function tcp(src: string, dst: string, port = 80): Packet {
  return { family: 4, protocol: Protocol.TCP, src: parseIP(src)!.bytes, dst: parseIP(dst)!.bytes, srcPort: 40000, dstPort: port, icmpType: 0, icmpCode: 0 };
}

const quiet = () => createLogger(0, new Writable({ write(_c, _e, cb) { cb(); } }));

describe('kwp agent with --ip-tracker-etcd', () => {
  let set: ClusterSet;
  let agent: Agent | undefined;
  beforeEach(async () => {
    set = await startClusterSet();
    set.a.create(namespace('backend'));
    set.a.create(pod('backend', 'db', '10.1.0.7', { app: 'db' }));
    set.b.create(namespace('frontend'));
    set.b.create(pod('frontend', 'web', '10.2.0.5', { app: 'web' }));
    set.a.create({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'from-frontend', namespace: 'backend' },
      spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }] }] },
    });
    await set.writeKubeconfig('a');
    await set.writeKubeconfig('b');
  });
  afterEach(async () => {
    await agent?.stop();
    agent = undefined;
    await set.stop();
  });

  it('runs the multicluster NetworkPolicy stage and admits a cluster B pod the policy selects', async () => {
    await set.tracker();
    agent = new Agent({ kubeconfig: set.fileOf('a'), ipTrackerEtcd: [set.etcd.url], clusterId: 'a', dataplane: false, logger: quiet() });
    await agent.start();
    expect(agent.engine.active.spec.stages.find((s) => s.name === 'np')).toMatchObject({ module: 'multicluster-network-policy', config: { clusterId: 'a' } });
    await pollUntil(() => agent!.state.podByIP('10.2.0.5') && agent!.state.podByIP('10.1.0.7'), 'both pods in the agent', 15_000);
    await pollUntil(() => agent!.ready(), 'the agent to be ready', 15_000);
    expect(agent.engine.evaluate(tcp('10.2.0.5', '10.1.0.7')).allowed).toBe(true);
    expect(agent.engine.evaluate(tcp('10.2.0.99', '10.1.0.7')).allowed).toBe(false);
  });

  it('refuses --ip-tracker-etcd without a cluster id', () => {
    expect(() => new Agent({ kubeconfig: set.fileOf('a'), ipTrackerEtcd: [set.etcd.url], dataplane: false, logger: quiet() })).toThrow(/--cluster-id/);
  });

  it('derives the cluster id from the kube-system namespace uid, as the tracker does', async () => {
    const created = set.a.create(namespace('kube-system'));
    expect(await kubeSystemUid(loadKubeConfig(set.fileOf('a')), 'test')).toBe(created.metadata.uid);
    await expect(kubeSystemUid(loadKubeConfig(set.fileOf('b')), 'test')).rejects.toThrow(/pass --cluster-id/);
  });
});
