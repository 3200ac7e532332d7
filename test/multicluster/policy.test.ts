// The multicluster pipeline end to end without root: clusters A and B behind
// emulated API servers, a real etcd, an IP tracker, and cluster A's agent
// state (A's informers + the tracker's records) deciding packets through the
// WASM pipeline with the multicluster NetworkPolicy stage.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kinds, Protocol, type KubeObject, type Packet } from '../../host/contract.js';
import { parseIP } from '../../host/net/ip.js';
import { PolicyEngine } from '../../host/pipeline/engine.js';
import { defaultPipeline } from '../../host/pipeline/spec.js';
import type { Pipeline } from '../../host/pipeline/pipeline.js';
import { sharedBuiltins } from '../../host/eval.js';
import { toMulticlusterPipeline } from '../../host/multicluster/pipeline.js';
import type { ClusterState } from '../../host/state/cluster-state.js';
import type { IpTracker } from '../../host/multicluster/ip-tracker.js';
import type { RemotePodSource } from '../../host/multicluster/remote-pod-source.js';
import { pollUntil } from '../apiserver/poll.js';
import { namespace, pod, startClusterSet, type ClusterSet } from './cluster-set.js';

const SCOPE = 'multicluster.kube-wasm-policies.io/scope';

// Cluster A: backend/db (the subject), frontend/local-web. Cluster B: frontend/web, other/web, backend/client.
const A_DB = '10.1.0.7';
const A_WEB = '10.1.0.8';
const B_WEB = '10.2.0.5';
const B_OTHER = '10.2.0.6';
const B_CLIENT = '10.2.0.7';
const B_LATE = '10.2.0.20';

function ingressPolicy(name: string, from: unknown[], annotations?: Record<string, string>): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: 'backend', ...(annotations ? { annotations } : {}) },
    spec: { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'], ingress: [{ from }] },
  };
}

function tcp(src: string, dst: string, port = 80): Packet {
  return { family: 4, protocol: Protocol.TCP, src: parseIP(src)!.bytes, dst: parseIP(dst)!.bytes, srcPort: 40000, dstPort: port, icmpType: 0, icmpCode: 0 };
}

describe('multicluster NetworkPolicy through the pipeline (flat network, clusters A and B)', () => {
  let set: ClusterSet;
  let state: ClusterState;
  let remote: RemotePodSource;
  let tracker: IpTracker;
  let pipeline: Pipeline;

  const allowed = (src: string, dst: string, port = 80) => pipeline.evaluate(tcp(src, dst, port)).allowed;

  /** Replaces cluster A's policies with `policies` and waits until the agent state holds exactly them. */
  async function usePolicies(...policies: KubeObject[]): Promise<void> {
    for (const p of set.a.list(Kinds.NetworkPolicy)) set.a.remove(Kinds.NetworkPolicy, p.metadata.name, p.metadata.namespace);
    for (const p of policies) set.a.create(p);
    const want = policies.map((p) => `${p.metadata.name}:${JSON.stringify(p.metadata.annotations ?? {})}`).sort().join(',');
    await pollUntil(
      () => state.objects(Kinds.NetworkPolicy).map((p) => `${p.metadata.name}:${JSON.stringify(p.metadata.annotations ?? {})}`).sort().join(',') === want,
      `cluster A's policies ${want}`, 10_000,
    );
  }

  beforeAll(async () => {
    set = await startClusterSet();
    set.a.create(namespace('backend'));
    set.a.create(namespace('frontend'));
    set.a.create(pod('backend', 'db', A_DB, { app: 'db' }));
    set.a.create(pod('frontend', 'local-web', A_WEB, { app: 'web' }));
    set.b.create(namespace('frontend'));
    set.b.create(namespace('other'));
    set.b.create(namespace('backend'));
    set.b.create(pod('frontend', 'web', B_WEB, { app: 'web' }));
    set.b.create(pod('other', 'web', B_OTHER, { app: 'web' }));
    set.b.create(pod('backend', 'client', B_CLIENT, { app: 'client' }));
    await set.writeKubeconfig('a');
    await set.writeKubeconfig('b');
    tracker = await set.tracker();
    ({ state, remote } = await set.agentA());
    await pollUntil(() => state.podByIP(A_DB) && state.podByIP(B_WEB) && state.podByIP(B_OTHER) && state.podByIP(B_CLIENT), 'local and remote pods in the agent state', 15_000);
    const engine = new PolicyEngine({ state, modules: sharedBuiltins() });
    pipeline = engine.build(toMulticlusterPipeline(defaultPipeline(), 'a'));
  });

  afterAll(async () => {
    pipeline?.dispose();
    await set?.stop();
  });

  it('resolves remote addresses to pods of cluster B labelled with their cluster, and local ones to cluster A', () => {
    expect(state.podByIP(B_WEB)).toMatchObject({ name: 'web', namespace: 'frontend', clusterId: 'b' });
    expect(state.podByIP(B_WEB)!.namespaceLabels['cluster.clusterset.k8s.io']).toBe('b');
    expect(state.podByIP(A_DB)).toMatchObject({ name: 'db', clusterId: 'a' });
    expect(state.podByIP(A_DB)!.namespaceLabels['cluster.clusterset.k8s.io']).toBe('a');
  });

  it('admits B frontend pods to an A pod whose policy allows namespace frontend (cross-cluster by default)', async () => {
    await usePolicies(ingressPolicy('from-frontend', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }]));
    expect(allowed(B_WEB, A_DB)).toBe(true);
    expect(allowed(A_WEB, A_DB)).toBe(true);
    expect(allowed(B_OTHER, A_DB)).toBe(false);
  });

  it('refuses B frontend pods when the same policy is scoped cluster-local, and still admits A frontend pods', async () => {
    await usePolicies(ingressPolicy('from-frontend', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }], { [SCOPE]: 'cluster-local' }));
    expect(allowed(B_WEB, A_DB)).toBe(false);
    expect(allowed(A_WEB, A_DB)).toBe(true);
  });

  it('keeps ipBlock peers working for remote addresses under a cluster-local policy', async () => {
    await usePolicies(ingressPolicy('from-block', [{ ipBlock: { cidr: '10.2.0.0/24' } }], { [SCOPE]: 'cluster-local' }));
    expect(allowed(B_WEB, A_DB)).toBe(true);
    expect(allowed(A_WEB, A_DB)).toBe(false);
  });

  it('lets a policy pick a cluster with the cluster.clusterset.k8s.io namespace label', async () => {
    await usePolicies(ingressPolicy('from-cluster-b', [{ namespaceSelector: { matchLabels: { 'cluster.clusterset.k8s.io': 'b' } } }]));
    expect(allowed(B_WEB, A_DB)).toBe(true);
    expect(allowed(B_OTHER, A_DB)).toBe(true);
    expect(allowed(A_WEB, A_DB)).toBe(false);
  });

  it('matches a podSelector-only peer in the same-named namespace of another cluster (namespace sameness)', async () => {
    set.b.create(pod('frontend', 'client', '10.2.0.8', { app: 'client' }));
    await pollUntil(() => state.podByIP('10.2.0.8'), 'B frontend/client', 10_000);
    await usePolicies(ingressPolicy('from-clients', [{ podSelector: { matchLabels: { app: 'client' } } }]));
    expect(allowed(B_CLIENT, A_DB)).toBe(true);
    expect(allowed('10.2.0.8', A_DB)).toBe(false);
  });

  it('never makes a remote pod a subject: an A policy isolating frontend does not judge traffic to B frontend pods', async () => {
    const denyFrontend: KubeObject = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'deny-all', namespace: 'frontend' },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    };
    await usePolicies(denyFrontend);
    expect(allowed(A_DB, A_WEB)).toBe(false);
    expect(allowed(A_DB, B_WEB)).toBe(true);
  });

  it('drops a deleted B pod and its access', async () => {
    await usePolicies(ingressPolicy('from-frontend', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }]));
    set.b.create(pod('frontend', 'short-lived', '10.2.0.9', { app: 'web' }));
    await pollUntil(() => state.podByIP('10.2.0.9'), 'the short-lived pod', 10_000);
    expect(allowed('10.2.0.9', A_DB)).toBe(true);
    set.b.remove(Kinds.Pod, 'short-lived', 'frontend');
    await pollUntil(() => state.podByIP('10.2.0.9') === undefined, 'the short-lived pod to go', 10_000);
    expect(allowed('10.2.0.9', A_DB)).toBe(false);
  });

  it('keeps verdicts for known remote IPs while etcd is down, and picks up new B pods once it is back', async () => {
    await usePolicies(ingressPolicy('from-frontend', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }]));
    const before = [allowed(B_WEB, A_DB), allowed(B_OTHER, A_DB)];
    expect(before).toEqual([true, false]);

    await set.etcd.pause();
    await pollUntil(() => !remote.connected(), 'the agent to notice etcd is gone', 10_000);
    set.b.create(pod('frontend', 'late', B_LATE, { app: 'web' }));
    // Traffic keeps flowing against the last known state for a while.
    for (let i = 0; i < 10; i++) {
      expect([allowed(B_WEB, A_DB), allowed(B_OTHER, A_DB)]).toEqual(before);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(allowed(B_LATE, A_DB)).toBe(false);

    await set.etcd.resume();
    await pollUntil(() => state.podByIP(B_LATE), 'the pod created while etcd was down', 20_000, 50);
    expect(allowed(B_LATE, A_DB)).toBe(true);
    expect([allowed(B_WEB, A_DB), allowed(B_OTHER, A_DB)]).toEqual(before);
  });

  it('expires the entries of a cluster whose kubeconfig is removed, and with them its pods\' access', async () => {
    await usePolicies(ingressPolicy('from-frontend', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }]));
    expect(allowed(B_WEB, A_DB)).toBe(true);
    await set.removeKubeconfig('b');
    await pollUntil(() => state.podByIP(B_WEB) === undefined, 'cluster B pods to leave the agent state', 15_000, 50);
    expect(allowed(B_WEB, A_DB)).toBe(false);
    expect(allowed(A_WEB, A_DB)).toBe(true);
    expect(tracker.status().clusters.map((c) => c.clusterId)).toEqual(['a']);
  });
});
