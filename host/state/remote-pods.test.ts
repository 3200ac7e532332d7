import { describe, it, expect } from 'vitest';
import { Kinds, type KubeObject, type PodInfo } from '../contract.js';
import { CLUSTER_LABEL, ClusterState, type RemotePod } from './cluster-state.js';

function localPod(name: string, ip: string, namespace = 'default', phase = 'Running'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, uid: `uid-${name}` },
    spec: { nodeName: 'node-a', containers: [{ name: 'main' }] },
    status: { phase, podIP: ip },
  };
}

function remotePod(name: string, ips: string[], overrides: Partial<RemotePod> = {}): RemotePod {
  return {
    clusterId: 'b',
    name,
    namespace: 'frontend',
    uid: `uid-${name}`,
    podLabels: { app: name },
    namespaceLabels: { team: 'web' },
    nodeName: 'node-b1',
    nodeLabels: { zone: 'z1' },
    containerPorts: [{ name: 'http', port: 8080, protocol: 6 }],
    ips,
    ...overrides,
  };
}

function recordPods(state: ClusterState): { upserted: PodInfo[]; deleted: PodInfo[] } {
  const seen = { upserted: [] as PodInfo[], deleted: [] as PodInfo[] };
  state.subscribe({
    podUpserted: (p) => seen.upserted.push(p),
    podDeleted: (p) => seen.deleted.push(p),
    objectsReplaced: () => {},
    objectApplied: () => {},
  });
  return seen;
}

describe('ClusterState remote pods', () => {
  it('resolves an address no local pod claims to the remote pod, with its own cluster id', () => {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    state.upsertRemotePod('b/frontend/web', remotePod('web', ['10.2.0.5']));
    const info = state.podByIP('10.2.0.5');
    expect(info?.name).toBe('web');
    expect(info?.clusterId).toBe('b');
    expect(info?.hostNetwork).toBe(false);
    expect(info?.namespaceLabels).toEqual({ team: 'web', 'kubernetes.io/metadata.name': 'frontend', [CLUSTER_LABEL]: 'b' });
    expect(info?.containerPorts).toEqual([{ name: 'http', port: 8080, protocol: 6 }]);
  });

  it('labels local pods with the local cluster id in multicluster mode only', () => {
    const multi = new ClusterState({ clusterId: 'a', multicluster: true });
    const single = new ClusterState({ clusterId: 'a' });
    for (const state of [multi, single]) state.apply(Kinds.Pod, { type: 'upsert', object: localPod('db', '10.1.0.2') });
    expect(multi.podByIP('10.1.0.2')?.namespaceLabels[CLUSTER_LABEL]).toBe('a');
    expect(single.podByIP('10.1.0.2')?.namespaceLabels[CLUSTER_LABEL]).toBeUndefined();
  });

  it.each([
    ['the local pod came first', true],
    ['the remote entry came first', false],
  ])('a remote entry never shadows a local pod with the same address (%s)', (_label, localFirst) => {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    const addLocal = () => state.apply(Kinds.Pod, { type: 'upsert', object: localPod('db', '10.9.9.9', 'default', 'Pending') });
    const addRemote = () => state.upsertRemotePod('b/frontend/web', remotePod('web', ['10.9.9.9']));
    if (localFirst) { addLocal(); addRemote(); } else { addRemote(); addLocal(); }
    expect(state.podByIP('10.9.9.9')?.name).toBe('db');
    state.apply(Kinds.Pod, { type: 'delete', object: localPod('db', '10.9.9.9') });
    expect(state.podByIP('10.9.9.9')?.name).toBe('web');
  });

  it('announces remote pods to listeners, once per real change', () => {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    const seen = recordPods(state);
    state.upsertRemotePod('k', remotePod('web', ['10.2.0.5']));
    state.upsertRemotePod('k', remotePod('web', ['10.2.0.5']));
    state.upsertRemotePod('k', remotePod('web', ['10.2.0.5'], { podLabels: { app: 'web', v: '2' } }));
    expect(seen.upserted.map((p) => p.podLabels)).toEqual([{ app: 'web' }, { app: 'web', v: '2' }]);
    expect(seen.upserted[0].id).toBe(seen.upserted[1].id);
    state.deleteRemotePod('k');
    expect(seen.deleted.map((p) => p.name)).toEqual(['web']);
    expect(state.podByIP('10.2.0.5')).toBeUndefined();
  });

  it('gives a new host id when the uid behind a key changes', () => {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    state.upsertRemotePod('k', remotePod('web', ['10.2.0.5']));
    const first = state.podByIP('10.2.0.5')!.id;
    state.upsertRemotePod('k', remotePod('web', ['10.2.0.5'], { uid: 'another' }));
    expect(state.podByIP('10.2.0.5')!.id).not.toBe(first);
  });

  it('replaces the remote pods with a snapshot, deleting keys it no longer holds', () => {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    state.upsertRemotePod('one', remotePod('one', ['10.2.0.1']));
    state.upsertRemotePod('two', remotePod('two', ['10.2.0.2']));
    state.replaceRemotePods(new Map([['two', remotePod('two', ['10.2.0.2'])], ['three', remotePod('three', ['fd00::3'])]]));
    expect(state.remotePodKeys().sort()).toEqual(['three', 'two']);
    expect(state.podByIP('10.2.0.1')).toBeUndefined();
    expect(state.podByIP('fd00::3')?.name).toBe('three');
    expect([...state.pods()].map((p) => p.name).sort()).toEqual(['three', 'two']);
  });
});

describe('ClusterState.enterMulticluster', () => {
  it('gives existing local pods the cluster id and label, and tells listeners', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: localPod('db', '10.1.0.2') });
    const seen = recordPods(state);
    state.enterMulticluster('east');
    expect(state.podByIP('10.1.0.2')).toMatchObject({ clusterId: 'east', namespaceLabels: { [CLUSTER_LABEL]: 'east' } });
    expect(seen.upserted.map((p) => p.clusterId)).toEqual(['east']);
    state.enterMulticluster('east');
    expect(seen.upserted).toHaveLength(1);
    expect(state.multiclusterMode).toBe(true);
  });
});
