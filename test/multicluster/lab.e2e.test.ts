// Multicluster on real connections: one lab node namespace routes the pods of
// clusters A and B flat (one address space, /32 routes). Cluster A's real
// `kwp agent` (compiled, from dist/) runs in the node namespace with A's
// objects as manifests and --ip-tracker-etcd pointing, through a Unix-socket
// bridge, at a real etcd that an IP tracker fills from cluster B's emulated
// API server. Probes go from B's pods to A's pods through NFQUEUE and the
// WASM pipeline.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { Kinds, type KubeObject } from '../../host/contract.js';
import { Lab, sweepStaleLabs, type LabProcess } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { nodeScriptArgs } from '../lab/node-script.js';
import { IpTracker } from '../../host/multicluster/ip-tracker.js';
import { ApiServerEmulator } from '../apiserver/emulator.js';
import { kubeconfigYaml } from '../apiserver/kubeconfig.js';
import { pollUntil } from '../apiserver/poll.js';
import { EtcdServer } from './etcd-server.js';
import { serveUnixToTcp } from './unix-bridge.js';

const SCOPE = 'multicluster.kube-wasm-policies.io/scope';
const BRIDGE_PORT = 23790;
const B_PODS = ['frontend/b-web', 'other/b-other', 'frontend/b-late'];
let lateB: KubeObject;

let lab: Lab;
let etcd: EtcdServer;
let clusterB: ApiServerEmulator;
let tracker: IpTracker;
let agent: KwpAgentHandle | undefined;
let bridge: LabProcess | undefined;
let unixServer: Server | undefined;
let dir: string;
const tempDirs: string[] = [];

function policy(annotations?: Record<string, string>): KubeObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'db-from-frontend', namespace: 'backend', ...(annotations ? { annotations } : {}) },
    spec: {
      podSelector: { matchLabels: { app: 'db' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }] }],
    },
  };
}

async function writePolicy(p: KubeObject): Promise<void> {
  await writeFile(path.join(dir, 'policy.yaml'), stringify(p));
}

beforeAll(async () => {
  sweepStaleLabs();
  dir = await mkdtemp(path.join(tmpdir(), 'kwp-mc-lab-'));
  tempDirs.push(dir);
  lab = await Lab.create({
    pods: [
      { name: 'db', namespace: 'backend', labels: { app: 'db' } },
      { name: 'a-web', namespace: 'frontend', labels: { app: 'web' } },
      { name: 'b-web', namespace: 'frontend', labels: { app: 'web' } },
      { name: 'b-other', namespace: 'other', labels: { app: 'web' } },
      // Wired in the lab from the start, created in cluster B only later.
      { name: 'b-late', namespace: 'frontend', labels: { app: 'web' } },
    ],
  });
  const objects = lab.manifests();
  const isB = (o: KubeObject) => o.kind === 'Pod' && B_PODS.includes(`${o.metadata.namespace}/${o.metadata.name}`);
  const aObjects = objects.filter((o) => !isB(o) && !(o.kind === 'Namespace' && o.metadata.name === 'other'));

  // Cluster B: its pods, with the lab's addresses, behind an emulated API server.
  clusterB = await ApiServerEmulator.start();
  for (const o of objects) if (o.kind === 'Namespace' && ['frontend', 'other'].includes(o.metadata.name)) clusterB.create(o);
  for (const o of objects.filter(isB)) {
    const forB = { ...o, metadata: { ...o.metadata, uid: undefined } };
    if (o.metadata.name === 'b-late') lateB = forB;
    else clusterB.create(forB);
  }

  etcd = await EtcdServer.start();
  const clustersDir = await mkdtemp(path.join(tmpdir(), 'kwp-mc-clusters-'));
  tempDirs.push(clustersDir);
  await writeFile(path.join(clustersDir, 'b'), kubeconfigYaml({ server: clusterB.url, name: 'cluster-b' }));
  tracker = new IpTracker({ kubeconfigDir: clustersDir, endpoints: [etcd.url], clusterIds: new Map([['cluster-b', 'b']]), leaseTtlSeconds: 5, directoryPollMs: 200 });
  await tracker.start();
  await tracker.flushed();

  // etcd, as seen from the node namespace: 127.0.0.1:BRIDGE_PORT.
  const socket = path.join(dir, 'etcd.sock');
  unixServer = await serveUnixToTcp(socket, etcd.clientPort);
  bridge = lab.spawnInNode(process.execPath, [...nodeScriptArgs(import.meta.url, './unix-bridge.js'), 'listen', String(BRIDGE_PORT), socket]);
  await bridge.waitForLine((l) => l.includes('"ready"') || l.includes('"fatal"'), 20_000);

  const manifests = path.join(dir, 'cluster-a');
  await mkdir(manifests);
  await writeFile(path.join(manifests, 'cluster.yaml'), aObjects.map((o) => stringify(o)).join('---\n'));
  dir = manifests;
  await writePolicy(policy());
  agent = await startKwpAgent(lab, {
    manifests: [manifests],
    args: [`--ip-tracker-etcd=http://127.0.0.1:${BRIDGE_PORT}`, '--cluster-id=a', '--admin-address=off'],
  });
  await pollUntil(() => agent!.process.errorLines.some((l) => l.includes('remote pods listed')), 'the agent to list the remote pods', 30_000, 100);
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  await bridge?.kill('SIGKILL');
  unixServer?.close();
  await tracker?.stop();
  await lab?.destroy();
  await clusterB?.stop();
  await etcd?.stop();
  for (const d of tempDirs) await rm(d, { recursive: true, force: true });
});

async function reachable(from: string, to: string): Promise<boolean> {
  return (await lab.tcp(from, to, 80, 1500)).ok;
}

describe('multicluster NetworkPolicy on real connections (flat-routed pods of clusters A and B)', () => {
  it('admits B frontend pods to A\'s db under a cross-cluster policy and refuses B pods of other namespaces', async () => {
    expect(await reachable('frontend/a-web', 'backend/db')).toBe(true);
    expect(await reachable('frontend/b-web', 'backend/db')).toBe(true);
    expect(await reachable('other/b-other', 'backend/db')).toBe(false);
  });

  it('refuses B frontend pods once the policy is scoped cluster-local, still admitting A frontend pods', async () => {
    const reloaded = agent!.nextLog('manifests reloaded', 30_000);
    await writePolicy(policy({ [SCOPE]: 'cluster-local' }));
    await reloaded;
    // The dataplane refreshes shortly after the reload: wait for the deny the scoped policy gives, however long a loaded machine takes.
    await pollUntil(async () => !(await reachable('frontend/b-web', 'backend/db')), 'b-web to be refused under the cluster-local policy', 20_000, 200);
    expect(await reachable('frontend/b-web', 'backend/db')).toBe(false);
    expect(await reachable('frontend/a-web', 'backend/db')).toBe(true);
    const back = agent!.nextLog('manifests reloaded', 30_000);
    await writePolicy(policy());
    await back;
    await pollUntil(() => reachable('frontend/b-web', 'backend/db'), 'b-web to be admitted again under the cluster-set policy', 20_000, 200);
    expect(await reachable('frontend/b-web', 'backend/db')).toBe(true);
  });

  it('keeps connections and verdicts flowing while etcd is down, and admits a B pod created meanwhile once etcd is back', async () => {
    const held = await lab.hold('frontend/b-web', 'backend/db', 80);
    expect((await held.send()).ok).toBe(true);
    expect(await reachable('frontend/b-late', 'backend/db')).toBe(false);
    await etcd.pause();
    clusterB.create(lateB);
    for (let i = 0; i < 3; i++) {
      expect((await held.send()).ok).toBe(true);
      expect(await reachable('frontend/b-web', 'backend/db')).toBe(true);
      expect(await reachable('other/b-other', 'backend/db')).toBe(false);
      expect(await reachable('frontend/b-late', 'backend/db')).toBe(false);
    }
    await etcd.resume();
    const back = Date.now();
    await pollUntil(() => reachable('frontend/b-late', 'backend/db'), 'b-late to be admitted after etcd returned', 30_000, 200);
    console.log(`b-late admitted ${Date.now() - back} ms after etcd was healthy again`);
    expect((await held.send()).ok).toBe(true);
    await held.close();
  });

  it('cuts a B pod off once it is deleted from cluster B and its record leaves etcd', async () => {
    clusterB.remove(Kinds.Pod, 'b-web', 'frontend');
    await pollUntil(async () => !(await reachable('frontend/b-web', 'backend/db')), 'b-web to lose access', 20_000, 200);
    expect(await reachable('frontend/a-web', 'backend/db')).toBe(true);
  });
});
