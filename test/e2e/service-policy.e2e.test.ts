import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import { BuiltinModules } from '../../host/pipeline/modules.js';
import { defaultPipeline, formatPipelineYAML, type PipelineSpec } from '../../host/pipeline/spec.js';
import type { PredictedFlow } from '../lab/compare.js';
import { Lab, sweepStaleLabs, type HeldConnection } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { firstProbe, measureAgainst, mismatches, sleep, REFRESH_SETTLE_MS } from './agent-lab.js';

// The service-policy example plugin (sdk/examples/service-policy, built to
// dist/wasm/examples/service-policy.wasm) enforcing ServicePolicies between
// Services on real traffic. A pipeline file can only name built-in or stored
// modules, so it goes in the way an operator adds a module: `kwp module push`
// to the agent's admin API, then `kwp pipeline set` with a pipeline file that
// names it first, in front of the built-in stages. The observed matrix must be
// what the same pipeline predicts offline, before and after the swap.

const root = fileURLToPath(new URL('../../', import.meta.url));
const kwp = join(root, 'bin', 'kwp.js');
const examplesDir = join(root, 'dist', 'wasm', 'examples');
const pluginFile = join(examplesDir, 'service-policy.wasm');

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;
let stateDir: string;
let tokenFile: string;
let pipelineFile: string;
const held: HeldConnection[] = [];

const service = (namespace: string, name: string, selector: Record<string, string>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace },
  spec: { selector, ports: [{ port: 80 }] },
});

const servicePolicy = (namespace: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'policy.kwp.example/v1alpha1',
  kind: 'ServicePolicy',
  metadata: { name, namespace },
  spec,
});

const objects: KubeObject[] = [
  service('shop', 'web', { app: 'web' }),
  service('shop', 'admin', { app: 'admin' }),
  service('data', 'db', { app: 'db' }),
  service('data', 'cache', { app: 'cache' }),
  // The web tier reaches the database on postgres and nothing else; admin never; web never reaches admin.
  servicePolicy('shop', 'web-to-db', { priority: 10, action: 'Allow', from: { service: 'web' }, to: { service: 'db', namespace: 'data' }, ports: [{ protocol: 'TCP', port: 'tcp-5432' }] }),
  servicePolicy('shop', 'nothing-else-to-db', { priority: 100, action: 'Deny', from: { service: 'web' }, to: { service: 'db', namespace: 'data' } }),
  servicePolicy('shop', 'admin-not-to-db', { priority: 5, action: 'Deny', from: { service: 'admin' }, to: { service: 'db', namespace: 'data' } }),
  servicePolicy('shop', 'web-not-to-admin', { priority: 20, action: 'Deny', from: { service: 'web' }, to: { service: 'admin' } }),
  // The namespace owners of data let only shop's admin pod in: the ServicePolicies above override both ways.
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'from-shop-admin', namespace: 'data' },
    spec: {
      podSelector: {},
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } }, podSelector: { matchLabels: { app: 'admin' } } }] }],
    },
  },
];

// The agent validates its manifests strictly: a custom kind is known only through
// its CustomResourceDefinition, as a cluster would need it installed.
const servicePolicyCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'servicepolicies.policy.kwp.example' },
  spec: {
    group: 'policy.kwp.example',
    scope: 'Namespaced',
    names: { plural: 'servicepolicies', singular: 'servicepolicy', kind: 'ServicePolicy' },
    versions: [{
      name: 'v1alpha1', served: true, storage: true,
      schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
    }],
  },
};

const withPlugin: PipelineSpec = {
  stages: [{ name: 'service-policy', label: 'SVC', module: 'service-policy' }, ...defaultPipeline().stages],
};

async function predict(pipeline: PipelineSpec): Promise<PredictedFlow[]> {
  const results = await evaluateFlows({
    objects: [...lab.manifests(), ...objects],
    flows: lab.flows(),
    pipeline,
    modules: new BuiltinModules(undefined, examplesDir),
  });
  return results.map((r) => ({ src: r.src, dst: r.dst, protocol: r.protocol as 'TCP' | 'UDP', port: r.port, verdict: r.verdict, walkthrough: r.walkthrough }));
}

const verdict = (predicted: PredictedFlow[], src: string, dst: string, port: number) =>
  predicted.find((p) => p.src === src && p.dst === dst && p.protocol === 'TCP' && p.port === port)?.verdict;

/** `kwp ARGS` inside the node namespace, where the agent's admin API listens on 127.0.0.1:9443. */
async function kwpInNode(args: string[]): Promise<string> {
  try {
    const result = await lab.execInNode(process.execPath, [kwp, ...args, `--token-file=${tokenFile}`]);
    return result.stdout;
  } catch (err) {
    const proc = agent?.process;
    throw new Error(`${(err as Error).message}\nthe agent (exit ${proc?.child.exitCode ?? proc?.child.signalCode ?? 'none: running'}) logged last:\n${proc?.errorLines.slice(-15).join('\n')}`);
  }
}

beforeAll(async () => {
  if (!existsSync(pluginFile)) throw new Error(`${pluginFile} is not built; run \`npm run build\` first`);
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'web-1', namespace: 'shop', labels: { app: 'web' }, tcpPorts: [80] },
      { name: 'admin', namespace: 'shop', labels: { app: 'admin' }, tcpPorts: [80] },
      { name: 'db-1', namespace: 'data', labels: { app: 'db' }, tcpPorts: [80, 5432] },
      { name: 'cache', namespace: 'data', labels: { app: 'cache' }, tcpPorts: [6379] },
    ],
    udpPorts: [],
  });
  dir = mkdtempSync(join(tmpdir(), 'kwp-service-policy-'));
  const manifests = join(dir, 'manifests');
  stateDir = join(dir, 'state');
  tokenFile = join(dir, 'admin.token');
  pipelineFile = join(dir, 'pipeline.yaml');
  await lab.writeManifests(manifests);
  await writeFile(join(manifests, 'services-and-policies.yaml'), [servicePolicyCrd, ...objects].map((o) => stringify(o)).join('---\n'));
  await writeFile(tokenFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  await writeFile(pipelineFile, formatPipelineYAML(withPlugin));
  agent = await startKwpAgent(lab, { manifests: [manifests], args: [`--state-dir=${stateDir}`, `--admin-token-file=${tokenFile}`] });
  console.log(`kwp agent running with its admin API, dataplane queue mode: ${agent.queueMode}`);
});

afterAll(async () => {
  for (const conn of held.splice(0)) await conn.close();
  await agent?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the service-policy plugin in kwp agent, on real traffic', () => {
  it('is not in force before it is pushed: the built-in stages alone decide', async () => {
    const predicted = await predict(defaultPipeline());
    expect(verdict(predicted, 'shop/web-1', 'data/db-1', 5432)).toBe('deny');
    expect(verdict(predicted, 'shop/admin', 'data/db-1', 80)).toBe('allow');
    expect(verdict(predicted, 'shop/web-1', 'shop/admin', 80)).toBe('allow');
    const rows = await measureAgainst(lab, `default pipeline [queue mode ${agent!.queueMode}]`, predicted);
    expect(mismatches(rows)).toEqual([]);
  });

  it('enforces the ServicePolicies once pushed and set in front of the built-ins, cutting a connection it now denies', async () => {
    const established = await lab.hold('shop/admin', 'data/db-1', 80);
    held.push(established);
    expect((await established.send()).ok).toBe(true);

    const pushed = await kwpInNode(['module', 'push', pluginFile]);
    console.log(pushed.trim());
    const setAt = performance.now();
    const set = await kwpInNode(['pipeline', 'set', pipelineFile]);
    console.log(set.trim());
    const cut = await firstProbe(setAt, 3000, () => established.send(300), false);
    console.log(`the established shop/admin -> data/db-1 connection was cut ${cut.at} ms after \`kwp pipeline set\` was started`);
    expect(cut.at).toBeDefined();
    await sleep(REFRESH_SETTLE_MS);

    const predicted = await predict(withPlugin);
    // An Allow over the NetworkPolicy's deny, Denies over its allow and where no NetworkPolicy selects anything.
    expect(verdict(predicted, 'shop/web-1', 'data/db-1', 5432)).toBe('allow');
    expect(verdict(predicted, 'shop/web-1', 'data/db-1', 80)).toBe('deny');
    expect(verdict(predicted, 'shop/admin', 'data/db-1', 80)).toBe('deny');
    expect(verdict(predicted, 'shop/admin', 'data/cache', 6379)).toBe('allow');
    expect(verdict(predicted, 'shop/web-1', 'shop/admin', 80)).toBe('deny');
    const rows = await measureAgainst(lab, `service-policy in front of the built-ins [queue mode ${agent!.queueMode}]`, predicted);
    expect(mismatches(rows)).toEqual([]);
  });

  it('keeps the plugin pipeline after a restart, from the module store and pipeline in its state directory', async () => {
    await agent!.stop();
    agent = await startKwpAgent(lab, { manifests: [join(dir, 'manifests')], args: [`--state-dir=${stateDir}`, `--admin-token-file=${tokenFile}`] });
    await sleep(REFRESH_SETTLE_MS);
    const active = await kwpInNode(['pipeline', 'get']);
    expect(active).toContain('module: service-policy');
    const rows = await measureAgainst(lab, `after a restart [queue mode ${agent.queueMode}]`, await predict(withPlugin));
    expect(mismatches(rows)).toEqual([]);
  });

  it('starts with --pipeline FILE naming the stored module when no pipeline was persisted', async () => {
    await agent!.stop();
    // Without the persisted pipeline the agent builds the configured one, resolving service-policy from its module store.
    rmSync(join(stateDir, 'pipeline.json'));
    agent = await startKwpAgent(lab, { manifests: [join(dir, 'manifests')], args: [`--state-dir=${stateDir}`, `--admin-token-file=${tokenFile}`, `--pipeline=${pipelineFile}`] });
    await sleep(REFRESH_SETTLE_MS);
    const active = await kwpInNode(['pipeline', 'get']);
    expect(active).toContain('# revision 1');
    expect(active).toContain('module: service-policy');
    const rows = await measureAgainst(lab, `started with --pipeline [queue mode ${agent.queueMode}]`, await predict(withPlugin));
    expect(mismatches(rows)).toEqual([]);
  });
});
