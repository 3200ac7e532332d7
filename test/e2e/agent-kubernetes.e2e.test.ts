import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../../host/contract.js';
import { Lab, sweepStaleLabs, type LabProcess } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { ApiServerEmulator } from '../apiserver/emulator.js';
import { writeKubeconfig } from '../apiserver/kubeconfig.js';
import { firstProbe, measureAgainst, mismatches, predict, sleep, REFRESH_SETTLE_MS } from './agent-lab.js';
import { forwardUnixToTcp } from './namespace-bridge.js';

// `kwp agent --kubeconfig FILE` against the API-server emulator: the emulator
// holds the lab's namespaces, node and pods (their real lab IPs) and the
// policies; the agent, in the lab's node namespace, reaches it through a Unix
// socket bridge (the emulator listens on the host's loopback, which the node
// namespace cannot see). What it enforces on real traffic must be what
// `kwp eval` predicts from the emulator's objects, through an added policy, an
// API server outage and a restart.

/** The emulator's address as the agent sees it: the bridge on the node namespace's loopback. */
const BRIDGE_PORT = 16443;
const NP_KIND = 'networking.k8s.io/v1/NetworkPolicy';

let lab: Lab;
let api: ApiServerEmulator;
let bridge: Server | undefined;
let bridgeInNode: LabProcess | undefined;
let agent: KwpAgentHandle | undefined;
let dir: string;

const nsName = (name: string) => ({ matchLabels: { 'kubernetes.io/metadata.name': name } });

/** x/b takes connections from namespace y only. */
const bFromY: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'b-from-y-only', namespace: 'x' },
  spec: { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsName('y') }] }] },
};

/** Namespace z may not open connections into namespace x, whatever x's own policies say. */
const zNotIntoX: KubeObject = {
  apiVersion: 'policy.networking.k8s.io/v1alpha2',
  kind: 'ClusterNetworkPolicy',
  metadata: { name: 'z-not-into-x' },
  spec: { tier: 'Admin', priority: 10, subject: { namespaces: nsName('x') }, ingress: [{ name: 'deny-z', action: 'Deny', from: [{ namespaces: nsName('z') }] }] },
};

/** Added later: pods of y take connections from z only. */
const yFromZ: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'y-from-z-only', namespace: 'y' },
  spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsName('z') }] }] },
};

/** The emulator's objects, with the server's own fields stripped, as `kwp eval` would read them from YAML. */
function emulatorObjects(): KubeObject[] {
  const kinds = ['v1/Namespace', 'v1/Node', 'v1/Pod', NP_KIND, 'policy.networking.k8s.io/v1alpha2/ClusterNetworkPolicy'] as const;
  return kinds.flatMap((kind) => api.list(kind));
}

async function expectEnforcing(title: string): Promise<void> {
  const rows = await measureAgainst(lab, `${title} [queue mode ${agent!.queueMode}]`, await predict(lab, emulatorObjects()));
  expect(rows.some((r) => r.predicted === 'deny')).toBe(true);
  expect(rows.some((r) => r.predicted === 'allow')).toBe(true);
  expect(mismatches(rows)).toEqual([]);
}

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'a', namespace: 'x', labels: { app: 'a' } },
      { name: 'b', namespace: 'x', labels: { app: 'b' } },
      { name: 'c', namespace: 'y', labels: { app: 'c' } },
      { name: 'd', namespace: 'z', labels: { app: 'd' } },
    ],
    namespaceLabels: { x: { team: 'blue' }, y: { team: 'red' } },
  });
  api = await ApiServerEmulator.start();
  for (const object of [...lab.manifests(), bFromY, zNotIntoX]) api.create(object);

  dir = mkdtempSync(join(tmpdir(), 'kwp-agent-kubernetes-'));
  const socket = join(dir, 'apiserver.sock');
  bridge = await forwardUnixToTcp(socket, api.port);
  bridgeInNode = lab.spawnInNode(process.execPath, [...Lab.nodeScript(import.meta.url, './namespace-bridge.js'), String(BRIDGE_PORT), socket]);
  await bridgeInNode.waitForLine((line) => line.includes('"ready"'), 20_000);
  const kubeconfig = await writeKubeconfig({ server: `http://127.0.0.1:${BRIDGE_PORT}`, file: join(dir, 'kubeconfig') });

  agent = await startKwpAgent(lab, { manifests: [], args: [`--kubeconfig=${kubeconfig}`] });
  console.log(`kwp agent --kubeconfig running against the API-server emulator at ${api.url}, dataplane queue mode: ${agent.queueMode}`);
});

afterAll(async () => {
  await agent?.stop();
  await bridgeInNode?.kill();
  await lab?.destroy();
  await new Promise<void>((resolve) => (bridge ? bridge.close(() => resolve()) : resolve()));
  await api?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kwp agent --kubeconfig enforces what the API server holds', () => {
  it('enforces the NetworkPolicy and ClusterNetworkPolicy the emulator holds for the lab pods', async () => {
    // The agent starts before its informers have listed anything; the first sync shows as the denied flow turning denied.
    const synced = await firstProbe(performance.now(), 30_000, () => lab.tcp('x/a', 'x/b', 80, 500), false);
    expect(synced.at).toBeDefined();
    console.log(`first sync enforced ${synced.at} ms after the agent logged its start`);
    // Each kind has its own informer: the NetworkPolicy's deny says nothing of the ClusterNetworkPolicy.
    // Only z-not-into-x denies z/d -> x/a, so wait for that too before comparing the whole matrix.
    const cnpSynced = await firstProbe(performance.now(), 30_000, () => lab.tcp('z/d', 'x/a', 80, 500), false);
    expect(cnpSynced.at).toBeDefined();
    await sleep(REFRESH_SETTLE_MS);
    await expectEnforcing('the emulator\'s initial objects');
    expect((await lab.tcp('z/d', 'x/a', 80, 700)).ok).toBe(false);
  });

  it('applies a NetworkPolicy created in the emulator to real traffic', async () => {
    expect((await lab.tcp('x/a', 'y/c', 80)).ok).toBe(true);
    const createdAt = performance.now();
    api.create(yFromZ);
    const applied = await firstProbe(createdAt, 10_000, () => lab.tcp('x/a', 'y/c', 80, 500), false);
    console.log(`a NetworkPolicy created in the emulator was enforced from ${applied.at} ms (${applied.probes} probes)`);
    expect(applied.at).toBeDefined();
    await sleep(REFRESH_SETTLE_MS);
    await expectEnforcing('after y-from-z-only was created');
  });

  it('keeps enforcing the last known state while the emulator is stopped', async () => {
    const lost = agent!.nextLog('lost sync with the API server', 30_000);
    await api.stop();
    await lost;
    await expectEnforcing('with the emulator stopped');
    expect((await lab.tcp('x/a', 'y/c', 80, 700)).ok).toBe(false);
  });

  it('picks up, after the emulator restarts, a policy removed while it was down', async () => {
    // The emulator's store survives a restart, as etcd would; the deletion is in its history.
    expect(api.remove(NP_KIND, 'y-from-z-only', 'y')).toBe(true);
    const back = agent!.nextLog('API server reachable again', 60_000);
    const restartedAt = performance.now();
    await api.up();
    await back;
    const reopened = await firstProbe(restartedAt, 30_000, () => lab.tcp('x/a', 'y/c', 80, 500), true);
    console.log(`after the restart the deletion was enforced from ${reopened.at} ms (${reopened.probes} probes)`);
    expect(reopened.at).toBeDefined();
    await sleep(REFRESH_SETTLE_MS);
    await expectEnforcing('after the emulator restarted');
  });
});
