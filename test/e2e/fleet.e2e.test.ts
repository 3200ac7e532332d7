// The fleet on real connections: three lab nodes (network namespaces), each
// with its own pods and its own `kwp agent --kubeconfig` enforcing through
// NFQUEUE, all against one API-server emulator; a cluster-level
// `kwp agent --fleet` in the root namespace pushing to a real registry
// (Distribution 2.8) on loopback. The emulator and the registry listen on the
// root namespace's loopback; in each node namespace a bridge (Unix socket,
// test/e2e/namespace-bridge.ts) listens on the same loopback ports, so one
// kubeconfig and one oci:// reference are right everywhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Lab, sweepStaleLabs, type LabProcess } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { builtinWasmDir } from '../../host/pipeline/modules.js';
import { sign } from 'node:crypto';
import { loadPrivateKey, sha256Hex, signModule, signedMessage } from '../../host/control/signature.js';
import { OciClient } from '../../host/fleet/oci.js';
import { EVALUATOR_MODULE, NODE_PIPELINE_STATUS, PIPELINE, formatOciReference, nodeReportOf, type NodeReport } from '../../host/fleet/objects.js';
import { ApiServerEmulator } from '../apiserver/emulator.js';
import { writeKubeconfig } from '../apiserver/kubeconfig.js';
import { pollUntil } from '../apiserver/poll.js';
import { fleetEmulatedResources, nodeReportWhen, rolloutCompleted } from '../fleet/cluster.js';
import { TestRegistry } from '../fleet/registry.js';
import { forwardUnixToTcp } from './namespace-bridge.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const KWP = join(ROOT, 'bin', 'kwp.js');
const TOKEN = 'fleet-e2e-token-0123456789abcdef';
const NODES = ['fleet-node-1', 'fleet-node-2', 'fleet-node-3'];
const denyPortsWasm = join(builtinWasmDir(), 'examples', 'deny-ports.wasm');
const scriptedWasm = join(builtinWasmDir(), 'fixtures', 'scripted.wasm');

interface FleetLab {
  lab: Lab;
  name: string;
  client: string;
  server: string;
  bridges: LabProcess[];
  agent?: KwpAgentHandle;
  stateDir: string;
}

let api: ApiServerEmulator;
let registry: TestRegistry;
let dir: string;
let labs: FleetLab[] = [];
let unixServers: Server[] = [];
let cluster: ChildProcess | undefined;
let clusterLog = '';
let clusterUrl: string;
let kubeconfig: string;

const stages = (extra: object[] = []) => [
  ...extra,
  { name: 'cnp-admin', label: 'CNP:Admin', module: 'cluster-network-policy', config: { tier: 'Admin' } },
  { name: 'np', label: 'NP', module: 'network-policy' },
  { name: 'cnp-baseline', label: 'CNP:Baseline', module: 'cluster-network-policy', config: { tier: 'Baseline' } },
];
const denyPortsStage = (ports: number[]) => ({ name: 'deny-ports', label: 'PORTS', module: 'deny-ports', config: { ports } });

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** The CLI as a child process, asynchronously: the emulator it talks to lives in this process's event loop. */
async function kwp(args: string[]): Promise<string> {
  return (await promisify(execFile)(process.execPath, [KWP, ...args], { env: { ...process.env, KWP_ADMIN_TOKEN: TOKEN }, encoding: 'utf8', timeout: 120_000 })).stdout;
}

/** `kwp pipeline set` of a Pipeline file (the object kubectl would apply) against the cluster-level admin API. */
async function pipelineSet(doc: object): Promise<void> {
  const file = join(dir, `pipeline-${Date.now()}.yaml`);
  writeFileSync(file, stringify({ apiVersion: 'kwp.io/v1alpha1', kind: 'Pipeline', metadata: { name: 'default' }, ...doc }));
  await kwp(['pipeline', 'set', file, '--server', clusterUrl, '--force']);
}

function report(node: string): NodeReport | undefined {
  const o = api.get(NODE_PIPELINE_STATUS.kind, node);
  return o && nodeReportOf(o);
}

const generation = () => Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);

async function converged(nodes: string[], g: number, what: string): Promise<NodeReport[]> {
  return Promise.all(nodes.map((n) => nodeReportWhen(api, n, (r) => r.appliedGeneration === g && r.observedGeneration === g, `to run generation ${g} (${what})`)));
}

async function tcp(l: FleetLab, port: number): Promise<boolean> {
  return (await l.lab.tcp(l.client, l.server, port, 700)).ok;
}

async function startNodeAgent(l: FleetLab): Promise<void> {
  const i = labs.indexOf(l);
  l.agent = await startKwpAgent(l.lab, {
    manifests: [],
    args: [
      `--kubeconfig=${kubeconfig}`, `--state-dir=${l.stateDir}`, `--admin-token-file=${join(dir, 'token')}`, `--trusted-key=${join(dir, 'key.pub')}`,
      '--fleet-status-interval=1', `--table-name=kwp-fleet-${i}`, `--queue-id=${300 + 2 * i}`, `--dns-queue-id=${301 + 2 * i}`, `--mark-bits=${16 + 4 * i}`,
    ],
  });
}

beforeAll(async () => {
  sweepStaleLabs();
  dir = mkdtempSync(join(tmpdir(), 'kwp-fleet-e2e-'));
  writeFileSync(join(dir, 'token'), TOKEN);
  await kwp(['keygen', '--out', join(dir, 'key')]);
  await kwp(['keygen', '--out', join(dir, 'other')]);
  api = await ApiServerEmulator.start({ resources: fleetEmulatedResources() });
  registry = await TestRegistry.start();
  const apiSocket = join(dir, 'apiserver.sock');
  const registrySocket = join(dir, 'registry.sock');
  unixServers = [await forwardUnixToTcp(apiSocket, api.port), await forwardUnixToTcp(registrySocket, registry.port)];
  kubeconfig = await writeKubeconfig({ server: api.url, file: join(dir, 'kubeconfig') });

  for (const [i, name] of NODES.entries()) {
    const lab = await Lab.create({
      nodeName: name, tcpPorts: [80, 81],
      pods: [
        { name: `client-${i + 1}`, namespace: 'x', labels: { app: 'client' }, ip: `10.244.${11 + i}.2` },
        { name: `server-${i + 1}`, namespace: 'y', labels: { app: 'server' }, ip: `10.244.${11 + i}.3` },
      ],
    });
    const bridges = [
      lab.spawnInNode(process.execPath, [...Lab.nodeScript(import.meta.url, './namespace-bridge.js'), String(api.port), apiSocket]),
      lab.spawnInNode(process.execPath, [...Lab.nodeScript(import.meta.url, './namespace-bridge.js'), String(registry.port), registrySocket]),
    ];
    for (const b of bridges) await b.waitForLine((line) => line.includes('"ready"'), 20_000);
    labs.push({ lab, name, client: `x/client-${i + 1}`, server: `y/server-${i + 1}`, bridges, stateDir: mkdtempSync(join(tmpdir(), `kwp-fleet-${name}-`)) });
    for (const o of lab.manifests()) api.apply(o);
  }

  const port = await freePort();
  clusterUrl = `http://127.0.0.1:${port}`;
  cluster = spawn(process.execPath, [KWP, 'agent', '--fleet', `--kubeconfig=${kubeconfig}`, `--registry=${registry.host}/kwp`, '--dataplane=off',
    `--admin-address=127.0.0.1:${port}`, `--admin-token-file=${join(dir, 'token')}`, `--state-dir=${join(dir, 'cluster-state')}`, `--trusted-key=${join(dir, 'key.pub')}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  cluster.stderr!.on('data', (d) => (clusterLog += d));
  await pollUntil(() => clusterLog.includes('"msg":"agent started"'), 'the cluster-level agent to start', 60_000, 100);
  for (const l of labs) await startNodeAgent(l);
  console.log(`three fleet nodes running, queue mode ${labs[0].agent!.queueMode}; registry ${registry.host}; emulator ${api.url}`);
}, 300_000);

afterAll(async () => {
  for (const l of labs) await l.agent?.stop();
  cluster?.kill('SIGTERM');
  for (const l of labs) {
    for (const b of l.bridges) await b.kill();
    await l.lab.destroy();
    rmSync(l.stateDir, { recursive: true, force: true });
  }
  for (const s of unixServers) await new Promise<void>((resolve) => s.close(() => resolve()));
  await api?.stop();
  await registry?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('the fleet: one push reaches every node', () => {
  it('one kwp module push and kwp pipeline set against the cluster-level admin API: every node converges and enforces it', async () => {
    for (const l of labs) expect(await tcp(l, 81), `${l.name} TCP/81 before`).toBe(true);
    await kwp(['module', 'push', denyPortsWasm, '--name', 'deny-ports', '--version', '1.0.0', '--self-test-config', '{"ports":[81]}',
      '--sign-key', join(dir, 'key.key'), '--server', clusterUrl]);
    expect((api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.0') as any).spec.source.oci).toMatch(new RegExp(`^oci://${registry.host}/kwp/deny-ports@sha256:`));
    await pipelineSet({ stages: stages([denyPortsStage([81])]) });
    const reports = await converged(NODES, generation(), 'deny-ports');
    const sha = sha256Hex(readFileSync(denyPortsWasm));
    for (const r of reports) expect(r.stages[0]).toMatchObject({ name: 'deny-ports', sha256: sha });
    // The agents refresh their rules right after a swap; poll for the verdict that follows the new pipeline.
    for (const l of labs) await pollUntil(async () => !(await tcp(l, 81)), `${l.name} to deny TCP/81`, 10_000, 50);
    for (const l of labs) expect(await tcp(l, 80), `${l.name} TCP/80 after`).toBe(true);

    const status = JSON.parse(await kwp(['fleet', 'status', '--kubeconfig', kubeconfig, '-o', 'json']));
    expect(status.nodes.map((n: NodeReport) => n.nodeName)).toEqual(NODES);
    expect(new Set(status.nodes.map((n: NodeReport) => `${n.appliedGeneration}/${n.revision}/${n.stages.map((s) => s.sha256).join(',')}`)).size).toBe(1);
    // The same read through the cluster-level admin API.
    const viaApi = JSON.parse(await kwp(['fleet', 'status', '--server', clusterUrl, '-o', 'json']));
    expect(viaApi.nodes.map((n: NodeReport) => [n.nodeName, n.appliedGeneration])).toEqual(status.nodes.map((n: NodeReport) => [n.nodeName, n.appliedGeneration]));
    const table = await kwp(['fleet', 'status', '--kubeconfig', kubeconfig]);
    console.log(table);
    for (const n of NODES) expect(table).toMatch(new RegExp(`^${n}\\s+default\\s+${generation()}\\s`, 'm'));
  });

  it('a module with a wrong signature, then one with a wrong digest: every node refuses, reports, and keeps enforcing the old pipeline', async () => {
    const bytes = new Uint8Array(readFileSync(scriptedWasm));
    const ref = await new OciClient().push(registry.host, 'kwp/scripted', '1.0.0', bytes, { name: 'scripted', version: '1.0.0' });
    const unsigned = { name: 'scripted', version: '1.0.0', sha256: sha256Hex(bytes), source: { oci: formatOciReference(ref) } };
    // Signed, but with a key the agents do not trust: as `kubectl apply` would create it.
    api.create({ apiVersion: 'kwp.io/v1alpha1', kind: 'EvaluatorModule', metadata: { name: 'scripted.1.0.0' },
      spec: { ...unsigned, signature: signModule(loadPrivateKey(join(dir, 'other.key')), bytes, 'scripted', '1.0.0') } } as never);
    const scriptedStage = { name: 'scripted', module: 'scripted', config: { egress: 'Next', ingress: 'Next' } };
    const p = api.get(PIPELINE.kind, 'default') as any;
    api.update({ ...p, stages: [scriptedStage, ...p.stages] });
    const refused = generation();
    for (const n of NODES) {
      const r = await nodeReportWhen(api, n, (r) => r.lastError?.generation === refused && r.lastError.code === 'KWP_ERR_SIGNATURE_INVALID', `${n} to refuse generation ${refused} for its signature`, 90_000);
      expect(r.lastError!.code).toBe('KWP_ERR_SIGNATURE_INVALID');
      expect(r.appliedGeneration).toBe(refused - 1);
      expect(r.ready).toBe(false);
    }
    for (const l of labs) expect(await tcp(l, 81), `${l.name} still denies TCP/81`).toBe(false);
    const em = api.get(EVALUATOR_MODULE.kind, 'scripted.1.0.0') as any;
    // Properly signed for the sha256 it names, but that is not the sha256 of the bytes in the registry.
    const wrong = 'e'.repeat(64);
    const signature = sign(null, signedMessage(wrong, 'scripted', '1.0.0'), loadPrivateKey(join(dir, 'key.key'))).toString('base64');
    api.update({ ...em, spec: { ...unsigned, sha256: wrong, signature } });
    // A new Pipeline generation, so the nodes try again at once rather than at their backoff.
    const q = api.get(PIPELINE.kind, 'default') as any;
    api.update({ ...q, stages: q.stages.map((s: any) => (s.name === 'scripted' ? { ...s, mode: 'audit' } : s)) });
    const g = generation();
    for (const n of NODES) {
      const r = await nodeReportWhen(api, n, (r) => r.lastError?.generation === g && r.lastError.code === 'KWP_ERR_FLEET_DIGEST_MISMATCH', `${n} to refuse generation ${g} for its digest`, 90_000);
      expect(r.lastError!.code).toBe('KWP_ERR_FLEET_DIGEST_MISMATCH');
      expect(r.appliedGeneration).toBe(refused - 1);
      expect(r.stages.map((s) => s.name)).not.toContain('scripted');
    }
    for (const l of labs) expect(await tcp(l, 81), `${l.name} still denies TCP/81`).toBe(false);
    api.remove(EVALUATOR_MODULE.kind, 'scripted.1.0.0');
  });

  it('a rollout in steps of one node with a module that traps: the first node reports failures, the rollout rolls back by itself, the others never run it', async () => {
    await kwp(['module', 'push', scriptedWasm, '--name', 'scripted', '--version', '1.0.0', '--sign-key', join(dir, 'key.key'), '--server', clusterUrl]);
    const before = generation();
    // Back to a good pipeline first: it completes its rollout and becomes the one a rollback returns to.
    await pipelineSet({ stages: stages([denyPortsStage([81])]) });
    await converged(NODES, before + 1, 'the good pipeline again');
    await rolloutCompleted(api, before + 1, 'the good pipeline', 30_000);
    const trapping = { name: 'scripted', module: 'scripted', config: { egress: 'Next', ingress: 'Next', trapPort: 80 } };
    await pipelineSet({ stages: stages([trapping, denyPortsStage([81])]), rollout: { strategy: 'Steps', step: 1, pauseSeconds: 120, maxFailures: 3 } });
    const bad = generation();
    const [first] = await converged([NODES[0]], bad, 'the first step');
    expect(first.stages[0].name).toBe('scripted');
    // Real connections on the first node go through the trapping stage (fail-closed: denied); the 120 s pause is the window in which the step is judged.
    const lab1 = labs[0];
    // Waits for the rollback's mark, then checks it is the one generation after the failed one: the cluster-level
    // agent follows the rollback without writing the object again (that once made a second generation here).
    await pollUntil(async () => {
      await tcp(lab1, 80);
      return (api.get(PIPELINE.kind, 'default') as any).metadata.annotations?.['kwp.io/rollback-of'] === String(bad);
    }, 'the rollout controller to roll back', 60_000, 100);
    expect(generation()).toBe(bad + 1);
    const pipeline = api.get(PIPELINE.kind, 'default') as any;
    expect(pipeline.metadata.annotations['kwp.io/rollback-of']).toBe(String(bad));
    expect(pipeline.stages.map((s: any) => s.name)).toEqual(['deny-ports', 'cnp-admin', 'np', 'cnp-baseline']);
    const back = await converged(NODES, bad + 1, 'the rollback');
    // The rollback generation completes like any other and stays the object's generation, still marked.
    await rolloutCompleted(api, bad + 1, 'the rollback', 30_000);
    expect(generation()).toBe(bad + 1);
    expect((api.get(PIPELINE.kind, 'default') as any).metadata.annotations['kwp.io/rollback-of']).toBe(String(bad));
    for (const r of back) expect(r.stages.map((s) => s.name)).not.toContain('scripted');
    await pollUntil(async () => tcp(lab1, 80), 'node 1 to allow TCP/80 again', 10_000, 50);
    // Nodes two and three never applied the trapping generation: their logs name every generation they applied.
    for (const l of labs.slice(1)) {
      expect(l.agent!.process.errorLines.filter((line) => line.includes('fleet: pipeline applied') && line.includes(`"generation":${bad},`))).toEqual([]);
    }
    expect(lab1.agent!.process.errorLines.some((line) => line.includes('fleet: pipeline applied') && line.includes(`"generation":${bad},`))).toBe(true);
    console.log((api.get(PIPELINE.kind, 'default') as any).status);
  });

  it('the emulator restarted in the middle of a rollout: the rollout resumes', async () => {
    await pipelineSet({ stages: stages([denyPortsStage([81, 82])]), rollout: { strategy: 'Steps', step: 1, pauseSeconds: 3, maxFailures: 3 } });
    const g = generation();
    await converged([NODES[0]], g, 'the first step');
    expect(report(NODES[2])!.appliedGeneration).toBeLessThan(g);
    await api.restart();
    await converged(NODES, g, 'after the restart');
    await rolloutCompleted(api, g, 'after the restart', 60_000);
  });

  it('the registry stopped: nodes that have the bytes keep running, a new node reports the fetch error', async () => {
    await registry.stop();
    for (const l of labs) expect(await tcp(l, 81), `${l.name} still denies TCP/81`).toBe(false);
    // Node three comes back as a new node: an empty state directory, so it lacks the bytes.
    const l3 = labs[2];
    await l3.agent!.stop();
    rmSync(l3.stateDir, { recursive: true, force: true });
    await startNodeAgent(l3);
    const r = await nodeReportWhen(api, NODES[2], (r) => r.lastError?.code === 'KWP_ERR_FLEET_FETCH', 'the new node to report the fetch error', 60_000);
    // Through the bridge a stopped registry shows as a reset connection.
    expect(r.lastError!.message).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/v2\/kwp\/deny-ports\/manifests\/sha256:[0-9a-f]{64} failed: /);
    for (const l of labs.slice(0, 2)) expect(await tcp(l, 81), `${l.name} still denies TCP/81`).toBe(false);
    await registry.start();
    await converged([NODES[2]], generation(), 'once the registry is back');
  });
});
