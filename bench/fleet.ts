// The fleet at scale, simulated: N lightweight agents in one process, each a
// real FleetNode (its own list+watch of Pipelines through client-node, its own
// NodePipelineStatus writes, over real HTTP) whose pipeline runtime only
// records the change instead of building WASM, against one API-server
// emulator, with the rollout controller running. Per change: how long until
// every node's status reports the new generation (p50/p99 over nodes), and
// the API-server load (requests, watch events, bytes) it took.
import { KubeConfig } from '@kubernetes/client-node';
import { FleetNode } from '../host/fleet/node-agent.js';
import { RolloutController } from '../host/fleet/rollout-controller.js';
import { NODE_PIPELINE_STATUS, PIPELINE, nodeReportOf } from '../host/fleet/objects.js';
import type { NodePipelineRuntime } from '../host/fleet/runtime.js';
import type { PipelineSpec, StageSpec } from '../host/pipeline/spec.js';
import { ApiServerEmulator } from '../test/apiserver/emulator.js';
import { kubeconfigYaml } from '../test/apiserver/kubeconfig.js';
import { fleetEmulatedResources } from '../test/fleet/cluster.js';

export interface FleetBenchResult {
  agents: number;
  changes: number;
  convergenceP50Millis: number;
  convergenceP99Millis: number;
  /** The slowest node of each change, median over changes. */
  convergenceMaxMillis: number;
  apiRequestsPerChange: number;
  watchEventsPerChange: number;
  bytesPerChange: number;
  statusWritesPerChange: number;
  startupMillis: number;
  /** From the change to the rollout controller recording Complete, median over the changes where it did within 30 s. */
  rolloutCompleteMillis: number | null;
  rolloutsCompleted: number;
}

/** A node's pipeline as data only: apply() records the stages and bumps the revision. */
class RecordingRuntime implements NodePipelineRuntime {
  private revision = 1;
  private spec: StageSpec[] = [{ name: 'np', module: 'network-policy' }];
  private since = new Date().toISOString();
  private listeners: Array<() => void> = [];
  active() {
    return { revision: this.revision, since: this.since, spec: this.spec, stages: this.spec.map((s) => ({ name: s.name, module: s.module, sha256: '0'.repeat(64), traps: 0, fuelExhausted: 0, failurePolicyAnswers: 0 })) };
  }
  async apply(spec: PipelineSpec): Promise<number> {
    this.spec = spec.stages;
    this.revision += 1;
    this.since = new Date().toISOString();
    for (const l of this.listeners) l();
    return this.revision;
  }
  onActivation(listener: () => void): void { this.listeners.push(listener); }
  ready(): boolean { return true; }
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

export async function runFleetBench(options: { agents: number; changes: number; log: (m: string) => void }): Promise<FleetBenchResult> {
  const api = await ApiServerEmulator.start({ resources: fleetEmulatedResources(), managedFields: false });
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfigYaml({ server: api.url }));
  const names = Array.from({ length: options.agents }, (_, i) => `sim-node-${String(i).padStart(4, '0')}`);
  for (const n of names) api.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: n, labels: { 'kubernetes.io/hostname': n } } });

  // Every status the server stores: when each node first reported a generation.
  const reportedAt = new Map<number, Map<string, number>>();
  api.onChange = (_type, o) => {
    if (`${o.apiVersion}/${o.kind}` !== NODE_PIPELINE_STATUS.kind) return;
    const g = nodeReportOf(o)?.appliedGeneration;
    if (g === undefined) return;
    let m = reportedAt.get(g);
    if (!m) reportedAt.set(g, (m = new Map()));
    if (!m.has(o.metadata.name)) m.set(o.metadata.name, performance.now());
  };

  const started = performance.now();
  const rollouts = new RolloutController({ kubeConfig: kc, logger: quiet });
  await rollouts.start();
  const nodes = names.map((n) => new FleetNode({ kubeConfig: kc, nodeName: n, runtime: new RecordingRuntime(), logger: quiet, statusIntervalMs: 3_600_000, watchTimeoutSeconds: 3600 }));
  for (const node of nodes) await node.start();
  const waitFor = async (done: () => boolean, what: string, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`fleet bench: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  await waitFor(() => api.list(NODE_PIPELINE_STATUS.kind).length === names.length && api.openWatchCount(PIPELINE.kind) >= names.length, 'every agent to watch and report', 600_000);
  const startupMillis = Math.round(performance.now() - started);
  options.log(`fleet: ${names.length} simulated agents watching and reporting after ${startupMillis} ms`);

  const perNode: number[] = [];
  const slowest: number[] = [];
  const completedMillis: number[] = [];
  const load = { requests: 0, events: 0, bytes: 0, writes: 0 };
  for (let c = 0; c < options.changes; c++) {
    await new Promise((r) => setTimeout(r, 500)); // let the last change's stragglers (controller status) settle
    const before = { requests: api.requests.length, events: api.sent.watchEvents, bytes: api.sent.bytes, writes: api.requests.filter((r) => r.method === 'PUT' && r.path.includes('nodepipelinestatuses')).length };
    const t0 = performance.now();
    const existing = api.get(PIPELINE.kind, 'default');
    const object = { apiVersion: 'kwp.io/v1alpha1', kind: 'Pipeline', metadata: { name: 'default' }, stages: [{ name: 'np', module: 'network-policy', config: { change: c } }] } as never;
    const stored = existing ? api.update({ ...existing, ...(object as object), metadata: existing.metadata } as never) : api.create(object);
    const g = Number(stored.metadata.generation);
    await waitFor(() => (reportedAt.get(g)?.size ?? 0) === names.length, `generation ${g} on every node`, 300_000);
    const times = [...reportedAt.get(g)!.values()].map((t) => t - t0).sort((a, b) => a - b);
    perNode.push(...times);
    slowest.push(times[times.length - 1]);
    // The rollout controller records completion after the last node; count its writes too (bounded: it is not what converges the nodes).
    const complete = () => {
      const r = (api.get(PIPELINE.kind, 'default') as { status?: { rollout?: { generation?: number; phase?: string } } }).status?.rollout;
      return r?.generation === g && r.phase === 'Complete';
    };
    try {
      await waitFor(complete, 'the rollout to complete', 30_000);
      completedMillis.push(performance.now() - t0);
    } catch {
      options.log(`fleet: change ${c + 1}: the rollout controller had not recorded Complete 30 s after the change`);
    }
    load.requests += api.requests.length - before.requests;
    load.events += api.sent.watchEvents - before.events;
    load.bytes += api.sent.bytes - before.bytes;
    load.writes += api.requests.filter((r) => r.method === 'PUT' && r.path.includes('nodepipelinestatuses')).length - before.writes;
    options.log(`fleet: change ${c + 1}: every node reported generation ${g} after ${Math.round(times[times.length - 1])} ms (p50 ${Math.round(pct(times, 50))} ms)`);
  }
  for (const node of nodes) await node.stop();
  await rollouts.stop();
  await api.stop();
  perNode.sort((a, b) => a - b);
  slowest.sort((a, b) => a - b);
  const per = (n: number) => Math.round(n / options.changes);
  return {
    agents: names.length,
    changes: options.changes,
    convergenceP50Millis: Math.round(pct(perNode, 50)),
    convergenceP99Millis: Math.round(pct(perNode, 99)),
    convergenceMaxMillis: Math.round(pct(slowest, 50)),
    apiRequestsPerChange: per(load.requests),
    watchEventsPerChange: per(load.events),
    bytesPerChange: per(load.bytes),
    statusWritesPerChange: per(load.writes),
    startupMillis,
    rolloutCompleteMillis: completedMillis.length ? Math.round(completedMillis.sort((a, b) => a - b)[Math.floor(completedMillis.length / 2)]) : null,
    rolloutsCompleted: completedMillis.length,
  };
}

