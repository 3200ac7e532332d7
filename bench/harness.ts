// The bench's building blocks: load a synthetic cluster into a ClusterState,
// build pipelines from the shipped evaluators (or the `next` fixture), and time
// decisions through the same entry points the dataplane uses.
import { join } from 'node:path';
import { Kinds, type KubeObject, type Packet } from '../host/contract.js';
import { encodeRecord, RECORD_SIZE } from '../host/abi/record.js';
import { ClusterState } from '../host/state/cluster-state.js';
import { PolicyEngine } from '../host/pipeline/engine.js';
import { BuiltinModules, builtinWasmDir, ChainedModules } from '../host/pipeline/modules.js';
import { defaultPipeline, type PipelineSpec } from '../host/pipeline/spec.js';
import type { Pipeline } from '../host/pipeline/pipeline.js';
import { clusterObjects, policyChange, type SyntheticCluster } from './generator.js';

export const BATCH = 64;

let modules: ChainedModules | undefined;
/** Built-in evaluators, then the test fixtures (where the `next` module lives). */
export function benchModules(): ChainedModules {
  if (!modules) {
    const resolvers = [new BuiltinModules(), new BuiltinModules(undefined, join(builtinWasmDir(), 'fixtures'))];
    // For profiling: modules built with names (asc --debug) shadow the shipped ones.
    const named = process.env.KWP_BENCH_WASM_DIR;
    if (named) resolvers.unshift(new BuiltinModules(undefined, named));
    modules = new ChainedModules(resolvers);
  }
  return modules;
}

export function loadState(cluster: SyntheticCluster): ClusterState {
  const state = new ClusterState();
  for (const [kind, objects] of clusterObjects(cluster)) state.replace(kind, objects);
  return state;
}

/**
 * An engine over `state` in the agent's configuration (host/agent.ts): large
 * states fed in a feed thread (`feedThreads`, AgentConfig's default), so
 * `hotSwap` times the swaps the agent makes. `feedThreads: false` gives the
 * embedder's default, every feed in this thread.
 */
/**
 * The differential tests' change between two rounds, to `cluster` and to
 * `state` alike: a random pod relabelled, a NetworkPolicy added, a
 * ClusterNetworkPolicy deleted (while any is left).
 */
export function changeBetweenRounds(cluster: SyntheticCluster, state: ClusterState, random: () => number, round: number): void {
  const at = Math.floor(random() * cluster.pods.length);
  const pod = cluster.pods[at];
  const relabelled: KubeObject = { ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, tier: ['web', 'api', 'db'][round % 3] } } };
  cluster.pods[at] = relabelled;
  state.apply(Kinds.Pod, { type: 'upsert', object: relabelled });
  state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: policyChange(cluster, round) });
  if (cluster.clusterNetworkPolicies.length > 0) state.apply(Kinds.ClusterNetworkPolicy, { type: 'delete', object: cluster.clusterNetworkPolicies.pop()! });
}

export function engineFor(state: ClusterState, options: { feedThreads?: boolean } = {}): PolicyEngine {
  return new PolicyEngine({ state, modules: benchModules(), feedThreads: options.feedThreads ?? true });
}

/** As many stages as the default pipeline, each answering Next at once. */
export function emptyPipelineSpec(): PipelineSpec {
  return { stages: defaultPipeline().stages.map((s) => ({ name: s.name, label: s.label, module: 'next' })) };
}

/** The default pipeline with every stage's decision cache off: the cost of computing each verdict. */
export function uncachedPipelineSpec(): PipelineSpec {
  return { stages: defaultPipeline().stages.map((s) => ({ ...s, config: { ...(s.config ?? {}), decisionCache: false } })) };
}

/** Hits and misses summed over the stages' decision caches. */
export function cacheCounts(pipeline: Pipeline): { hits: number; misses: number } {
  let hits = 0;
  let misses = 0;
  for (const s of pipeline.stages) {
    const stats = s.decisionCacheStats();
    if (stats) { hits += stats.hits; misses += stats.misses; }
  }
  return { hits, misses };
}

/** The stages of `pipeline` that broke or answered by their failure policy, as "name: traps 3" lines (none when healthy). */
export function stageProblems(pipeline: Pipeline): string[] {
  const problems: string[] = [];
  for (const stage of pipeline.stages) {
    const c = stage.counters;
    const failures = { traps: c.traps, fuelExhausted: c.fuelExhausted, deadlineExceeded: c.deadlineExceeded, unavailable: c.unavailable };
    const seen = Object.entries(failures).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`);
    if (!stage.healthy || seen.length > 0) problems.push(`${stage.name}${stage.healthy ? '' : ' (broken)'}${seen.length ? `: ${seen.join(', ')}` : ''}`);
  }
  return problems;
}

export function allowAllSpec(): PipelineSpec {
  return { stages: [{ name: 'allow-all', module: 'allow-all' }] };
}

/**
 * Rates are per CPU-second of this process (process.cpuUsage, user + system),
 * not per wall-clock second: the machine is shared, and a preempted bench
 * would otherwise report the neighbours' load as its own slowness. The wall
 * rate is kept alongside (`lastWallRate`).
 */
export let lastWallRate = 0;

function rate(count: number, wallStart: number, wallEnd: number, cpu: NodeJS.CpuUsage): number {
  lastWallRate = count / ((wallEnd - wallStart) / 1000);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  return count / cpuSeconds;
}

/** Decides the packets round-robin for about `ms` milliseconds, one `allows` call each. */
export function singleThroughput(pipeline: Pipeline, packets: Packet[], ms: number): number {
  const n = packets.length;
  let decided = 0;
  let sink = 0;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < n; i++) if (pipeline.allows(packets[i])) sink++;
    decided += n;
    now = performance.now();
  }
  if (sink < 0) console.log(sink);
  return rate(decided, start, now, process.cpuUsage(cpu0));
}

/** The same through `allowsBatch`, BATCH packets per call. */
export function batchThroughput(pipeline: Pipeline, packets: Packet[], ms: number): number {
  const n = packets.length - (packets.length % BATCH);
  const out = new Uint8Array(BATCH);
  const batches: Packet[][] = [];
  for (let i = 0; i < n; i += BATCH) batches.push(packets.slice(i, i + BATCH));
  let decided = 0;
  let sink = 0;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (const batch of batches) {
      pipeline.allowsBatch(batch, out);
      sink += out[0];
    }
    decided += n;
    now = performance.now();
  }
  if (sink < 0) console.log(sink);
  return rate(decided, start, now, process.cpuUsage(cpu0));
}

export interface Latency {
  p50Micros: number;
  p99Micros: number;
  samples: number;
}

/** Per-decision latency: process.hrtime.bigint() around each of `samples` single `allows` calls. */
export function singleLatency(pipeline: Pipeline, packets: Packet[], samples: number): Latency {
  const times = new Float64Array(samples);
  const n = packets.length;
  for (let i = 0; i < samples; i++) {
    const p = packets[i % n];
    const t0 = process.hrtime.bigint();
    pipeline.allows(p);
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  return { ...percentiles(times), samples };
}

export function percentiles(values: Float64Array | number[]): { p50Micros: number; p99Micros: number } {
  const sorted = Float64Array.from(values).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  return { p50Micros: round(at(0.5), 3), p99Micros: round(at(0.99), 3) };
}

/** The median and the quartiles of `xs` (not empty), by nearest rank. */
export function quartiles(xs: number[]): { p25: number; median: number; p75: number } {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p25: at(0.25), median: at(0.5), p75: at(0.75) };
}

export function round(v: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

/** The fraction of packets the pipeline allows, by the explained path (a cross-check of the fast paths). */
export function allowedFraction(pipeline: Pipeline, packets: Packet[]): number {
  let allowed = 0;
  for (const p of packets) if (pipeline.allows(p)) allowed++;
  return allowed / packets.length;
}

/** Nanoseconds per packet for what the pipeline does before any module runs: two pod lookups and the record encoding. */
export function encodingNanos(state: ClusterState, packets: Packet[], ms: number): number {
  const rec = new Uint8Array(RECORD_SIZE * BATCH);
  const n = packets.length;
  let done = 0;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < n; i++) {
      const p = packets[i];
      const src = state.podByIP(p.src);
      const dst = state.podByIP(p.dst);
      encodeRecord(rec, (i & (BATCH - 1)) * RECORD_SIZE, p, src ? src.id : 0, dst ? dst.id : 0);
    }
    done += n;
    now = performance.now();
  }
  return 1e9 / rate(done, start, now, process.cpuUsage(cpu0));
}
