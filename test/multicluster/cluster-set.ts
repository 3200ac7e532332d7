// A flat-network cluster set for tests: two emulated API servers as clusters
// A and B, a real etcd on loopback, a kubeconfig directory naming both, and
// helpers to run an IP tracker and an agent-side view of cluster A.

import { mkdtemp, rm, writeFile, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { Kinds, type KubeObject } from '../../host/contract.js';
import { ClusterState } from '../../host/state/cluster-state.js';
import { KubernetesSource } from '../../host/sources/kubernetes.js';
import { IpTracker, type IpTrackerOptions } from '../../host/multicluster/ip-tracker.js';
import { RemotePodSource } from '../../host/multicluster/remote-pod-source.js';
import { ApiServerEmulator } from '../apiserver/emulator.js';
import { kubeconfigYaml } from '../apiserver/kubeconfig.js';
import { EtcdServer } from './etcd-server.js';

export const PREFIX = '/kwp/ips/';

export function namespace(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

export function pod(ns: string, name: string, ip: string, labels: Record<string, string> = {}, extra: { hostNetwork?: boolean; node?: string } = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels },
    spec: {
      nodeName: extra.node ?? 'node-1',
      hostNetwork: extra.hostNetwork === true,
      containers: [{ name: 'main', image: 'agnhost', ports: [{ name: 'http', containerPort: 80, protocol: 'TCP' }] }],
    },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  };
}

export function node(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels } };
}

export interface ClusterSet {
  etcd: EtcdServer;
  a: ApiServerEmulator;
  b: ApiServerEmulator;
  /** The kubeconfig directory the tracker reads. */
  dir: string;
  fileOf(cluster: 'a' | 'b'): string;
  writeKubeconfig(cluster: 'a' | 'b'): Promise<void>;
  removeKubeconfig(cluster: 'a' | 'b'): Promise<void>;
  /** A tracker over the directory; cluster ids `a` and `b` unless told otherwise. Stopped by `stop()`. */
  tracker(opts?: Partial<IpTrackerOptions>): Promise<IpTracker>;
  /** The prefix as etcd holds it now: key → parsed value. */
  records(): Promise<Map<string, any>>;
  /** Cluster A's agent state: A's objects from its API server, B's pods from etcd. */
  agentA(opts?: { localClusterId?: string }): Promise<{ state: ClusterState; remote: RemotePodSource; local: KubernetesSource }>;
  stop(): Promise<void>;
}

const fastBackoff = { initialMs: 50, maxMs: 500 };

export async function startClusterSet(): Promise<ClusterSet> {
  const etcd = await EtcdServer.start();
  const a = await ApiServerEmulator.start();
  const b = await ApiServerEmulator.start();
  const dir = await mkdtemp(path.join(tmpdir(), 'kwp-clusters-'));
  const stoppers: Array<() => Promise<void>> = [];
  const api = { a, b };
  const client = new Etcd3({ hosts: etcd.url });

  const set: ClusterSet = {
    etcd,
    a,
    b,
    dir,
    fileOf: (c) => path.join(dir, `${c}.kubeconfig`),
    async writeKubeconfig(c) {
      await writeFile(set.fileOf(c), kubeconfigYaml({ server: api[c].url, name: `cluster-${c}` }), { mode: 0o600 });
    },
    async removeKubeconfig(c) {
      await unlink(set.fileOf(c));
    },
    async tracker(opts = {}) {
      const tracker = new IpTracker({
        kubeconfigDir: dir,
        endpoints: [etcd.url],
        prefix: PREFIX,
        clusterIds: new Map([['cluster-a', 'a'], ['cluster-b', 'b']]),
        leaseTtlSeconds: 3,
        directoryPollMs: 100,
        resyncMs: 500,
        coalesceMs: 10,
        backoff: fastBackoff,
        kubernetesBackoff: fastBackoff,
        ...opts,
      });
      await tracker.start();
      stoppers.push(() => tracker.stop());
      return tracker;
    },
    async records() {
      const all = await client.getAll().prefix(PREFIX).strings();
      return new Map(Object.entries(all).map(([k, v]) => [k, JSON.parse(v)]));
    },
    async agentA(opts = {}) {
      const localClusterId = opts.localClusterId ?? 'a';
      const state = new ClusterState({ clusterId: localClusterId, multicluster: true });
      const local = new KubernetesSource({
        kubeConfig: (await import('../../host/multicluster/cluster-watch.js')).loadKubeconfigText('a', kubeconfigYaml({ server: a.url, name: 'cluster-a' })),
        kinds: [Kinds.Namespace, Kinds.Node, Kinds.Pod, Kinds.NetworkPolicy],
        backoff: fastBackoff,
      });
      const remote = new RemotePodSource({ endpoints: [etcd.url], prefix: PREFIX, localClusterId, backoff: fastBackoff });
      await local.start(state);
      await remote.start(state);
      stoppers.push(async () => { await remote.stop(); await local.stop(); });
      return { state, remote, local };
    },
    async stop() {
      for (const s of stoppers.reverse()) await s().catch(() => undefined);
      client.close();
      await a.stop();
      await b.stop();
      await etcd.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return set;
}
