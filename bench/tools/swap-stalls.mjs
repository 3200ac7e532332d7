// Which main-thread steps hold the event loop during a swap, and whether they
// are the garbage collector's: the default scale's engine in the agent's
// configuration (feed threads on), a turn loop (setImmediate) timing each gap,
// V8's GC entries (PerformanceObserver), and np's config changed and restored
// N times. Prints per swap the build time, the longest gap and the main
// thread's collections; with KWP_GAPS=1 each gap over the threshold with the GC pauses inside it.
//   node --max-semi-space-size=2 bench/tools/swap-stalls.mjs [swaps=4] [thresholdMs=3]
// Needs `npm run build` first.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dist = (p) => import(join(root, process.env.KWP_DIST ?? 'dist', p));
const { SCALES, generateCluster } = await dist('bench/generator.js');
const { loadState, engineFor } = await dist('bench/harness.js');
const { defaultPipeline } = await dist('host/pipeline/spec.js');

const [swapsArg = '4', thresholdArg = '3'] = process.argv.slice(2);
const threshold = Number(thresholdArg);
const engine = engineFor(loadState(generateCluster(SCALES.default)));
engine.activate(engine.build(defaultPipeline()));
const npChanged = defaultPipeline();
npChanged.stages = npChanged.stages.map((s) => (s.name === 'np' ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));

const gcs = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) gcs.push({ start: e.startTime, duration: e.duration, kind: e.detail?.kind }); }).observe({ entryTypes: ['gc'] });
const KIND = { 1: 'scavenge', 2: 'minor-mc', 4: 'mark-compact', 8: 'weak-callbacks' };

let running = true;
let last = performance.now();
const gaps = [];
const turn = () => {
  const now = performance.now();
  if (now - last > threshold) gaps.push({ start: last, end: now });
  last = now;
  if (running) setImmediate(turn);
};
setImmediate(turn);

const load = loadavg()[0];
const rows = [];
for (let i = 0; i < Number(swapsArg); i++) {
  const spec = i % 2 ? defaultPipeline() : npChanged;
  await new Promise((r) => setTimeout(r, 300));
  const from = gaps.length;
  const gcFrom = gcs.length;
  const t0 = performance.now();
  const next = await engine.buildAsync(spec);
  const build = performance.now() - t0;
  engine.activate(next).dispose();
  await new Promise((r) => setTimeout(r, 50));
  const mine = gaps.slice(from);
  const collections = gcs.slice(gcFrom);
  const count = (kind) => collections.filter((c) => c.kind === kind).length;
  const pauses = collections.reduce((n, c) => n + c.duration, 0);
  rows.push({ swap: i % 2 ? 'restored' : 'np config changed', build, longest: Math.max(0, ...mine.map((g) => g.end - g.start)), gc: `${count(1)} scavenges, ${count(4)} mark-compacts, ${pauses.toFixed(0)} ms of pauses` });
  if (process.env.KWP_GAPS) for (const g of mine) {
    const inside = gcs.filter((c) => c.start >= g.start - 0.5 && c.start <= g.end);
    const gcMs = inside.reduce((n, c) => n + c.duration, 0);
    console.log(`  swap ${i}: gap ${(g.end - g.start).toFixed(1)} ms at +${(g.start - t0).toFixed(0)} ms; GC inside ${gcMs.toFixed(1)} ms${inside.length ? ` (${inside.map((c) => `${KIND[c.kind] ?? c.kind} ${c.duration.toFixed(1)}`).join(', ')})` : ''}`);
  }
}
running = false;
for (const r of rows) console.log(`${r.swap}: build ${r.build.toFixed(0)} ms, longest gap ${r.longest.toFixed(1)} ms; ${r.gc}`);
console.log(`load ${load.toFixed(1)} -> ${loadavg()[0].toFixed(1)}`);
engine.active.dispose();
process.exit(0);
