// The bench's flows section in a tight loop of its own: paired turns of the
// default scale's 8,192-packet mix, recording off and on alternating (order
// swapped every pair), the median and quartiles of each pair's CPU-time
// ratio. The turns of each kind run in functions of their own (offTurn,
// onTurn), so a CPU profile separates them:
//   node bench/tools/flows-cost.mjs <batch|single|both> [pairs]
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/tools/flows-cost.mjs batch 200
//   node bench/tools/cpuprofile-top.mjs /tmp/prof/CPU.*.cpuprofile 30 --under=onTurn
// Needs `npm run build` first.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { SCALES, generateCluster, generateFlows } = await import(join(root, 'dist', 'bench', 'generator.js'));
const { loadState, engineFor, quartiles } = await import(join(root, 'dist', 'bench', 'harness.js'));
const { defaultPipeline } = await import(join(root, 'dist', 'host', 'pipeline', 'spec.js'));
const { FlowRecorder } = await import(join(root, 'dist', 'host', 'flow-records', 'flow-recorder.js'));

const [which = 'both', pairsArg = '100'] = process.argv.slice(2);
const pairs = Number(pairsArg);
const cluster = generateCluster(SCALES.default);
const { packets } = generateFlows(cluster, 8192);
const state = loadState(cluster);
const engine = engineFor(state);
engine.activate(engine.build(defaultPipeline()));
const pipeline = engine.active;
const passes = 2;
const recorder = new FlowRecorder({ state, intervalMs: 10_000, bufferCapacity: 16384 });
const batches = [];
for (let i = 0; i + 64 <= packets.length; i += 64) batches.push(packets.slice(i, i + 64));
const verdicts = new Uint8Array(64);
let sink = 0;

function run(batched) {
  for (let k = 0; k < passes; k++) {
    if (batched) for (const batch of batches) { pipeline.allowsBatch(batch, verdicts); sink += verdicts[0]; }
    else for (let i = 0; i < packets.length; i++) if (pipeline.allows(packets[i])) sink++;
  }
}
function cpu(fn, batched) {
  const c = process.cpuUsage();
  fn(batched);
  const d = process.cpuUsage(c);
  return d.user + d.system;
}
function offTurn(batched) { run(batched); }
function onTurn(batched) { run(batched); }
function off(batched) { engine.recordFlows(undefined); return cpu(offTurn, batched); }
function on(batched) { engine.recordFlows(recorder.buffer); const t = cpu(onTurn, batched); recorder.drain(); return t; }

function measure(batched) {
  for (let i = 0; i < 5; i++) { off(batched); on(batched); }
  const cost = [];
  for (let i = 0; i < pairs; i++) {
    let a, b;
    if (i % 2 === 0) { a = off(batched); b = on(batched); } else { b = on(batched); a = off(batched); }
    cost.push(100 * (b / a - 1));
  }
  const q = quartiles(cost);
  return `${q.median.toFixed(1)} % (${q.p25.toFixed(1)} to ${q.p75.toFixed(1)})`;
}
const load = loadavg()[0];
const out = [];
if (which !== 'batch') out.push(`one packet per call ${measure(false)}`);
if (which !== 'single') out.push(`batched ${measure(true)}`);
if (recorder.buffer.dropped > 0) throw new Error(`${recorder.buffer.dropped} dropped`);
console.log(`${out.join(', ')} (load ${load.toFixed(1)} -> ${loadavg()[0].toFixed(1)})${sink < 0 ? '' : ''}`);
