// The fleet in one process: a cluster-level agent (--fleet) and two node
// agents (no dataplane) against the API-server emulator over real HTTP, with
// a real registry. The netns suite (test/e2e/fleet.e2e.test.ts) does the same
// with real connections; this one checks the control plane quickly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../agent.js';
import { AdminClient } from '../admin/client.js';
import { createLogger } from '../log.js';
import { Writable } from 'node:stream';
import { builtinWasmDir } from '../pipeline/modules.js';
import { sha256Hex } from '../control/signature.js';
import { ApiServerEmulator } from '../../test/apiserver/emulator.js';
import { node as nodeObject } from '../../test/apiserver/fixtures.js';
import { writeKubeconfig } from '../../test/apiserver/kubeconfig.js';
import { pollUntil } from '../../test/apiserver/poll.js';
import { TestRegistry } from '../../test/fleet/registry.js';
import { fleetEmulatedResources, nodeReportWhen, rolloutCompleted } from '../../test/fleet/cluster.js';
import { EVALUATOR_MODULE, NODE_PIPELINE_STATUS, PIPELINE, nodeReportOf, type NodeReport } from './objects.js';

const TOKEN = 'fleet-test-token-0123456789abcdef';
const denyPorts = readFileSync(join(builtinWasmDir(), 'examples', 'deny-ports.wasm'));
const portsFirst = readFileSync(new URL('../../examples/admin/ports-first.yaml', import.meta.url), 'utf8');

let api: ApiServerEmulator;
let registry: TestRegistry;
let dir: string;
const agents: Agent[] = [];
let cluster: Agent;
let client: AdminClient;

async function startAgent(name: string, extra: Partial<ConstructorParameters<typeof Agent>[0]>): Promise<Agent> {
  const kubeconfig = await writeKubeconfig({ server: api.url, file: join(dir, `${name}.kubeconfig`) });
  const agent = new Agent({
    kubeconfig, nodeName: name, dataplane: false, stateDir: join(dir, name), adminAddress: '127.0.0.1:0', adminTokenFile: join(dir, 'token'),
    logger: createLogger(0, process.env.KWP_TEST_LOG ? process.stderr : new Writable({ write: (_c, _e, done) => done() })), fleet: { mode: 'node', statusIntervalMs: 300 }, ...extra,
  });
  await agent.start();
  agents.push(agent);
  return agent;
}

function report(name: string): NodeReport | undefined {
  const o = api.get(NODE_PIPELINE_STATUS.kind, name);
  return o && nodeReportOf(o);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-fleet-test-'));
  writeFileSync(join(dir, 'token'), TOKEN);
  api = await ApiServerEmulator.start({ resources: fleetEmulatedResources() });
  for (const n of ['node-a', 'node-b']) api.create(nodeObject(n));
  registry = await TestRegistry.start();
  cluster = await startAgent('cluster', { fleet: { mode: 'cluster', registry: `${registry.host}/kwp` } });
  client = new AdminClient(cluster.adminUrl!, TOKEN);
  await startAgent('node-a', {});
  await startAgent('node-b', {});
}, 120_000);

afterAll(async () => {
  for (const a of agents) await a.stop();
  await api?.stop();
  await registry?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the fleet over the API-server emulator and a real registry', { timeout: 400_000 }, () => {
  it('one push and one pipeline set through the cluster-level admin API reach every node', async () => {
    const pushed = await client.pushModule(denyPorts, { name: 'deny-ports', version: '1.0.0', selfTestConfig: { ports: [81] } });
    const em = api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.0') as any;
    expect(em.spec).toMatchObject({ name: 'deny-ports', version: '1.0.0', sha256: sha256Hex(denyPorts) });
    expect(em.spec.source.oci).toMatch(new RegExp(`^oci://${registry.host}/kwp/deny-ports@sha256:[0-9a-f]{64}$`));
    expect(pushed.module.sha256).toBe(sha256Hex(denyPorts));

    const { parse } = await import('yaml');
    await client.setPipeline(parse(portsFirst));
    const generation = Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);
    for (const n of ['node-a', 'node-b']) {
      const r = await nodeReportWhen(api, n, (r) => r.appliedGeneration === generation, `${n} to run generation ${generation}`, 150_000);
      expect(r.stages[0]).toMatchObject({ name: 'deny-ports', module: 'deny-ports@1.0.0', sha256: sha256Hex(denyPorts) });
      expect(r).toMatchObject({ ready: true, localOverride: false, pipeline: 'default' });
      expect(r.lastError).toBeUndefined();
    }
    for (const a of agents.slice(1)) expect(a.controller!.get().stages[0].module).toBe('deny-ports@1.0.0');
    // The rollout controller (in the cluster-level agent) records that every node runs it.
    await rolloutCompleted(api, generation, 'one push', 30_000);
    expect((api.get(PIPELINE.kind, 'default') as any).status.stable.generation).toBe(generation);
    // Reads on the cluster-level admin API show the fleet: what kwp fleet status --server prints.
    const fleet = await client.fleetStatus();
    expect(fleet.pipelines).toEqual([{ name: 'default', generation, rollout: expect.objectContaining({ generation, phase: 'Complete', admittedCount: 2, admittedThrough: 'node-b' }) }]);
    expect(fleet.nodes.map((n) => [n.nodeName, n.appliedGeneration])).toEqual([['node-a', generation], ['node-b', generation]]);
    // A node's own admin API knows only itself.
    expect(await new AdminClient(agents[1].adminUrl!, TOKEN).fleetStatus().catch((err) => err.code)).toBe('KWP_ERR_ROUTE_NOT_FOUND');
  });

  it('a module whose sha256 does not match its bytes is refused by every node, which keeps its pipeline', async () => {
    const good = api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.0') as any;
    api.create({ ...good, metadata: { name: 'deny-ports.1.0.1' }, spec: { ...good.spec, version: '1.0.1', sha256: 'f'.repeat(64) } });
    const before = agents.slice(1).map((a) => a.controller!.revision);
    const p = api.get(PIPELINE.kind, 'default') as any;
    api.update({ ...p, stages: p.stages.map((s: any) => (s.name === 'deny-ports' ? { ...s, module: 'deny-ports@1.0.1' } : s)) });
    const generation = Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);
    for (const n of ['node-a', 'node-b']) {
      const r = await nodeReportWhen(api, n, (r) => r.lastError?.generation === generation && r.lastError.code === 'KWP_ERR_FLEET_DIGEST_MISMATCH', `${n} to report generation ${generation} refused for its digest`, 150_000);
      expect(r.lastError!.code).toBe('KWP_ERR_FLEET_DIGEST_MISMATCH');
      expect(r.lastError!.message).toMatch(/EvaluatorModule deny-ports\.1\.0\.1/);
      expect(r.ready).toBe(false);
      expect(r.appliedGeneration).toBe(generation - 1);
    }
    expect(agents.slice(1).map((a) => a.controller!.revision)).toEqual(before);
  });

  it('a node changed through its own admin API reports a local override until the cluster object changes', async () => {
    const nodeA = agents[1];
    const local = new AdminClient(nodeA.adminUrl!, TOKEN);
    await local.setPipeline({ stages: [{ name: 'np', module: 'network-policy' }] });
    await pollUntil(() => report('node-a')?.localOverride === true, 'node-a to report a local override', 150_000);
    const p = api.get(PIPELINE.kind, 'default') as any;
    api.update({ ...p, stages: p.stages.filter((s: any) => s.name !== 'deny-ports') });
    const generation = Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);
    const r = await nodeReportWhen(api, 'node-a', (r) => r.appliedGeneration === generation, 'node-a to follow the cluster again', 150_000);
    expect(r.localOverride).toBe(false);
    expect(r.stages.map((s) => s.name)).toEqual(['cnp-admin', 'anp', 'np', 'banp', 'cnp-baseline']);
  });

  it('the cluster-level agent follows a Pipeline written around it (kubectl, an automatic rollback) without writing it back', async () => {
    const p = api.get(PIPELINE.kind, 'default') as any;
    const rollout = { strategy: 'Steps', step: 1, pauseSeconds: 0, maxFailures: 3 };
    const target = { nodeSelector: { matchLabels: {} } };
    api.update({ ...p, metadata: { ...p.metadata, annotations: { 'kwp.io/rollback-of': '1' } }, stages: p.stages.filter((s: any) => s.name !== 'anp'), rollout, target });
    const generation = Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);
    // At or past it: an agent that wrote the object back would have made a newer generation, and the assertions below say so.
    await pollUntil(() => (cluster.fleet!.report()?.appliedGeneration ?? 0) >= generation, `the cluster-level agent to run generation ${generation}`, 150_000);
    expect(cluster.fleet!.report()!.appliedGeneration).toBe(generation);
    expect(cluster.controller!.get().stages.map((s) => s.name)).toEqual(['cnp-admin', 'np', 'banp', 'cnp-baseline']);
    const now = api.get(PIPELINE.kind, 'default') as any;
    expect(Number(now.metadata.generation)).toBe(generation);
    expect(now).toMatchObject({ rollout, target, metadata: { annotations: { 'kwp.io/rollback-of': '1' } } });
  });

  it('DELETE /v1/modules on the cluster-level admin API is refused while a Pipeline names the module, and then deletes its EvaluatorModules', async () => {
    // Until the current generation completes, the stable stages (with deny-ports) are what a rollback would write back.
    const current = Number(api.get(PIPELINE.kind, 'default')!.metadata.generation);
    await rolloutCompleted(api, current, 'before the delete', 150_000);
    // A Pipeline this agent does not follow (it targets no node), so only the cluster-wide check can see the module is needed.
    api.create({ apiVersion: 'kwp.io/v1alpha1', kind: 'Pipeline', metadata: { name: 'edge' }, target: { nodeSelector: { matchLabels: { 'kwp.io/pool': 'none' } } },
      stages: [{ name: 'deny-ports', module: 'deny-ports@1.0.0', config: { ports: [81] } }] } as never);
    const refused = await client.removeModule('deny-ports').catch((err) => err);
    expect(refused.code).toBe('KWP_ERR_MODULE_IN_USE');
    expect(refused.message).toMatch(/stage deny-ports \(deny-ports@1\.0\.0\) of Pipeline edge/);
    expect(api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.0')).toBeDefined();
    expect((await client.listModules()).map((m) => m.name)).toContain('deny-ports');

    api.remove(PIPELINE.kind, 'edge');
    const removed = await client.removeModule('deny-ports');
    expect(removed.map((m) => m.version).sort()).toEqual(['1.0.0', '1.0.1']);
    expect(api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.0')).toBeUndefined();
    expect(api.get(EVALUATOR_MODULE.kind, 'deny-ports.1.0.1')).toBeUndefined();
    expect((await client.listModules()).map((m) => m.name)).not.toContain('deny-ports');
  });
});
