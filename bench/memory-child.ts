// Run by bench/run.ts in a fresh process: the RSS of an agent holding one
// scale's cluster. The figure is meant to be the DaemonSet agent's, so the
// process loads what `kwp agent --kubeconfig …` loads (the CLI's agent module,
// hence the public API with the Kubernetes source, the admin API and metrics)
// and runs an Agent the way runAgent does: module store and pipeline state in
// a state directory, the default pipeline built at start, the admin API on
// loopback. Only two things differ, both because the bench has no cluster and
// no root: the objects come from the generator through a source instead of an
// API server's watches, and the dataplane stays off.
//
// The built-ins' instrumented forms come from the build's cache, so binaryen
// is never loaded; `instrumentationHelpers` says otherwise (a cold cache),
// since a helper thread's memory stays in RSS. `modules` lists the heavy
// CommonJS packages that ended up loaded, so a change that pulls one back in shows.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import v8 from 'node:v8';
import type { ObjectSink, ObjectSource } from '../host/contract.js';
import { SCALES, clusterObjects, generateCluster, type SyntheticCluster } from './generator.js';
import { helpersStarted } from '../host/runtime/instrument-helper.js';
import { AGENT_MALLOC_ENV } from '../host/agent-node-flags.js';

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/**
 * The WebAssembly memories as mapped: V8 reserves each memory as several GiB
 * of address space (bounds checks by guard pages): the part in use is a
 * read-write mapping directly followed by the inaccessible rest of the
 * reservation. Only the pages a module touched are resident, so a memory's
 * size (`wasmMemoryMiB`) can be more than it costs. In address order, each
 * with its size (a stage's memory size, which tells np's from the others) and
 * its resident bytes. Linux only (/proc/self/smaps); undefined elsewhere.
 */
function wasmMappings(): Array<{ bytes: number; resident: number }> | undefined {
  let smaps: string;
  try { smaps = readFileSync('/proc/self/smaps', 'utf8'); } catch { return undefined; }
  const maps: Array<{ start: number; end: number; perms: string; rss: number }> = [];
  for (const line of smaps.split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) (\S+)/.exec(line);
    if (range) maps.push({ start: Number.parseInt(range[1], 16), end: Number.parseInt(range[2], 16), perms: range[3], rss: 0 });
    else if (line.startsWith('Rss:') && maps.length) maps[maps.length - 1].rss = Number.parseInt(line.slice(4), 10) * 1024;
  }
  const memories: Array<{ bytes: number; resident: number }> = [];
  for (let i = 0; i + 1 < maps.length; i++) {
    const [used, rest] = [maps[i], maps[i + 1]];
    if (used.perms.startsWith('rw') && rest.perms.startsWith('---') && rest.start === used.end && rest.end - used.start >= 4 * 2 ** 30) memories.push({ bytes: used.end - used.start, resident: used.rss });
  }
  return memories;
}

/** Resident bytes of all the WebAssembly memories. */
function wasmResidentBytes(): number | undefined {
  return wasmMappings()?.reduce((sum, m) => sum + m.resident, 0);
}

/**
 * The process's resident memory by kind of mapping (/proc/self/smaps; Linux
 * only), so the step figures split into parts that add up to the RSS:
 * `files` the node binary and shared libraries; `wasmMemories` as above;
 * `jitCode` anonymous executable mappings (V8's code space and the
 * WebAssembly modules' compiled code); `v8Heap` the physical size of V8's
 * other heap spaces; `native` the rest of the anonymous memory (malloc's
 * arenas, thread stacks, the buffers of Node's and V8's C++ side).
 */
function residentByKind(): Record<string, number> | undefined {
  let smaps: string;
  try { smaps = readFileSync('/proc/self/smaps', 'utf8'); } catch { return undefined; }
  let files = 0;
  let anonymous = 0;
  let jitCode = 0;
  let file = false;
  let exec = false;
  for (const line of smaps.split('\n')) {
    const range = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (range) {
      exec = range[1].includes('x');
      file = range[2] !== '0' && range[3].startsWith('/');
    } else if (line.startsWith('Rss:')) {
      const bytes = Number.parseInt(line.slice(4), 10) * 1024;
      if (file) files += bytes;
      else if (exec) jitCode += bytes;
      else anonymous += bytes;
    }
  }
  const wasm = wasmResidentBytes() ?? 0;
  const heap = v8.getHeapSpaceStatistics().filter((s) => s.space_name !== 'code_space' && s.space_name !== 'code_large_object_space').reduce((sum, s) => sum + s.physical_space_size, 0);
  return {
    files: mib(files),
    wasmMemories: mib(wasm),
    jitCode: mib(jitCode),
    v8Heap: mib(heap),
    native: mib(anonymous - wasm - heap),
  };
}

/** Delivers the generated cluster once, as a Kubernetes source's first lists would, and lets go of it. */
class GeneratedSource implements ObjectSource {
  readonly name = 'generated';
  private delivered = false;
  constructor(private cluster: SyntheticCluster | undefined) {}
  async start(sink: ObjectSink): Promise<void> {
    for (const [kind, objects] of clusterObjects(this.cluster!)) sink.replace(kind, objects);
    this.cluster = undefined;
    this.delivered = true;
  }
  async stop(): Promise<void> {}
  ready(): boolean { return this.delivered; }
}

const scale = SCALES[(process.argv[2] ?? 'large') as keyof typeof SCALES];
// Where the MiB go, step by step (docs/performance.md): a bare process, then the agent's code loaded, then started.
const atStart = process.memoryUsage();
const residentAtStart = residentByKind();
// `kwp agent`'s command as main.ts loads it: the CLI's agent module, whose static imports are
// the agent's module graph (with the Kubernetes client's narrow KubeConfig, narrow-client.ts).
await (await import('../host/cli/agent-load.js')).loadAgentCommand();
const { Agent } = await import('../host/agent.js');
const { createLogger } = await import('../host/log.js');
const { HeldState } = await import('../host/pipeline/held-state.js');

(globalThis as { gc?: () => void }).gc?.();
const afterImports = process.memoryUsage();
const residentAfterImports = residentByKind();
const stateDir = mkdtempSync(join(tmpdir(), 'kwp-bench-memory-'));
const discard = new Writable({ write(_chunk, _enc, done) { done(); } });
const agent = new Agent({
  stateDir,
  adminAddress: '127.0.0.1:0',
  dataplane: false,
  logger: createLogger(0, discard),
  extraSources: [new GeneratedSource(generateCluster(scale))],
});
let exitCode = 0;
try {
  await agent.start();
  // The pipeline starts on an empty state and its stages take the first lists as a bulk change
  // (fresh instances fed while the old ones answer): measured once every stage holds the cluster.
  // Holding all of it: a stage holds the pods before the policies' lists reach it (they come later
  // and are taken in slices), so some bytes held is a state passed through on the way. Complete is
  // the bytes a snapshot of the whole current state would hold, no list still being taken.
  const complete = (s: (typeof agent.engine.active.stages)[number]) =>
    s.heldBytes === HeldState.of(agent.state.pods(), s.kinds.map((kind) => agent.state.objects(kind))).bytes;
  const holding = () =>
    agent.state.pendingList === undefined &&
    agent.engine.active.stages.every((s) => s.stateProblem === undefined && s.heldBytes > 0) &&
    agent.engine.active.stages.every(complete);
  for (let waited = 0; !holding(); waited += 100) {
    if (waited > 300_000) throw new Error('the stages did not take the cluster within 300 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) gc?.();
  const usage = process.memoryUsage();
  const stages = agent.engine.active.stages;
  const wasm = stages.reduce((sum, s) => sum + s.memoryBytes, 0);
  // CommonJS packages only: ESM ones (the Kubernetes client, binaryen) leave no public trace of being loaded.
  const cjs = Object.keys(createRequire(import.meta.url).cache);
  const loaded = ['etcd3', 'fastify', 'prom-client', 'pino'].filter((name) => cjs.some((f) => f.includes(`/node_modules/${name}/`)));
  process.stdout.write(JSON.stringify({
    rssMiB: mib(usage.rss),
    steps: {
      bareProcess: { rssMiB: mib(atStart.rss), heapUsedMiB: mib(atStart.heapUsed), resident: residentAtStart },
      codeLoaded: { rssMiB: mib(afterImports.rss), heapUsedMiB: mib(afterImports.heapUsed), resident: residentAfterImports },
      started: { rssMiB: mib(usage.rss), heapUsedMiB: mib(usage.heapUsed), resident: residentByKind() },
    },
    nodeFlags: process.execArgv,
    mallocEnv: Object.fromEntries(Object.keys(AGENT_MALLOC_ENV).map((name) => [name, process.env[name] ?? null])),
    heapUsedMiB: mib(usage.heapUsed),
    externalMiB: mib(usage.external),
    arrayBuffersMiB: mib(usage.arrayBuffers),
    wasmMemoryMiB: mib(wasm),
    wasmResidentMiB: (() => { const r = wasmResidentBytes(); return r === undefined ? undefined : mib(r); })(),
    wasmMemoryMiBByStage: Object.fromEntries(stages.map((s) => [s.name, mib(s.memoryBytes)])),
    wasmResidentMiBByMemory: wasmMappings()?.map((m) => ({ sizeMiB: mib(m.bytes), residentMiB: mib(m.resident) })),
    scale: scale.name,
    pods: [...agent.state.pods()].length,
    ready: agent.ready(),
    instrumentationHelpers: helpersStarted(),
    modules: loaded,
    // The Kubernetes client's KubeConfig without its generated API (false: the whole client loaded).
    narrowKubeConfig: (await import('../host/sources/kubernetes/narrow-client.js')).narrowKubeConfig,
    gcExposed: gc !== undefined,
  }) + '\n');
} catch (err) {
  process.stderr.write(`memory child: ${(err as Error).stack ?? err}\n`);
  exitCode = 1;
} finally {
  await agent.stop().catch(() => undefined);
  rmSync(stateDir, { recursive: true, force: true });
}
process.exit(exitCode);

