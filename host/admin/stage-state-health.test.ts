// /readyz and /metrics say when a stage answers with another state than the
// cluster's because its module cannot hold the current one.
import { describe, it, expect, afterEach } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kinds, type KubeObject } from '../contract.js';
import { stateFromObjects } from '../eval.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { BuiltinModules } from '../pipeline/modules.js';
import { ModuleStore } from '../control/module-store.js';
import { PipelineController } from '../control/pipeline-controller.js';
import { AdminMetrics } from './metrics.js';
import { createAdminServer, type AdminServer } from './server.js';

const policy = (i: number): KubeObject => ({
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: `p-${i}`, namespace: `ns-${i % 200}` },
  spec: { podSelector: { matchLabels: { app: `a-${i}` } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: `r-${i}` } } }], ports: [{ port: 1000 + i }] }] },
});

let server: AdminServer | undefined;
afterEach(async () => { await server?.close(); server = undefined; });

describe('readiness and metrics of a stage that cannot hold the state', () => {
  it('readyz answers 503 naming the stage and its limit, and the metrics mark it stale and rejected', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'kwp-stage-state-'));
    const state = stateFromObjects([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } }]);
    const limits = { maxMemoryPages: 64, memoryPerStateByte: 4, maxStageMemoryPages: 80 };
    const engine = new PolicyEngine({ state, modules: new BuiltinModules(limits) });
    const store = new ModuleStore({ stateDir, validation: 'inline' });
    const controller = new PipelineController({ engine, fallback: { stages: [{ name: 'np', module: 'network-policy' }] }, stateDir, store });
    const metrics = new AdminMetrics({ controller, store, processMetrics: false });
    controller.start();
    server = await createAdminServer({ store, controller, engine, metrics, token: 'test-token-0123456789abcdef0123', port: 0 });
    const app = server.app;
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    let text = await metrics.text();
    expect(text).toMatch(/kwp_stage_state_stale\{stage="np",module="network-policy",reason="none"\} 0/);

    state.replace(Kinds.NetworkPolicy, Array.from({ length: 4000 }, (_, i) => policy(i)));
    const stage = controller.livePipelines()[0].stages[0];
    const started = Date.now();
    while (stage.stateProblem?.kind !== 'rejected') {
      if (Date.now() - started > 120_000) throw new Error('the stage was never rejected');
      await new Promise((r) => setTimeout(r, 20));
    }
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect([res.statusCode, res.json().code]).toEqual([503, 'KWP_ERR_STAGE_STATE_STALE']);
    expect(res.json().message).toMatch(/^GET \/readyz: stage np: module network-policy cannot hold the state .* maxStageMemoryPages = 80.*answering with the last state it held/);
    text = await metrics.text();
    expect(text).toMatch(/kwp_stage_state_stale\{stage="np",module="network-policy",reason="rejected"\} 1/);
    expect(text).toMatch(/kwp_stage_state_rejected\{stage="np",module="network-policy"\} 1/);
    expect(text).toMatch(/kwp_stage_memory_cap_pages\{stage="np",module="network-policy"\} 6\d/);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  }, 180_000);
});

