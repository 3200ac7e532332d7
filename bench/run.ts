// `npm run bench [-- --quick] [-- --no-e2e] [-- --only=pipeline,scaling,fleet,...] [-- --merge]`:
// measures the decision path (in process, WASM pipeline over synthetic
// clusters) and the packet path (NFQUEUE through a netns lab), writes
// bench/results/latest.json and prints a table. docs/performance.md says
// what every figure means and how it is measured.
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kinds, type Packet } from '../host/contract.js';
import { defaultPipeline, type PipelineSpec } from '../host/pipeline/spec.js';
import type { Pipeline } from '../host/pipeline/pipeline.js';
import { PolicyEngine } from '../host/pipeline/engine.js';
import { SCALES, generateCluster, generateFlows, policyChange, type Scale } from './generator.js';
import {
  allowedFraction, batchThroughput, benchModules, lastWallRate, emptyPipelineSpec, encodingNanos, engineFor, loadState, percentiles, quartiles, round, singleLatency, singleThroughput,
  stageProblems, uncachedPipelineSpec, type Latency,
} from './harness.js';
import type { PipelineLoop, ScaleName } from './pipeline-child.js';
import { runE2E, type E2EResult } from './e2e.js';
import { runStrictCutBench } from './e2e-strict-cut.js';
import { runFleetBench } from './fleet.js';
import { REFERENCE, TARGETS, formatTable } from './report.js';
import { FlowRecorder } from '../host/flow-records/flow-recorder.js';
import { AGENT_MALLOC_ENV, AGENT_NODE_FLAGS } from '../host/agent-node-flags.js';
import { gcWithin, recordGcPauses } from './gc-attribution.js';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root: dist/bench/run.js → ../.. */
const root = join(here, '..', '..');

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const noE2E = argv.includes('--no-e2e');
const onlyArg = argv.find((a) => a.startsWith('--only='));
const only = onlyArg ? new Set(onlyArg.slice('--only='.length).split(',')) : undefined;
const wanted = (section: string) => !only || only.has(section);
/** Keep the other sections of the existing results file and replace only those measured now (with --only). */
const merge = argv.includes('--merge');

const settings = quick
  ? { flows: 4096, measureMs: 300, latencySamples: 20_000, updateRounds: 20, swaps: 4, e2eConnections: 500, e2eRounds: 1 }
  : { flows: 8192, measureMs: 2000, latencySamples: 200_000, updateRounds: 100, swaps: 8, e2eConnections: 2000, e2eRounds: 3 };

function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

async function timedAsync<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const value = await fn();
  log(`${what}: ${Math.round(performance.now() - t0)} ms`);
  return value;
}

function timed<T>(what: string, fn: () => T): T {
  const t0 = performance.now();
  const value = fn();
  log(`${what}: ${Math.round(performance.now() - t0)} ms`);
  return value;
}

interface Setup {
  scale: Scale;
  engine: PolicyEngine;
  pipeline: Pipeline;
  packets: Packet[];
  cluster: ReturnType<typeof generateCluster>;
}

function setUp(scale: Scale): Setup {
  const cluster = timed(`${scale.name}: generate`, () => generateCluster(scale));
  const flows = generateFlows(cluster, settings.flows);
  const state = timed(`${scale.name}: load state`, () => loadState(cluster));
  const engine = engineFor(state);
  const pipeline = timed(`${scale.name}: build default pipeline`, () => engine.build(defaultPipeline()));
  engine.activate(pipeline);
  return { scale, engine, pipeline, packets: flows.packets, cluster };
}

/**
 * Throws when a stage of the setup's active pipeline broke or answered by its
 * failure policy during `section`: from then on it answers without calling its
 * module, so every figure measured after would be the failure policy's speed,
 * not the pipeline's (a flows run once measured a broken np stage unnoticed).
 */
function assertStagesHealthy(setup: Setup, section: string): void {
  const problems = stageProblems(setup.engine.active);
  if (problems.length > 0) {
    throw new Error(`${setup.scale.name} scale, after the ${section} section: ${problems.join('; ')}; its figures would measure the failure policy, not the pipeline`);
  }
}

/**
 * Throughput per CPU-second after a warm-up, best of two measurements (the
 * machine is shared; the best is the least disturbed).
 */
function throughput(fn: (ms: number) => number, ms = settings.measureMs): number {
  fn(Math.min(500, ms));
  return Math.max(fn(ms), fn(ms));
}

/** A pipeline loop's own process (bench/pipeline-child.ts) over one scale, asked for one measurement at a time. */
class LoopProcess {
  private readonly child: ChildProcess;
  private readonly replies: Array<(m: unknown) => void> = [];
  private exited?: Error;
  readonly ready: Promise<unknown>;

  constructor(readonly loop: PipelineLoop, readonly scale: ScaleName = 'default') {
    this.child = fork(join(here, 'pipeline-child.js'), [loop, String(settings.flows), scale], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m) => this.replies.shift()?.(m));
    this.ready = this.reply();
    this.child.on('exit', (code) => {
      this.exited = new Error(`the ${scale} scale's ${loop} process exited with ${code}`);
      for (const r of this.replies.splice(0)) r(this.exited);
    });
  }

  private reply<T>(): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.exited) return reject(this.exited);
      this.replies.push((m) => (m instanceof Error ? reject(m) : resolve(m as T)));
    });
  }

  ask<T>(request: object): Promise<T> {
    const answer = this.reply<T>();
    this.child.send(request);
    return answer;
  }

  stop(): void {
    if (!this.exited) this.child.send({ exit: true });
  }
}

async function pipelineSection(setup: Setup) {
  const { engine, pipeline, packets } = setup;
  const uncached = timed('default: build pipeline without decision caches', () => engine.build(uncachedPipelineSpec()));
  const fraction = allowedFraction(pipeline, packets);
  // The batched path must agree with the one-packet path on every packet.
  const out = new Uint8Array(packets.length);
  pipeline.allowsBatch(packets, out);
  let mismatches = 0;
  for (let i = 0; i < packets.length; i++) if ((out[i] === 1) !== pipeline.allows(packets[i])) mismatches++;
  if (mismatches) throw new Error(`allowsBatch disagrees with allows on ${mismatches} of ${packets.length} packets`);
  // The decision caches must not change a single verdict.
  const computed = new Uint8Array(packets.length);
  uncached.allowsBatch(packets, computed);
  for (let i = 0; i < packets.length; i++) if (computed[i] !== out[i]) mismatches++;
  if (mismatches) throw new Error(`the pipeline without decision caches disagrees on ${mismatches} of ${packets.length} packets`);
  uncached.dispose();

  // Each loop runs in a process of its own (bench/pipeline-child.ts: in one
  // process the loops were timed with code V8 optimised for all of them), and
  // the loops take turns for three rounds, each keeping its best: a
  // disturbance (the machine is a shared VM) then hits a round, not a figure.
  const order: PipelineLoop[] = ['batch', 'batchEmpty', 'single', 'singleEmpty', 'batchUncached'];
  const processes = order.map((loop) => new LoopProcess(loop));
  try {
    await timedAsync('default: five loop processes set up', () => Promise.all(processes.map((p) => p.ready)));
    const measure = (p: LoopProcess) => p.ask<{ rate: number; wallRate: number }>({ measure: settings.measureMs });
    for (const p of processes) await measure(p);
    const counts = () => processes[0].ask<{ hits: number; misses: number }>({ counts: true });
    const before = await counts();
    const best = order.map(() => 0);
    let decisionsPerWallSec = 0;
    for (let round = 0; round < 3; round++) {
      for (const [i, p] of processes.entries()) {
        const { rate, wallRate } = await measure(p);
        if (rate > best[i]) {
          best[i] = rate;
          if (i === 0) decisionsPerWallSec = wallRate;
        }
      }
    }
    const after = await counts();
    const [decisionsPerSec, emptyDecisionsPerSec, singleDecisionsPerSec, singleEmptyDecisionsPerSec, uncachedDecisionsPerSec] = best;
    const latency = await processes[2].ask<Latency>({ latency: settings.latencySamples });
    const lookups = after.hits - before.hits + after.misses - before.misses;
    return {
      decisionsPerSec: Math.round(decisionsPerSec),
      decisionsPerWallSec: Math.round(decisionsPerWallSec),
      p50Micros: latency.p50Micros,
      p99Micros: latency.p99Micros,
      emptyDecisionsPerSec: Math.round(emptyDecisionsPerSec),
      ratioToEmpty: round(decisionsPerSec / emptyDecisionsPerSec, 3),
      singleDecisionsPerSec: Math.round(singleDecisionsPerSec),
      singleEmptyDecisionsPerSec: Math.round(singleEmptyDecisionsPerSec),
      singleRatioToEmpty: round(singleDecisionsPerSec / singleEmptyDecisionsPerSec, 3),
      uncachedDecisionsPerSec: Math.round(uncachedDecisionsPerSec),
      uncachedRatioToEmpty: round(uncachedDecisionsPerSec / emptyDecisionsPerSec, 3),
      decisionCacheHitRate: lookups > 0 ? round((after.hits - before.hits) / lookups, 4) : 0,
      latencySamples: latency.samples,
      allowedFraction: round(fraction, 3),
      packets: packets.length,
      stages: pipeline.stages.length,
      loopsInOwnProcesses: true,
    };
  } finally {
    for (const p of processes) p.stop();
  }
}

/**
 * The wall-clock backstop's price: the default pipeline with its instances in
 * the main thread (as `kwp eval` runs it) and with each instance in a thread
 * of its own (as the agent runs it), on the same state and packets, measured
 * in alternating rounds so that both see the same machine. Rates are per
 * CPU-second of the whole process (every thread's CPU), and per wall second.
 */
async function isolationSection(setup: Setup) {
  const { engine, pipeline, packets } = setup;
  const rssBefore = process.memoryUsage().rss;
  const isolatedEngine = new PolicyEngine({ state: engine.state, modules: benchModules(), isolation: 'worker' });
  // As the agent builds: asynchronously, each feeding call awaited in the instance's thread (feedDeadlineMs).
  const t0 = performance.now();
  const isolated = await isolatedEngine.buildAsync(defaultPipeline());
  log(`default: build pipeline with isolated instances (buildAsync): ${Math.round(performance.now() - t0)} ms`);
  const rssAfter = process.memoryUsage().rss;
  const out = new Uint8Array(packets.length);
  const isolatedOut = new Uint8Array(packets.length);
  pipeline.allowsBatch(packets, out);
  isolated.allowsBatch(packets, isolatedOut);
  let mismatches = 0;
  for (let i = 0; i < packets.length; i++) {
    if (out[i] !== isolatedOut[i]) mismatches++;
    if (pipeline.allows(packets[i]) !== isolated.allows(packets[i])) mismatches++;
  }
  if (mismatches) throw new Error(`isolated instances disagree with in-thread ones on ${mismatches} verdicts`);
  const loops = [
    () => batchThroughput(pipeline, packets, settings.measureMs),
    () => batchThroughput(isolated, packets, settings.measureMs),
    () => singleThroughput(pipeline, packets, settings.measureMs),
    () => singleThroughput(isolated, packets, settings.measureMs),
  ];
  const best = [0, 0, 0, 0];
  const bestWall = [0, 0, 0, 0];
  for (let round = 0; round < 3; round++) {
    loops.forEach((loop, i) => {
      best[i] = Math.max(best[i], loop());
      bestWall[i] = Math.max(bestWall[i], lastWallRate);
    });
  }
  const samples = Math.min(50_000, settings.latencySamples);
  singleLatency(pipeline, packets, Math.min(5_000, samples));
  const inThread = singleLatency(pipeline, packets, samples);
  singleLatency(isolated, packets, Math.min(5_000, samples));
  const inWorker = singleLatency(isolated, packets, samples);
  isolated.dispose();
  const [batchThread, batchWorker, singleThread, singleWorker] = best;
  return {
    batchDecisionsPerSec: { thread: Math.round(batchThread), worker: Math.round(batchWorker), ratio: round(batchWorker / batchThread, 3) },
    batchDecisionsPerWallSec: { thread: Math.round(bestWall[0]), worker: Math.round(bestWall[1]) },
    singleDecisionsPerSec: { thread: Math.round(singleThread), worker: Math.round(singleWorker), ratio: round(singleWorker / singleThread, 3) },
    singleDecisionsPerWallSec: { thread: Math.round(bestWall[2]), worker: Math.round(bestWall[3]) },
    p50Micros: { thread: inThread.p50Micros, worker: inWorker.p50Micros },
    p99Micros: { thread: inThread.p99Micros, worker: inWorker.p99Micros },
    threads: isolated.stages.length,
    rssPerThreadMiB: round((rssAfter - rssBefore) / isolated.stages.length / 1048576, 1),
    latencySamples: samples,
  };
}

/**
 * Where a decision's time goes at the default scale: the host's share
 * (lookups and encoding, measured alone), the crossing into WebAssembly (the
 * empty pipeline minus the encoding, per module call), and each stage alone
 * (a one-stage pipeline minus the empty one-stage cost).
 */
function breakdownSection(setup: Setup) {
  const { engine, packets } = setup;
  // Many small measurements: shorter ones in --quick.
  const ms = quick ? 200 : Math.max(300, settings.measureMs / 3);
  const encodeNs = Math.min(encodingNanos(engine.state, packets, ms), encodingNanos(engine.state, packets, ms));
  const nsPer = (rate: number) => round(1e9 / rate, 0);
  const oneNext = engine.build({ stages: [{ name: 'next', module: 'next' }] });
  const emptyOneBatchNs = nsPer(throughput((t) => batchThroughput(oneNext, packets, t), ms));
  const emptyOneSingleNs = nsPer(throughput((t) => singleThroughput(oneNext, packets, t), ms));
  oneNext.dispose();
  const stages: Record<string, { batchNsPerPacket: number; singleNsPerPacket: number; callsPerPacket: number }> = {};
  for (const spec of defaultPipeline().stages) {
    const one = engine.build({ stages: [spec] });
    const batchNs = nsPer(throughput((t) => batchThroughput(one, packets, t), ms));
    const singleNs = nsPer(throughput((t) => singleThroughput(one, packets, t), ms));
    const calls = one.stages[0].counters.decisions;
    stages[spec.name] = { batchNsPerPacket: batchNs, singleNsPerPacket: singleNs, callsPerPacket: 0 };
    // Records the stage decided per packet (2 when egress lets the packet on to ingress).
    one.allowsBatch(packets, new Uint8Array(packets.length));
    stages[spec.name].callsPerPacket = round((one.stages[0].counters.decisions - calls) / packets.length, 2);
    one.dispose();
  }
  // A deployment that uses no v1alpha1 AdminNetworkPolicy objects can leave out
  // the anp and banp stages; what that is worth:
  const v1alpha2Only = engine.build({ stages: defaultPipeline().stages.filter((s) => s.module !== 'admin-network-policy') });
  const withoutV1alpha1StagesDecisionsPerSec = Math.round(throughput((t) => batchThroughput(v1alpha2Only, packets, t), ms * 2));
  v1alpha2Only.dispose();
  return {
    withoutV1alpha1StagesDecisionsPerSec,
    encodeNsPerPacket: round(encodeNs, 0),
    // A Next stage sees both directions: two records per packet.
    crossingNsPerCallSingle: round((emptyOneSingleNs - encodeNs) / 2, 0),
    recordNsBatched: round((emptyOneBatchNs - encodeNs) / 2, 0),
    emptyOneStageBatchNsPerPacket: emptyOneBatchNs,
    emptyOneStageSingleNsPerPacket: emptyOneSingleNs,
    stages,
  };
}

/**
 * Batched throughput of the default pipeline at `small`, `manyPods` and
 * `large`, with and without the decision caches. Each (scale, caches) pair
 * runs in a process of its own (bench/pipeline-child.ts) and the six take
 * turns for three rounds, each keeping its best, as the pipeline section's
 * loops do. Until 2026-12-03 the three scales were measured one after the
 * other in the bench's own process, and a later scale ran in a heap that
 * still held the earlier ones' garbage and with code V8 had optimised for
 * them (docs/performance.md, "First-time decisions", sixth pass).
 */
async function scalingSection() {
  const scales: ScaleName[] = ['small', 'manyPods', 'large'];
  const loops: PipelineLoop[] = ['batch', 'batchUncached'];
  const processes = scales.flatMap((scale) => loops.map((loop) => new LoopProcess(loop, scale)));
  try {
    await timedAsync('scaling: six loop processes set up', () => Promise.all(processes.map((p) => p.ready)));
    const measure = async (p: LoopProcess, ms: number) => (await p.ask<{ rate: number }>({ measure: ms })).rate;
    // The warm-up, as throughput() makes it.
    for (const p of processes) await measure(p, Math.min(500, settings.measureMs));
    const best = processes.map(() => 0);
    for (let round = 0; round < 3; round++) {
      for (const [i, p] of processes.entries()) best[i] = Math.max(best[i], await measure(p, settings.measureMs));
    }
    for (const p of processes) {
      const { problems } = await p.ask<{ problems: string[] }>({ health: true });
      if (problems.length > 0) {
        throw new Error(`${p.scale} scale (${p.loop}), after the scaling section: ${problems.join('; ')}; its figures would measure the failure policy, not the pipeline`);
      }
    }
    const rateOf = (scale: ScaleName, loop: PipelineLoop) => Math.round(best[processes.findIndex((p) => p.scale === scale && p.loop === loop)]);
    const figures = (scale: ScaleName) => ({ decisionsPerSec: rateOf(scale, 'batch'), uncachedDecisionsPerSec: rateOf(scale, 'batchUncached'), ...SCALES[scale] });
    const [small, manyPods, large] = scales.map(figures);
    return {
      small, manyPods, large,
      ratio: round(large.decisionsPerSec / small.decisionsPerSec, 3),
      uncachedRatio: round(large.uncachedDecisionsPerSec / small.uncachedDecisionsPerSec, 3),
      scalesInOwnProcesses: true,
    };
  } finally {
    for (const p of processes) p.stop();
  }
}

/**
 * One NetworkPolicy upsert through ClusterState.apply, then a decision:
 * delivery to every stage is synchronous, so when `apply` returns every
 * stage has the new object and the next decision uses it.
 */
function updateSection(setup: Setup) {
  const { engine, pipeline, packets, cluster } = setup;
  const times: number[] = [];
  for (let round = 0; round < settings.updateRounds; round++) {
    const change = policyChange(cluster, round);
    const t0 = performance.now();
    engine.state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: change });
    pipeline.allows(packets[round % packets.length]);
    times.push(performance.now() - t0);
  }
  const p = percentiles(times);
  return { p50Millis: round(p.p50Micros, 2), p99Millis: round(p.p99Micros, 2), rounds: times.length, maxMillis: round(Math.max(...times), 2) };
}

/**
 * The pipeline changes the hot-swap loop cycles through, each from the one
 * before, all with the first pipeline's verdicts (the checked invariant):
 * a `next` stage appended (five stages shared, one small stage fed), that
 * stage removed (all shared), the np stage's decision cache switched off (np
 * fed anew: a config change refeeds its stage), and switched back on (np
 * shared with the previous pipeline, which the agent keeps for rollback).
 */
function swapChanges(): Array<{ change: string; spec: PipelineSpec }> {
  const withNext = defaultPipeline();
  withNext.stages.push({ name: 'bench-next', module: 'next' });
  const npUncached = defaultPipeline();
  npUncached.stages = npUncached.stages.map((s) => (s.name === 'np' ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));
  return [
    { change: 'stageAdded', spec: withNext },
    { change: 'stageRemoved', spec: defaultPipeline() },
    { change: 'stageConfigChanged', spec: npUncached },
    { change: 'stageConfigRestored', spec: defaultPipeline() },
  ];
}

interface SwapFigures {
  swaps: number;
  errors: number;
  decisions: number;
  builds: number[];
  maxStallMillis: number;
  /** The collector's pauses inside that longest wait, ms (the rest of it was work or waiting for a core). */
  maxStallGcMillis: number;
  /** Mark-compacts of this thread from a build's start to the first turn after its activation, all swaps. */
  markCompacts: number;
  byChange: Record<string, { swaps: number; buildMaxMillis: number; maxStallMillis: number; maxStallGcMillis: number; markCompacts: number }>;
}

/**
 * `count` swaps of `engine` through `changes` (round robin) under a decision
 * loop on the event loop: one batch of packets per turn, each checked
 * against `reference` (the objects do not change). As the agent's
 * controller does, the previous pipeline is kept (for rollback) and the one
 * before it disposed; the last one kept is disposed at the end. An error is
 * a build that throws, an unhealthy stage after activation, or any verdict
 * that differs. A change's stall is the longest wait of the loop from the
 * build's start to the first turn after activation.
 */
async function swapsUnderLoad(engine: PolicyEngine, packets: Packet[], reference: Uint8Array, changes: Array<{ change: string; spec: PipelineSpec }>, count: number): Promise<SwapFigures> {
  const turn = 512;
  const out = new Uint8Array(turn);
  let errors = 0;
  let decisions = 0;
  let maxStall = 0;
  let windowStall = 0;
  let turns = 0;
  let running = true;
  let offset = 0;
  let last = performance.now();
  // The longest waits as intervals, so the collector's pauses inside them can be told apart afterwards.
  let maxStallAt = { from: 0, to: 0 };
  let windowStallAt = { from: 0, to: 0 };
  const gc = recordGcPauses();
  const decideTurn = () => {
    if (!running) return;
    const started = performance.now();
    if (started - last > maxStall) maxStallAt = { from: last, to: started };
    if (started - last > windowStall) windowStallAt = { from: last, to: started };
    maxStall = Math.max(maxStall, started - last);
    windowStall = Math.max(windowStall, started - last);
    turns++;
    const slice = packets.slice(offset, offset + turn);
    engine.active.allowsBatch(slice, out);
    for (let k = 0; k < slice.length; k++) if (out[k] !== reference[offset + k]) { errors++; break; }
    decisions += slice.length;
    offset = (offset + turn) % (packets.length - turn);
    last = performance.now();
    setImmediate(decideTurn);
  };
  setImmediate(decideTurn);
  const nextTurn = async () => {
    const seen = turns;
    while (turns === seen) await new Promise((resolve) => setImmediate(resolve));
  };

  let swaps = 0;
  const builds: number[] = [];
  const byChange: SwapFigures['byChange'] = {};
  let previous: Pipeline | undefined;
  const windows: Array<{ change: string; from: number; to: number; stall: { from: number; to: number } }> = [];
  for (let i = 0; i < count; i++) {
    const { change, spec } = changes[i % changes.length];
    await new Promise((resolve) => setTimeout(resolve, 200));
    try {
      windowStall = 0;
      windowStallAt = { from: 0, to: 0 };
      const b0 = performance.now();
      const next = await engine.buildAsync(spec);
      const buildMillis = performance.now() - b0;
      builds.push(buildMillis);
      const older = previous;
      previous = engine.activate(next);
      older?.dispose();
      await nextTurn();
      windows.push({ change, from: b0, to: performance.now(), stall: windowStallAt });
      swaps++;
      if (!next.stages.every((s) => s.healthy)) errors++;
      const c = (byChange[change] ??= { swaps: 0, buildMaxMillis: 0, maxStallMillis: 0, maxStallGcMillis: 0, markCompacts: 0 });
      c.swaps++;
      c.buildMaxMillis = Math.max(c.buildMaxMillis, round(buildMillis, 0));
      c.maxStallMillis = Math.max(c.maxStallMillis, round(windowStall, 1));
    } catch (err) {
      errors++;
      log(`hot swap failed: ${(err as Error).message}`);
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  running = false;
  previous?.dispose();
  // The observer has been told about every collection of the swaps by now (200 ms and many turns later).
  gc.stop();
  let markCompacts = 0;
  const longest = new Map<string, { from: number; to: number }>();
  for (const w of windows) {
    const n = gcWithin(gc.pauses, w.from, w.to).markCompacts;
    markCompacts += n;
    byChange[w.change].markCompacts += n;
    const before = longest.get(w.change);
    if (!before || w.stall.to - w.stall.from > before.to - before.from) longest.set(w.change, w.stall);
  }
  for (const [change, at] of longest) byChange[change].maxStallGcMillis = round(gcWithin(gc.pauses, at.from, at.to).millis, 1);
  const maxStallGcMillis = round(gcWithin(gc.pauses, maxStallAt.from, maxStallAt.to).millis, 1);
  return { swaps, errors, decisions, builds, maxStallMillis: round(maxStall, 1), maxStallGcMillis, markCompacts, byChange };
}

/**
 * Pipeline swaps under decision load (swapsUnderLoad), with the engine in
 * the agent's configuration (engineFor: large states fed in a feed thread),
 * cycling through `swapChanges()`. `syncBuildMillis` is one `build` of a
 * pipeline sharing no stage (the stall a synchronous swap imposes).
 * `mainThreadFeed` is the config change and its restore on an engine
 * without feed threads (PolicyEngine's default, an embedder's): np's refeed
 * runs its module calls in the decision loop's thread.
 */
async function hotSwapSection(setup: Setup) {
  const { engine, packets } = setup;
  const reference = new Uint8Array(packets.length);
  engine.active.allowsBatch(packets, reference);

  // Fresh names share nothing with the active pipeline: every stage is fed.
  const unshared = { stages: defaultPipeline().stages.map((s) => ({ ...s, name: `${s.name}-sync` })) };
  const t0 = performance.now();
  const syncNext = engine.build(unshared);
  const syncBuildMillis = performance.now() - t0;
  syncNext.dispose();

  const agent = await swapsUnderLoad(engine, packets, reference, swapChanges(), settings.swaps);

  const inThread = engineFor(engine.state, { feedThreads: false });
  const first = inThread.build(defaultPipeline());
  inThread.activate(first);
  const configChanges = swapChanges().filter((c) => c.change.startsWith('stageConfig'));
  const embedded = await swapsUnderLoad(inThread, packets, reference, configChanges, configChanges.length);
  inThread.active.dispose();

  return {
    swaps: agent.swaps,
    errors: agent.errors + embedded.errors,
    decisions: agent.decisions,
    buildP50Millis: round(percentiles(agent.builds).p50Micros, 0),
    buildMaxMillis: round(Math.max(...agent.builds), 0),
    maxStallMillis: agent.maxStallMillis,
    maxStallGcMillis: agent.maxStallGcMillis,
    markCompacts: agent.markCompacts,
    // The section runs in the bench's process: its V8 flags (e.g. the agent's --max-semi-space-size=2) are these.
    nodeFlags: process.execArgv.join(' '),
    syncBuildMillis: round(syncBuildMillis, 0),
    byChange: agent.byChange,
    mainThreadFeed: {
      buildMaxMillis: embedded.byChange.stageConfigChanged?.buildMaxMillis ?? -1,
      maxStallMillis: embedded.byChange.stageConfigChanged?.maxStallMillis ?? -1,
    },
  };
}

/** RSS of a fresh process holding the large cluster and the default pipeline (bench/memory-child.ts), with the agent's Node flags and allocator environment. */
function memorySection(scale: Scale): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', ...AGENT_NODE_FLAGS, join(here, 'memory-child.js'), scale.name], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...AGENT_MALLOC_ENV },
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`memory child exited with ${code}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop()!));
    });
  });
}

function machine() {
  let commit = '';
  try { commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim(); } catch { /* not a checkout */ }
  return {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    loadAverage1m: round(loadavg()[0], 2),
    commit,
  };
}

/**
 * Flow recording's cost (docs/flows.md, docs/performance.md "Flow
 * recording"), for `allows` (one packet per call) and `allowsBatch` (64 per
 * call, the dataplane's path for a read wakeup). A turn decides the flow mix
 * as many times as fills the agent's ring once (16,384 connections), so a
 * recorded turn never drops; turns with recording off and on alternate in
 * pairs (off first in one pair, on first in the next, so drift and the
 * order cancel), and each pair gives the ratio of their CPU times for the
 * same decisions. The figures are the median of the pairs' ratios with the
 * quartiles as the spread: a pair is over in about 0.1 s, so the machine's
 * swings (other processes, frequency) touch both halves alike, where long
 * best-of runs measured them instead. "On" times the packet path alone; the
 * recorder drains after each recorded turn, untimed, as its timer does
 * between wakeups; "with the drain" adds the drain's CPU time (aggregation,
 * and pod lookups and attribution for keys new in the interval), which runs
 * on the same thread, off the packet path.
 */
function flowsSection(setup: Setup) {
  const { engine, packets } = setup;
  // The active pipeline, which recordFlows switches: after the hotSwap section it is no longer setup.pipeline.
  const pipeline = engine.active;
  const ring = 16384;
  const passes = Math.max(1, Math.floor(ring / packets.length));
  const recorder = new FlowRecorder({ state: engine.state, intervalMs: 10_000, bufferCapacity: Math.max(ring, packets.length) });
  const batches: Packet[][] = [];
  for (let i = 0; i + 64 <= packets.length; i += 64) batches.push(packets.slice(i, i + 64));
  const verdicts = new Uint8Array(64);
  let sink = 0;
  const cpuMicros = (fn: () => void) => {
    const c = process.cpuUsage();
    fn();
    const d = process.cpuUsage(c);
    return d.user + d.system;
  };
  const turn = (batched: boolean, recording: boolean) => {
    engine.recordFlows(recording ? recorder.buffer : undefined);
    const cpu = cpuMicros(() => {
      for (let k = 0; k < passes; k++) {
        if (batched) for (const batch of batches) { pipeline.allowsBatch(batch, verdicts); sink += verdicts[0]; }
        else for (let i = 0; i < packets.length; i++) if (pipeline.allows(packets[i])) sink++;
      }
    });
    const drain = recording ? cpuMicros(() => recorder.drain()) : 0;
    return { cpu, drain };
  };
  const pairs = quick ? 40 : 150;
  const measurePath = (batched: boolean) => {
    const decisions = passes * (batched ? batches.length * 64 : packets.length);
    // Warm-up: both variants compiled and the recorder's tables grown.
    for (let i = 0; i < 5; i++) { turn(batched, false); turn(batched, true); }
    const off: number[] = [];
    const on: number[] = [];
    const cost: number[] = [];
    const withDrain: number[] = [];
    for (let i = 0; i < pairs; i++) {
      let a: { cpu: number; drain: number };
      let b: { cpu: number; drain: number };
      if (i % 2 === 0) { a = turn(batched, false); b = turn(batched, true); } else { b = turn(batched, true); a = turn(batched, false); }
      off.push(a.cpu);
      on.push(b.cpu);
      cost.push(100 * (b.cpu / a.cpu - 1));
      withDrain.push(100 * ((b.cpu + b.drain) / a.cpu - 1));
    }
    const perSec = (micros: number[]) => Math.round(decisions / (quartiles(micros).median / 1e6));
    const c = quartiles(cost);
    const w = quartiles(withDrain);
    return {
      off: perSec(off), on: perSec(on),
      cost: round(c.median, 1), costSpread: [round(c.p25, 1), round(c.p75, 1)],
      withDrain: round(w.median, 1), withDrainSpread: [round(w.p25, 1), round(w.p75, 1)],
    };
  };
  const loadBefore = round(loadavg()[0], 2);
  const single = measurePath(false);
  const singleRecorded = recorder.stats().connections;
  const batch = measurePath(true);
  const batchRecorded = recorder.stats().connections - singleRecorded;
  const loadAfter = round(loadavg()[0], 2);
  engine.recordFlows(undefined);
  if (sink < 0) console.log(sink);
  const records = recorder.flush().length;
  // A recorded turn that recorded nothing measured recording off twice: each path must have recorded every decision of its turns.
  const expected = (batched: boolean) => (pairs + 5) * passes * (batched ? batches.length * 64 : packets.length);
  if (singleRecorded < expected(false) || batchRecorded < expected(true) || records === 0) {
    throw new Error(`flows section: the recorded turns recorded ${singleRecorded} connections one packet per call and ${batchRecorded} batched (expected ${expected(false)} and ${expected(true)}), ${records} records`);
  }
  return {
    pairs, decisionsPerTurn: passes * packets.length, loadAverage1m: [loadBefore, loadAfter],
    offDecisionsPerSec: single.off, onDecisionsPerSec: single.on,
    packetPathCostPercent: single.cost, packetPathCostQuartiles: single.costSpread,
    withDrainCostPercent: single.withDrain, withDrainCostQuartiles: single.withDrainSpread,
    batchOffDecisionsPerSec: batch.off, batchOnDecisionsPerSec: batch.on,
    batchPacketPathCostPercent: batch.cost, batchPacketPathCostQuartiles: batch.costSpread,
    batchWithDrainCostPercent: batch.withDrain, batchWithDrainCostQuartiles: batch.withDrainSpread,
    connectionsRecorded: recorder.stats().connections, records, dropped: recorder.buffer.dropped,
  };
}

async function main(): Promise<void> {
  const started = performance.now();
  const result: Record<string, unknown> = {
    startedAt: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    machine: machine(),
    settings,
  };

  if (wanted('pipeline') || wanted('hotSwap') || wanted('breakdown') || wanted('isolation') || wanted('flows')) {
    const def = setUp(SCALES.default);
    if (wanted('pipeline')) result.pipeline = await timedAsync('pipeline section', () => pipelineSection(def));
    assertStagesHealthy(def, 'pipeline');
    if (wanted('breakdown')) result.breakdown = timed('breakdown section', () => breakdownSection(def));
    if (wanted('isolation')) result.isolation = await isolationSection(def);
    assertStagesHealthy(def, 'breakdown and isolation');
    if (wanted('hotSwap')) result.hotSwap = await hotSwapSection(def);
    if (wanted('flows')) result.flows = timed('flows section', () => flowsSection(def));
    assertStagesHealthy(def, 'hotSwap and flows');
    def.engine.active.dispose();
  }

  if (wanted('scaling')) result.scaling = await timedAsync('scaling section', () => scalingSection());

  if (wanted('update')) {
    const large = setUp(SCALES.large);
    result.update = timed('update section', () => updateSection(large));
    assertStagesHealthy(large, 'update');
    large.engine.active.dispose();
  }

  if (wanted('memory')) result.memory = await memorySection(SCALES.large);

  if (wanted('e2e') && !noE2E) {
    const e2e: E2EResult = await runE2E({ connections: settings.e2eConnections, rounds: settings.e2eRounds, log });
    result.e2e = 'reason' in e2e ? e2e : { ...e2e, ...(await runStrictCutBench(log)) };
  }

  if (wanted('fleet')) {
    const agents = quick ? 200 : 1000;
    result.fleet = await runFleetBench({ agents, changes: quick ? 2 : 3, log });
  }

  result.reference = REFERENCE;
  result.targets = TARGETS;
  result.durationSec = round((performance.now() - started) / 1000, 1);
  result.machine = { ...(result.machine as object), loadAverage1mAtEnd: round(loadavg()[0], 2) };

  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, quick ? 'latest-quick.json' : 'latest.json');
  let written: Record<string, unknown> = result;
  if (merge && existsSync(file)) {
    // Only the sections measured now are replaced; each keeps its own record of when it was measured.
    const previous = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const measured = Object.keys(result).filter((k) => !['startedAt', 'mode', 'machine', 'settings', 'reference', 'targets', 'durationSec'].includes(k));
    const merged = (previous.merged as unknown[] | undefined) ?? [];
    written = { ...previous, ...Object.fromEntries(measured.map((k) => [k, result[k]])), reference: REFERENCE, targets: TARGETS,
      merged: [...merged, { sections: measured, startedAt: result.startedAt, durationSec: result.durationSec, machine: result.machine }] };
  }
  writeFileSync(file, JSON.stringify(written, null, 2) + '\n');
  process.stdout.write(formatTable(written) + '\n');
  log(`wrote ${file}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
