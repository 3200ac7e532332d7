// Run by bench/run.ts in a fresh process: load one scale's cluster into a
// ClusterState, build and activate the default pipeline, drop the generator's
// copies, collect garbage, and print the process's memory as one JSON line.
// RSS then holds what an agent holds: the objects, the PodInfo index and
// every stage's WebAssembly memory. The built-ins' instrumented forms come
// from the build's cache, so binaryen is never loaded; `instrumentationHelpers`
// says otherwise (a cold cache), since a helper thread's memory stays in RSS.
import { defaultPipeline } from '../host/pipeline/spec.js';
import { SCALES, generateCluster } from './generator.js';
import { engineFor, loadState } from './harness.js';
import { helpersStarted } from '../host/runtime/instrument-helper.js';

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

const scale = SCALES[(process.argv[2] ?? 'large') as keyof typeof SCALES];
let cluster: ReturnType<typeof generateCluster> | undefined = generateCluster(scale);
const state = loadState(cluster);
cluster = undefined;
const engine = engineFor(state);
const pipeline = engine.build(defaultPipeline());
engine.activate(pipeline);
const gc = (globalThis as { gc?: () => void }).gc;
for (let i = 0; i < 3; i++) gc?.();
const usage = process.memoryUsage();
const wasm = pipeline.stages.reduce((sum, s) => sum + s.memoryBytes, 0);
process.stdout.write(JSON.stringify({
  rssMiB: mib(usage.rss),
  heapUsedMiB: mib(usage.heapUsed),
  externalMiB: mib(usage.external),
  arrayBuffersMiB: mib(usage.arrayBuffers),
  wasmMemoryMiB: mib(wasm),
  wasmMemoryMiBByStage: Object.fromEntries(pipeline.stages.map((s) => [s.name, mib(s.memoryBytes)])),
  scale: scale.name,
  instrumentationHelpers: helpersStarted(),
  gcExposed: gc !== undefined,
}) + '\n');
process.exit(0);
