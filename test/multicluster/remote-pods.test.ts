import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Etcd3 } from 'etcd3';
import { ClusterState, CLUSTER_LABEL } from '../../host/state/cluster-state.js';
import { RemotePodSource } from '../../host/multicluster/remote-pod-source.js';
import type { IpRecord } from '../../host/multicluster/ip-record.js';
import { pollUntil } from '../apiserver/poll.js';
import { EtcdServer } from './etcd-server.js';
import { TcpProxy } from './tcp-proxy.js';

const PREFIX = '/kwp/ips/';

function record(name: string, ip: string, overrides: Partial<IpRecord> = {}): IpRecord {
  return {
    v: 1, clusterId: 'b', name, namespace: 'frontend', uid: `uid-${name}`,
    podLabels: { app: name }, namespaceLabels: { 'kubernetes.io/metadata.name': 'frontend' },
    nodeName: 'node-b1', nodeLabels: {}, containerPorts: [], ips: [ip], ...overrides,
  };
}

describe('RemotePodSource: etcd records as remote pods of the agent state', () => {
  let etcd: EtcdServer;
  let client: Etcd3;
  let proxy: TcpProxy;
  const stoppers: Array<() => Promise<void>> = [];

  beforeEach(async () => {
    etcd = await EtcdServer.start();
    client = new Etcd3({ hosts: etcd.url });
    proxy = await TcpProxy.start(etcd.clientPort);
  });
  afterEach(async () => {
    for (const s of stoppers.splice(0).reverse()) await s();
    client.close();
    await proxy.stop();
    await etcd.stop();
  });

  async function put(r: IpRecord, ip = r.ips[0]): Promise<void> {
    await client.put(`${PREFIX}${ip}`).value(JSON.stringify(r));
  }

  async function startSource(endpoint = etcd.url): Promise<{ state: ClusterState; source: RemotePodSource }> {
    const state = new ClusterState({ clusterId: 'a', multicluster: true });
    const source = new RemotePodSource({ endpoints: [endpoint], prefix: PREFIX, localClusterId: 'a', backoff: { initialMs: 50, maxMs: 300 }, logger: process.env.KWP_DEBUG ? { debug() {}, info: (o: unknown, m: string) => console.log(m, o), warn: (o: unknown, m: string) => console.log(m, o), error: (o: unknown, m: string) => console.log(m, o) } : undefined });
    await source.start(state);
    stoppers.push(() => source.stop());
    return { state, source };
  }

  it('lists existing records, then follows puts and deletes', async () => {
    await put(record('web', '10.2.0.5'));
    const { state, source } = await startSource();
    await pollUntil(() => source.ready(), 'the first list', 5000);
    const web = state.podByIP('10.2.0.5');
    expect(web).toMatchObject({ name: 'web', namespace: 'frontend', clusterId: 'b' });
    expect(web!.namespaceLabels[CLUSTER_LABEL]).toBe('b');

    await put(record('api', '10.2.0.6'));
    await pollUntil(() => state.podByIP('10.2.0.6'), 'the api pod', 5000);
    await put(record('web', '10.2.0.5', { podLabels: { app: 'web', tier: 'edge' } }));
    await pollUntil(() => state.podByIP('10.2.0.5')?.podLabels.tier === 'edge', 'the relabelled web pod', 5000);
    expect(state.podByIP('10.2.0.5')!.id).toBe(web!.id);
    await client.delete().key(`${PREFIX}10.2.0.5`);
    await pollUntil(() => state.podByIP('10.2.0.5') === undefined, 'the web pod to go', 5000);
  });

  it('folds the keys of a dual-stack pod into one remote pod', async () => {
    const both = record('web', '10.2.0.5', { ips: ['10.2.0.5', 'fd00:2::5'] });
    await put(both, '10.2.0.5');
    await put(both, 'fd00:2::5');
    const { state, source } = await startSource();
    await pollUntil(() => source.ready(), 'the first list', 5000);
    expect(state.podByIP('10.2.0.5')!.id).toBe(state.podByIP('fd00:2::5')!.id);
    await client.delete().key(`${PREFIX}fd00:2::5`);
    await pollUntil(() => state.podByIP('fd00:2::5') === undefined, 'the IPv6 address to go', 5000);
    expect(state.podByIP('10.2.0.5')?.ips).toEqual(['10.2.0.5']);
  });

  it('skips records of its own cluster and records it cannot read', async () => {
    await put(record('self', '10.1.0.9', { clusterId: 'a' }));
    await client.put(`${PREFIX}10.2.0.7`).value('{not json');
    await client.put(`${PREFIX}not-an-ip`).value(JSON.stringify(record('x', '10.2.0.8')));
    await put(record('web', '10.2.0.5'));
    const { state, source } = await startSource();
    await pollUntil(() => source.ready(), 'the first list', 5000);
    expect([...state.pods()].map((p) => p.name)).toEqual(['web']);
  });

  it('keeps the last known pods while etcd is unreachable and resyncs, past a compaction, when it returns', async () => {
    await put(record('web', '10.2.0.5'));
    await put(record('gone', '10.2.0.9'));
    const { state, source } = await startSource(proxy.url);
    await pollUntil(() => source.connected(), 'the watch', 5000);
    const listsBefore = source.listCount();

    await proxy.cut();
    await pollUntil(() => !source.connected(), 'the source to notice', 5000);
    await put(record('new', '10.2.0.10'));
    await client.delete().key(`${PREFIX}10.2.0.9`);
    const revision = (await client.get(`${PREFIX}10.2.0.10`).exec()).header.revision;
    await client.kv.compact({ revision });
    // Unreachable: what was known stays known.
    await new Promise((r) => setTimeout(r, 500));
    expect(state.podByIP('10.2.0.5')?.name).toBe('web');
    expect(state.podByIP('10.2.0.9')?.name).toBe('gone');

    await proxy.restore();
    await pollUntil(() => state.podByIP('10.2.0.10'), 'the pod added while away', 10_000);
    expect(state.podByIP('10.2.0.9')).toBeUndefined();
    expect(state.podByIP('10.2.0.5')?.name).toBe('web');
    expect(source.listCount()).toBeGreaterThan(listsBefore);
  });
});
