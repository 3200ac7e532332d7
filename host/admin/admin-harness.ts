// Test support for the admin API suites: a store, a controller and an engine
// over a two-pod cluster in a fresh state directory, behind a real
// createAdminServer. Not used by the agent.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KeyObject } from 'node:crypto';
import type { KubeObject } from '../contract.js';
import { stateFromObjects } from '../eval.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { ChainedModules } from '../pipeline/modules.js';
import type { PipelineSpec } from '../pipeline/spec.js';
import type { SandboxLimits } from '../runtime/limits.js';
import { ModuleStore } from '../control/module-store.js';
import { PipelineController } from '../control/pipeline-controller.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { AdminMetrics } from './metrics.js';
import { createAdminServer, type AdminServer, type AdminServerOptions } from './server.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

const pod = (name: string, ip: string): KubeObject => ({
  apiVersion: 'v1', kind: 'Pod',
  metadata: { name, namespace: 'default', labels: { app: name } },
  spec: { nodeName: 'node-a' },
  status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
});

export const CLUSTER: KubeObject[] = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default', labels: { 'kubernetes.io/metadata.name': 'default' } } },
  pod('a', '10.0.0.1'),
  pod('b', '10.0.0.2'),
];

export const scriptedStage = (name: string, verdict: string, extra: Record<string, unknown> = {}) =>
  ({ name, module: 'scripted', config: { egress: verdict, ingress: verdict, reason: `${name} says ${verdict}`, ...extra } });

export const ALLOW_FIRST: PipelineSpec = { stages: [scriptedStage('allow', 'Accept'), scriptedStage('deny', 'Deny')] };
export const DENY_FIRST: PipelineSpec = { stages: [scriptedStage('deny', 'Deny'), scriptedStage('allow', 'Accept')] };

export interface AdminHarness {
  server: AdminServer;
  store: ModuleStore;
  controller: PipelineController;
  engine: PolicyEngine;
  metrics: AdminMetrics;
  stateDir: string;
}

export interface HarnessOptions extends Partial<Omit<AdminServerOptions, 'store' | 'controller' | 'engine'>> {
  trustedKeys?: KeyObject[];
  limits?: Partial<SandboxLimits>;
  stateDir?: string;
  nfqueueStatsFile?: string;
}

export async function adminHarness(options: HarnessOptions = {}): Promise<AdminHarness> {
  const { trustedKeys, limits, stateDir = mkdtempSync(join(tmpdir(), 'kwp-admin-')), nfqueueStatsFile, ...server } = options;
  const store = new ModuleStore({ stateDir, trustedKeys, limits });
  const engine = new PolicyEngine({ state: stateFromObjects(CLUSTER), modules: new ChainedModules([store, fixtureModules()]) });
  const controller = new PipelineController({ engine, fallback: ALLOW_FIRST, stateDir });
  store.setUsage(() => controller.moduleUsage());
  const metrics = new AdminMetrics({ controller, store, sampleEvery: 1, nfqueueStatsFile, processMetrics: false });
  controller.start();
  const admin = await createAdminServer({ store, controller, engine, metrics, token: ADMIN_TOKEN, port: 0, ...server });
  return { server: admin, store, controller, engine, metrics, stateDir };
}

export const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
