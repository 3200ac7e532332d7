import { describe, it, expect } from 'vitest';
import { PerformanceObserver } from 'node:perf_hooks';
import { Kinds, type KindKey, type KubeObject, type ObjectEvent, type PodInfo } from '../contract.js';
import { KwpError } from '../errors.js';
import { parseIP } from '../net/ip.js';
import { ClusterState, type StateListener } from './cluster-state.js';

interface PodOptions {
  namespace?: string;
  labels?: Record<string, string>;
  ip?: string;
  ips?: string[];
  phase?: string;
  node?: string;
  uid?: string;
  hostNetwork?: boolean;
  containers?: any[];
  initContainers?: any[];
}

function pod(name: string, o: PodOptions = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: o.namespace ?? 'default', labels: o.labels, ...(o.uid ? { uid: o.uid } : {}) },
    spec: {
      nodeName: o.node,
      hostNetwork: o.hostNetwork,
      containers: o.containers ?? [{ name: 'main' }],
      initContainers: o.initContainers,
    },
    status: {
      phase: o.phase ?? 'Running',
      ...(o.ip ? { podIP: o.ip } : {}),
      ...(o.ips ? { podIPs: o.ips.map((ip) => ({ ip })) } : {}),
    },
  };
}

function namespace(name: string, labels?: Record<string, string>): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

function node(name: string, labels?: Record<string, string>): KubeObject {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels } };
}

type Recorded =
  | { event: 'podUpserted'; pod: PodInfo }
  | { event: 'podDeleted'; pod: PodInfo }
  | { event: 'objectsReplaced'; kind: KindKey; objects: KubeObject[] }
  | { event: 'objectApplied'; kind: KindKey; change: ObjectEvent };

function record(state: ClusterState): Recorded[] {
  const events: Recorded[] = [];
  state.subscribe({
    podUpserted: (p) => events.push({ event: 'podUpserted', pod: p }),
    podDeleted: (p) => events.push({ event: 'podDeleted', pod: p }),
    objectsReplaced: (kind, objects) => events.push({ event: 'objectsReplaced', kind, objects }),
    objectApplied: (kind, change) => events.push({ event: 'objectApplied', kind, change }),
  });
  return events;
}

const summary = (events: Recorded[]): string[] =>
  events.map((e) => {
    if (e.event === 'podUpserted' || e.event === 'podDeleted') return `${e.event} ${e.pod.namespace}/${e.pod.name}`;
    if (e.event === 'objectsReplaced') return `${e.event} ${e.kind} ${e.objects.length}`;
    return `${e.event} ${e.kind} ${e.change.type} ${e.change.object.metadata.name}`;
  });

describe('ClusterState PodInfo derivation', () => {
  it('a pod with an IP becomes a PodInfo carrying its labels, namespace labels, node labels and ports', () => {
    const state = new ClusterState({ clusterId: 'east' });
    state.replace(Kinds.Namespace, [namespace('shop', { team: 'a' })]);
    state.replace(Kinds.Node, [node('n1', { zone: 'z1' })]);
    state.replace(Kinds.Pod, [
      pod('web', {
        namespace: 'shop',
        labels: { app: 'web' },
        ip: '10.0.0.5',
        node: 'n1',
        containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 8080 }] }],
      }),
    ]);
    const info = state.podByIP('10.0.0.5');
    expect(info).toEqual({
      id: 1,
      name: 'web',
      namespace: 'shop',
      podLabels: { app: 'web' },
      namespaceLabels: { team: 'a', 'kubernetes.io/metadata.name': 'shop' },
      nodeName: 'n1',
      nodeLabels: { zone: 'z1' },
      clusterId: 'east',
      containerPorts: [{ name: 'http', port: 8080, protocol: 6 }],
      hostNetwork: false,
      ips: ['10.0.0.5'],
    });
    expect(state.podById(1)).toBe(info);
    expect(state.podByName('shop', 'web')).toBe(info);
  });

  it('a pod whose namespace and node are unknown still gets the metadata.name namespace label and empty node labels', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [pod('a', { namespace: 'ghost', ip: '10.0.0.1', node: 'nowhere' })]);
    const info = state.podByName('ghost', 'a')!;
    expect(info.namespaceLabels).toEqual({ 'kubernetes.io/metadata.name': 'ghost' });
    expect(info.nodeLabels).toEqual({});
    expect(info.clusterId).toBe('');
  });

  it.each([
    [undefined, 6],
    ['TCP', 6],
    ['UDP', 17],
    ['SCTP', 132],
  ])('a container port with protocol %s is recorded with IANA number %i', (protocol, number) => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [
      pod('a', { ip: '10.0.0.1', containers: [{ name: 'c', ports: [{ containerPort: 53, protocol }] }] }),
    ]);
    expect(state.podByName('default', 'a')!.containerPorts).toEqual([{ name: '', port: 53, protocol: number }]);
  });

  it('ports of every container and of native sidecars are collected, ports of ordinary init containers are not', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [
      pod('a', {
        ip: '10.0.0.1',
        containers: [
          { name: 'one', ports: [{ containerPort: 80, name: 'http' }] },
          { name: 'two', ports: [{ containerPort: 9090, name: 'metrics', protocol: 'TCP' }] },
        ],
        initContainers: [
          { name: 'setup', ports: [{ containerPort: 1 }] },
          { name: 'proxy', restartPolicy: 'Always', ports: [{ containerPort: 15001, name: 'proxy' }] },
        ],
      }),
    ]);
    expect(state.podByName('default', 'a')!.containerPorts.map((p) => p.port)).toEqual([80, 9090, 15001]);
  });

  it('podIPs wins over podIP and both families are kept in canonical form', () => {
    const state = new ClusterState();
    const obj = pod('a', { ips: ['10.0.0.7', '2001:DB8:0:0::7'] });
    obj.status.podIP = '10.0.0.7';
    state.replace(Kinds.Pod, [obj]);
    expect(state.podByName('default', 'a')!.ips).toEqual(['10.0.0.7', '2001:db8::7']);
    expect(state.podByIP('2001:db8::7')?.name).toBe('a');
    expect(state.podByIP(parseIP('2001:db8::7')!.bytes)?.name).toBe('a');
    expect(state.podByIP(Uint8Array.of(10, 0, 0, 7))?.name).toBe('a');
  });

  it('a pod without an IP has no PodInfo until it gets one', () => {
    const state = new ClusterState();
    const events = record(state);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { phase: 'Pending' }) });
    expect([...state.pods()]).toEqual([]);
    expect(summary(events)).toEqual(['objectApplied v1/Pod upsert a']);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1' }) });
    expect(summary(events).slice(1)).toEqual(['podUpserted default/a', 'objectApplied v1/Pod upsert a']);
    expect(state.podByIP('10.0.0.1')?.id).toBe(1);
  });

  it('PodInfo records are frozen once emitted', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1', labels: { x: 'y' } })]);
    const info = state.podByName('default', 'a')!;
    expect(Object.isFrozen(info)).toBe(true);
    expect(Object.isFrozen(info.podLabels)).toBe(true);
    expect(Object.isFrozen(info.ips)).toBe(true);
  });

  it('objects are stored without metadata.managedFields and pods default to the default namespace', () => {
    const state = new ClusterState();
    const obj = pod('a', { ip: '10.0.0.1' });
    delete obj.metadata.namespace;
    obj.metadata.managedFields = [{ manager: 'kubectl' }];
    state.replace(Kinds.Pod, [obj]);
    const stored = state.object(Kinds.Pod, 'default/a')!;
    expect(stored.metadata).not.toHaveProperty('managedFields');
    expect(obj.metadata).toHaveProperty('managedFields');
    expect(state.podByName('default', 'a')).toBeDefined();
  });
});

describe('ClusterState pod ids', () => {
  it('ids start at 1, stay the same across updates and are never reused', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('b', { ip: '10.0.0.2' }) });
    expect(state.podByName('default', 'a')!.id).toBe(1);
    expect(state.podByName('default', 'b')!.id).toBe(2);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1', labels: { v: '2' } }) });
    expect(state.podByName('default', 'a')!.id).toBe(1);
    state.apply(Kinds.Pod, { type: 'delete', object: pod('a') });
    expect(state.podById(1)).toBeUndefined();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1' }) });
    expect(state.podByName('default', 'a')!.id).toBe(3);
  });

  it('a relist that still contains a pod keeps its id', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1', uid: 'u1' }), pod('b', { ip: '10.0.0.2' })]);
    state.replace(Kinds.Pod, [pod('b', { ip: '10.0.0.2' }), pod('a', { ip: '10.0.0.1', uid: 'u1' })]);
    expect(state.podByName('default', 'a')!.id).toBe(1);
    expect(state.podByName('default', 'b')!.id).toBe(2);
  });

  it('a pod recreated under the same name with a new uid is a new pod with a new id', () => {
    const state = new ClusterState();
    const events = record(state);
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1', uid: 'u1' })]);
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.9', uid: 'u2' })]);
    expect(state.podByName('default', 'a')!.id).toBe(2);
    expect(state.podByIP('10.0.0.1')).toBeUndefined();
    const podEvents = events.filter((e) => e.event === 'podUpserted' || e.event === 'podDeleted') as Array<{
      event: string;
      pod: PodInfo;
    }>;
    expect(podEvents.map((e) => `${e.event} ${e.pod.id}`)).toEqual(['podUpserted 1', 'podDeleted 1', 'podUpserted 2']);
  });
});

describe('ClusterState snapshots and events', () => {
  it('replace emits upserts for new and changed pods, deletes for gone ones, nothing for unchanged ones, then objectsReplaced', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [
      pod('same', { ip: '10.0.0.1' }),
      pod('changed', { ip: '10.0.0.2', labels: { v: '1' } }),
      pod('gone', { ip: '10.0.0.3' }),
    ]);
    const events = record(state);
    state.replace(Kinds.Pod, [
      pod('same', { ip: '10.0.0.1' }),
      pod('changed', { ip: '10.0.0.2', labels: { v: '2' } }),
      pod('new', { ip: '10.0.0.4' }),
    ]);
    expect(summary(events)).toEqual([
      'podDeleted default/gone',
      'podUpserted default/changed',
      'podUpserted default/new',
      'objectsReplaced v1/Pod 3',
    ]);
    expect(state.podByIP('10.0.0.3')).toBeUndefined();
    expect(state.podByIP('10.0.0.2')!.podLabels).toEqual({ v: '2' });
  });

  it('replace of any other kind is stored and announced', () => {
    const state = new ClusterState();
    const events = record(state);
    const policy: KubeObject = {
      apiVersion: 'example.com/v1',
      kind: 'ServicePolicy',
      metadata: { name: 'p', namespace: 'x', managedFields: [{}] },
      spec: { a: 1 },
    };
    state.replace('example.com/v1/ServicePolicy', [policy]);
    expect(state.objects('example.com/v1/ServicePolicy')).toEqual([
      { apiVersion: 'example.com/v1', kind: 'ServicePolicy', metadata: { name: 'p', namespace: 'x' }, spec: { a: 1 } },
    ]);
    expect(summary(events)).toEqual(['objectsReplaced example.com/v1/ServicePolicy 1']);
    state.replace('example.com/v1/ServicePolicy', []);
    expect(state.objects('example.com/v1/ServicePolicy')).toEqual([]);
  });

  it('an applied delete announces the last known object and an unknown delete changes nothing', () => {
    const state = new ClusterState();
    state.apply(Kinds.Service, { type: 'upsert', object: { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'd' }, spec: { port: 1 } } });
    const events = record(state);
    const before = state.version;
    state.apply(Kinds.Service, { type: 'delete', object: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'nope', namespace: 'd' } } });
    expect(events).toEqual([]);
    expect(state.version).toBe(before);
    state.apply(Kinds.Service, { type: 'delete', object: { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'd' } } });
    expect(events).toHaveLength(1);
    expect((events[0] as any).change.object.spec).toEqual({ port: 1 });
    expect(state.objects(Kinds.Service)).toEqual([]);
  });

  it('the version goes up with every change', () => {
    const state = new ClusterState();
    const versions = [state.version];
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' })]);
    versions.push(state.version);
    state.apply(Kinds.Namespace, { type: 'upsert', object: namespace('default', { a: 'b' }) });
    versions.push(state.version);
    state.recordResolvedName('example.com', '192.0.2.1', 30, 0);
    versions.push(state.version);
    expect(new Set(versions).size).toBe(versions.length);
    expect([...versions].sort((x, y) => x - y)).toEqual(versions);
  });

  it('an unsubscribed listener hears nothing more', () => {
    const state = new ClusterState();
    const heard: string[] = [];
    const listener: StateListener = {
      podUpserted: (p) => heard.push(p.name),
      podDeleted: () => {},
      objectsReplaced: () => {},
      objectApplied: () => {},
    };
    const unsubscribe = state.subscribe(listener);
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' })]);
    unsubscribe();
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' }), pod('b', { ip: '10.0.0.2' })]);
    expect(heard).toEqual(['a']);
  });

  it('a throwing listener does not keep the others from hearing, and its error surfaces afterwards', () => {
    const state = new ClusterState();
    state.subscribe({
      podUpserted: () => {
        throw new Error('listener broke');
      },
      podDeleted: () => {},
      objectsReplaced: () => {},
      objectApplied: () => {},
    });
    const events = record(state);
    expect(() => state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' })])).toThrow('listener broke');
    expect(summary(events)).toEqual(['podUpserted default/a', 'objectsReplaced v1/Pod 1']);
    expect(state.podByIP('10.0.0.1')?.name).toBe('a');
  });

  it('listeners read a state that already includes the change they are told about', () => {
    const state = new ClusterState();
    let seen: PodInfo | undefined;
    state.subscribe({
      podUpserted: (p) => {
        seen = state.podByIP(p.ips[0]);
      },
      podDeleted: () => {},
      objectsReplaced: () => {},
      objectApplied: () => {},
    });
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' })]);
    expect(seen?.name).toBe('a');
  });
});

describe('ClusterState label propagation', () => {
  it('a namespace label change re-emits a new PodInfo for every pod of that namespace and no other', () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [namespace('a', { env: 'dev' }), namespace('b')]);
    state.replace(Kinds.Pod, [
      pod('p1', { namespace: 'a', ip: '10.0.0.1' }),
      pod('p2', { namespace: 'a', ip: '10.0.0.2' }),
      pod('q1', { namespace: 'b', ip: '10.0.0.3' }),
    ]);
    const before = state.podByName('a', 'p1')!;
    const events = record(state);
    state.apply(Kinds.Namespace, { type: 'upsert', object: namespace('a', { env: 'prod' }) });
    expect(summary(events)).toEqual(['podUpserted a/p1', 'podUpserted a/p2', 'objectApplied v1/Namespace upsert a']);
    const after = state.podByName('a', 'p1')!;
    expect(after).not.toBe(before);
    expect(before.namespaceLabels.env).toBe('dev');
    expect(after.namespaceLabels.env).toBe('prod');
    expect(state.podByIP('10.0.0.1')).toBe(after);
    expect(after.id).toBe(before.id);
  });

  it('a namespace update that leaves its labels alone emits no pod events', () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [namespace('a', { env: 'dev' })]);
    state.replace(Kinds.Pod, [pod('p1', { namespace: 'a', ip: '10.0.0.1' })]);
    const events = record(state);
    const updated = namespace('a', { env: 'dev' });
    updated.metadata.annotations = { note: 'x' };
    state.apply(Kinds.Namespace, { type: 'upsert', object: updated });
    state.replace(Kinds.Namespace, [updated]);
    expect(summary(events)).toEqual(['objectApplied v1/Namespace upsert a', 'objectsReplaced v1/Namespace 1']);
  });

  it('deleting a namespace object leaves its pods with only the metadata.name label', () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [namespace('a', { env: 'dev' })]);
    state.replace(Kinds.Pod, [pod('p1', { namespace: 'a', ip: '10.0.0.1' })]);
    state.apply(Kinds.Namespace, { type: 'delete', object: namespace('a') });
    expect(state.podByName('a', 'p1')!.namespaceLabels).toEqual({ 'kubernetes.io/metadata.name': 'a' });
  });

  it('a namespace snapshot that changes one namespace re-emits only that namespace\'s pods', () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [namespace('a', { env: 'dev' }), namespace('b', { env: 'dev' })]);
    state.replace(Kinds.Pod, [pod('p', { namespace: 'a', ip: '10.0.0.1' }), pod('q', { namespace: 'b', ip: '10.0.0.2' })]);
    const events = record(state);
    state.replace(Kinds.Namespace, [namespace('a', { env: 'dev' }), namespace('b', { env: 'prod' })]);
    expect(summary(events)).toEqual(['podUpserted b/q', 'objectsReplaced v1/Namespace 2']);
  });

  it('a node label change re-emits every pod on that node and no other', () => {
    const state = new ClusterState();
    state.replace(Kinds.Node, [node('n1', { zone: 'a' }), node('n2', { zone: 'a' })]);
    state.replace(Kinds.Pod, [
      pod('on1', { ip: '10.0.0.1', node: 'n1' }),
      pod('on2', { ip: '10.0.0.2', node: 'n2' }),
      pod('host', { ip: '192.168.0.1', node: 'n1', hostNetwork: true }),
    ]);
    const events = record(state);
    state.apply(Kinds.Node, { type: 'upsert', object: node('n1', { zone: 'b' }) });
    expect(summary(events)).toEqual(['podUpserted default/on1', 'podUpserted default/host', 'objectApplied v1/Node upsert n1']);
    expect(state.podByName('default', 'on1')!.nodeLabels).toEqual({ zone: 'b' });
    expect(state.nodes().map((n) => n.metadata.name)).toEqual(['n1', 'n2']);
  });

  it('a pod that moves to another node follows that node\'s label changes', () => {
    const state = new ClusterState();
    state.replace(Kinds.Node, [node('n1', { zone: 'a' }), node('n2', { zone: 'b' })]);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('p', { ip: '10.0.0.1', node: 'n1' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('p', { ip: '10.0.0.1', node: 'n2' }) });
    expect(state.podByName('default', 'p')!.nodeLabels).toEqual({ zone: 'b' });
    const events = record(state);
    state.apply(Kinds.Node, { type: 'upsert', object: node('n1', { zone: 'c' }) });
    expect(summary(events)).toEqual(['objectApplied v1/Node upsert n1']);
  });
});

describe('ClusterState IP index', () => {
  it('host-networked pods have a PodInfo but are not found by IP', () => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [pod('agent', { ip: '192.168.1.10', hostNetwork: true })]);
    expect(state.podByIP('192.168.1.10')).toBeUndefined();
    const info = state.podByName('default', 'agent')!;
    expect(info.hostNetwork).toBe(true);
    expect([...state.pods()]).toEqual([info]);
  });

  it('a pod that stops being host-networked enters the IP index', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1', hostNetwork: true }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1' }) });
    expect(state.podByIP('10.0.0.1')?.name).toBe('a');
  });

  it.each([
    ['the running pod arrives second', ['done', 'live']],
    ['the running pod arrives first', ['live', 'done']],
  ])('when two pods share an IP the running one wins (%s)', (_case, order) => {
    const state = new ClusterState();
    const objects: Record<string, KubeObject> = {
      done: pod('done', { ip: '10.0.0.9', phase: 'Succeeded' }),
      live: pod('live', { ip: '10.0.0.9', phase: 'Running' }),
    };
    for (const name of order) state.apply(Kinds.Pod, { type: 'upsert', object: objects[name] });
    expect(state.podByIP('10.0.0.9')?.name).toBe('live');
  });

  it('deleting the pod that owns a shared IP gives the IP back to the other pod', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('old', { ip: '10.0.0.9', phase: 'Failed' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('new', { ip: '10.0.0.9' }) });
    expect(state.podByIP('10.0.0.9')?.name).toBe('new');
    state.apply(Kinds.Pod, { type: 'delete', object: pod('new') });
    expect(state.podByIP('10.0.0.9')?.name).toBe('old');
    state.apply(Kinds.Pod, { type: 'delete', object: pod('old') });
    expect(state.podByIP('10.0.0.9')).toBeUndefined();
  });

  it('a pod that stops running loses a shared IP to one that is running', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.9' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('b', { ip: '10.0.0.9', phase: 'Pending' }) });
    expect(state.podByIP('10.0.0.9')?.name).toBe('a');
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.9', phase: 'Succeeded' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('b', { ip: '10.0.0.9', phase: 'Running' }) });
    expect(state.podByIP('10.0.0.9')?.name).toBe('b');
  });

  it('a pod whose IP changes is found under the new IP only', () => {
    const state = new ClusterState();
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.1' }) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', { ip: '10.0.0.2' }) });
    expect(state.podByIP('10.0.0.1')).toBeUndefined();
    expect(state.podByIP('10.0.0.2')?.name).toBe('a');
  });

  it.each(['not-an-ip', '10.0.0.1/32', ''])('looking up %j finds nothing', (text) => {
    const state = new ClusterState();
    state.replace(Kinds.Pod, [pod('a', { ip: '10.0.0.1' })]);
    expect(state.podByIP(text)).toBeUndefined();
  });

  it('IPv4 lookups by bytes allocate nothing, even for addresses above 2^31', async () => {
    const state = new ClusterState();
    const pods: KubeObject[] = [];
    for (let i = 0; i < 256; i++) pods.push(pod(`p${i}`, { ip: `192.168.${i}.1` }));
    state.replace(Kinds.Pod, pods);
    const probes = Array.from({ length: 256 }, (_, i) => Uint8Array.of(192, 168, i, i % 2));

    const countCollections = async (work: () => void): Promise<number> => {
      let collections = 0;
      const observer = new PerformanceObserver((list) => {
        collections += list.getEntries().length;
      });
      observer.observe({ entryTypes: ['gc'] });
      work();
      await new Promise((resolve) => setTimeout(resolve, 50));
      observer.disconnect();
      return collections;
    };

    const iterations = 3_000_000;
    let found = 0;
    const lookups = () => {
      for (let i = 0; i < iterations; i++) if (state.podByIP(probes[i & 255]) !== undefined) found++;
    };
    lookups(); // warm up so the measured run is optimized code
    found = 0;
    const lookupCollections = await countCollections(lookups);
    expect(found).toBe(iterations / 2);

    // The same loop through the text path allocates, which proves the counter sees allocation.
    const texts = probes.map((p) => p.join('.'));
    const textCollections = await countCollections(() => {
      for (let i = 0; i < iterations / 3; i++) if (state.podByIP(texts[i & 255]) !== undefined) found++;
    });
    // A few collections happen regardless (timers, the observer itself); an
    // allocating lookup would cause one every few hundred thousand calls.
    expect(textCollections).toBeGreaterThan(20);
    expect(lookupCollections).toBeLessThanOrEqual(5);
  });
});

describe('ClusterState resolved names', () => {
  const resolvedEvents = (events: Recorded[]) =>
    events
      .filter((e): e is Extract<Recorded, { event: 'objectApplied' }> => e.event === 'objectApplied')
      .map((e) => ({ type: e.change.type, name: e.change.object.metadata.name, addresses: e.change.object.addresses }));

  it('a new address for a name is announced as a ResolvedName upsert with every address', () => {
    const state = new ClusterState();
    const events = record(state);
    state.recordResolvedName('WWW.Example.COM.', '192.0.2.10', 60, 1000);
    state.recordResolvedName('www.example.com', '2001:DB8::1', 60, 1000);
    expect(resolvedEvents(events)).toEqual([
      { type: 'upsert', name: 'www.example.com', addresses: ['192.0.2.10'] },
      { type: 'upsert', name: 'www.example.com', addresses: ['192.0.2.10', '2001:db8::1'] },
    ]);
    expect(events.every((e) => e.event !== 'objectApplied' || e.kind === Kinds.ResolvedName)).toBe(true);
    expect(state.objects(Kinds.ResolvedName)).toEqual([
      { apiVersion: 'dns.kwp.io/v1', kind: 'ResolvedName', metadata: { name: 'www.example.com' }, addresses: ['192.0.2.10', '2001:db8::1'] },
    ]);
  });

  it('a repeated answer extends the TTL without an event', () => {
    const state = new ClusterState();
    state.recordResolvedName('a.example', '192.0.2.1', 10, 0);
    const events = record(state);
    const version = state.version;
    state.recordResolvedName('a.example', '192.0.2.1', 10, 5_000);
    expect(events).toEqual([]);
    expect(state.version).toBe(version);
    state.expireResolvedNames(12_000);
    expect(state.resolvedAddresses('a.example')).toEqual(['192.0.2.1']);
    state.expireResolvedNames(15_000);
    expect(state.resolvedAddresses('a.example')).toEqual([]);
  });

  it('a shorter repeated TTL does not cut an earlier, longer one', () => {
    const state = new ClusterState();
    state.recordResolvedName('a.example', '192.0.2.1', 100, 0);
    state.recordResolvedName('a.example', '192.0.2.1', 1, 0);
    state.expireResolvedNames(50_000);
    expect(state.resolvedAddresses('a.example')).toEqual(['192.0.2.1']);
  });

  it('expiring one of two addresses upserts the rest, expiring the last deletes the name', () => {
    const state = new ClusterState();
    state.recordResolvedName('a.example', '192.0.2.1', 10, 0);
    state.recordResolvedName('a.example', '192.0.2.2', 20, 0);
    expect(state.nextResolvedNameExpiry()).toBe(10_000);
    const events = record(state);
    state.expireResolvedNames(9_999);
    expect(events).toEqual([]);
    state.expireResolvedNames(10_000);
    expect(state.nextResolvedNameExpiry()).toBe(20_000);
    state.expireResolvedNames(20_000);
    expect(resolvedEvents(events)).toEqual([
      { type: 'upsert', name: 'a.example', addresses: ['192.0.2.2'] },
      { type: 'delete', name: 'a.example', addresses: ['192.0.2.2'] },
    ]);
    expect(state.objects(Kinds.ResolvedName)).toEqual([]);
    expect(state.nextResolvedNameExpiry()).toBeUndefined();
  });

  it.each([
    ['', '192.0.2.1', /must not be empty/],
    ['a.example', 'not-an-address', /not an IPv4 or IPv6 address/],
    ['a.example', '192.0.2.0/24', /not an IPv4 or IPv6 address/],
  ])('recording %j → %j is refused with a message saying what to give', (name, address, message) => {
    const state = new ClusterState();
    let caught: unknown;
    try {
      state.recordResolvedName(name, address, 10);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(KwpError);
    expect((caught as KwpError).code).toBe('KWP_ERR_USAGE');
    expect((caught as KwpError).message).toMatch(message);
  });
});
