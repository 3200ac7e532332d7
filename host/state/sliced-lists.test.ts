// ClusterState with sliceLargeLists (what the agent runs): a list of
// thousands of objects is worked out between turns of the event loop and
// installed in one step, so readers see the kind as it was or as it is after
// the list, never half of it, and the changes that came after it wait behind
// it in order.
import { describe, it, expect } from 'vitest';
import { Kinds, type KubeObject, type PodInfo } from '../contract.js';
import { ClusterState, SLICED_LIST_ITEMS } from './cluster-state.js';

const N = 3 * SLICED_LIST_ITEMS;

function pod(i: number, labels: Record<string, string>, uid = `uid-${i}`): KubeObject {
  const ip = `10.1.${i >> 8}.${i & 255}`;
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: `p${i}`, namespace: `ns${i % 10}`, uid, labels },
    spec: { nodeName: `node-${i % 3}`, containers: [{ name: 'main', ports: [{ containerPort: 8080 }] }] },
    status: { phase: 'Running', podIP: ip },
  };
}
const pods = (labels: Record<string, string>) => Array.from({ length: N }, (_, i) => pod(i, labels));
const namespaces = (team: string) => Array.from({ length: 10 }, (_, i): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns${i}`, labels: { team } } }));

/** How many of the pods carry `value` under `key` in their pod or namespace labels: all or none, if no half list is ever seen. */
function carrying(state: ClusterState, key: string, value: string): number {
  let n = 0;
  for (let i = 0; i < N; i++) {
    const p = state.podByName(`ns${i % 10}`, `p${i}`);
    if (p?.podLabels[key] === value || p?.namespaceLabels[key] === value) n++;
  }
  return n;
}

/** Counts the turns of the event loop until `done`, checking the state at each that it is whole (all or none of the pods carry the label). */
async function turnsUntil(state: ClusterState, key: string, value: string): Promise<{ turns: number; seen: Set<number> }> {
  let turns = 0;
  const seen = new Set<number>();
  let finished = false;
  const ticking = (async () => {
    while (!finished) {
      seen.add(carrying(state, key, value));
      turns++;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  })();
  await state.settled();
  finished = true;
  await ticking;
  seen.add(carrying(state, key, value));
  return { turns, seen };
}

const infos = (state: ClusterState): PodInfo[] => [...state.pods()].sort((a, b) => a.id - b.id);

describe('ClusterState taking large lists in slices', () => {
  it('a pod list of thousands yields to the event loop, shows the old pods until it is installed whole, and ends as an unsliced replace would', async () => {
    const sliced = new ClusterState({ sliceLargeLists: true });
    const plain = new ClusterState();
    for (const s of [sliced, plain]) {
      s.replace(Kinds.Namespace, namespaces('a'));
      s.replace(Kinds.Pod, pods({ app: 'old' }));
    }
    await sliced.settled();
    expect(carrying(sliced, 'app', 'old')).toBe(N);

    const heard: string[] = [];
    sliced.subscribe({ podUpserted: () => heard.push('pod'), podDeleted: () => heard.push('pod'), objectsReplaced: (kind) => heard.push(kind), objectApplied: () => heard.push('apply') });
    sliced.replace(Kinds.Pod, pods({ app: 'new' }));
    plain.replace(Kinds.Pod, pods({ app: 'new' }));
    // Not installed yet: the state is the one before the list, and says a list is pending.
    expect(carrying(sliced, 'app', 'new')).toBe(0);
    expect(sliced.pendingList).toMatchObject({ kind: Kinds.Pod, objects: N });
    expect(heard).toEqual([]);

    const { turns, seen } = await turnsUntil(sliced, 'app', 'new');
    expect(turns).toBeGreaterThan(1);
    expect([...seen].sort()).toEqual([0, N]);
    expect(sliced.pendingList).toBeUndefined();
    expect(heard.filter((h) => h === 'pod')).toHaveLength(N);
    expect(heard.at(-1)).toBe(Kinds.Pod);
    // The same PodInfos, ids included, as the replace that did it all at once.
    expect(infos(sliced)).toEqual(infos(plain));
    expect(sliced.replaceCounts.get(Kinds.Pod)).toBe(2);
  });

  it('changes that come while a list is taken wait behind it, in order, and are not undone by it', async () => {
    const state = new ClusterState({ sliceLargeLists: true });
    state.replace(Kinds.Pod, pods({ app: 'old' }));
    state.apply(Kinds.Pod, { type: 'upsert', object: pod(1, { app: 'later' }) });
    state.apply(Kinds.Pod, { type: 'delete', object: pod(2, {}) });
    state.replace(Kinds.NetworkPolicy, [{ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'np', namespace: 'ns1' }, spec: {} }]);
    expect(state.podByName('ns0', 'p0')).toBeUndefined();
    expect(state.pendingList).toMatchObject({ kind: Kinds.Pod, waiting: 3 });
    await state.settled();
    expect(state.podByName('ns1', 'p1')!.podLabels).toEqual({ app: 'later' });
    expect(state.podByName('ns2', 'p2')).toBeUndefined();
    expect(state.podByName('ns3', 'p3')!.podLabels).toEqual({ app: 'old' });
    expect(state.objects(Kinds.NetworkPolicy)).toHaveLength(1);
    expect([...state.pods()]).toHaveLength(N - 1);
  });

  it('a pod recreated under its name with a new uid gets a new id, as without slices', async () => {
    const state = new ClusterState({ sliceLargeLists: true });
    state.replace(Kinds.Pod, pods({ app: 'a' }));
    await state.settled();
    const before = state.podByName('ns5', 'p5')!.id;
    state.replace(Kinds.Pod, Array.from({ length: N }, (_, i) => pod(i, { app: 'a' }, i === 5 ? 'another-uid' : `uid-${i}`)));
    await state.settled();
    const after = state.podByName('ns5', 'p5')!.id;
    expect(after).not.toBe(before);
    expect(new Set(infos(state).map((p) => p.id)).size).toBe(N);
    expect(state.podByIP('10.1.0.5')!.id).toBe(after);
  });

  it('a namespace list relabelling thousands of pods gives them their new namespace labels all at once', async () => {
    const state = new ClusterState({ sliceLargeLists: true });
    state.replace(Kinds.Namespace, namespaces('a'));
    state.replace(Kinds.Pod, pods({ app: 'x' }));
    await state.settled();
    expect(carrying(state, 'team', 'a')).toBe(N);
    state.replace(Kinds.Namespace, namespaces('b'));
    expect(carrying(state, 'team', 'b')).toBe(0);
    const { turns, seen } = await turnsUntil(state, 'team', 'b');
    expect(turns).toBeGreaterThan(1);
    expect([...seen].sort()).toEqual([0, N]);
  });

  it('a remote pod keeps its id and its address across a sliced pod list, and a local pod reusing the address wins it', async () => {
    const state = new ClusterState({ sliceLargeLists: true, multicluster: true, clusterId: 'east' });
    state.upsertRemotePod('west/ns0/r', { name: 'r', namespace: 'ns0', clusterId: 'west', podLabels: {}, namespaceLabels: {}, nodeName: '', nodeLabels: {}, containerPorts: [], ips: ['10.9.0.1'] });
    const remote = state.podByIP('10.9.0.1')!;
    state.replace(Kinds.Pod, pods({ app: 'a' }));
    await state.settled();
    expect(state.podByIP('10.9.0.1')).toBe(remote);
    expect(state.podById(remote.id)).toBe(remote);
    expect(state.podByIP('10.1.0.7')!.name).toBe('p7');
    const claimant = { ...pod(7, { app: 'a' }), status: { phase: 'Running', podIP: '10.9.0.1' } };
    state.replace(Kinds.Pod, Array.from({ length: N }, (_, i) => (i === 7 ? claimant : pod(i, { app: 'a' }))));
    await state.settled();
    expect(state.podByIP('10.9.0.1')!.name).toBe('p7');
    expect(state.podByIP('10.1.0.7')).toBeUndefined();
  });

  it('without sliceLargeLists a large list is installed before replace returns', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, pods({ app: 'old' }));
    expect(carrying(state, 'app', 'old')).toBe(N);
    expect(state.pendingList).toBeUndefined();
  });
});
