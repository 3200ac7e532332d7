// What V8 counts as external memory in the packet path's thread through a
// feeding swap: the default scale's engine in the agent's configuration,
// np's config changed and restored N times (the pipeline before each swap
// disposed at once, so a retired instance's memory is there for the next
// restore), and `process.memoryUsage().external` / `arrayBuffers` sampled
// every 25 ms from the build's start until 100 ms after the swap. External
// memory allocated since the last mark-compact counts against the old
// generation's limit (docs/performance.md, "What starts a feeding swap's
// mark-compact"). No decision loop: few scavenges, so a dead buffer stays
// counted until the next one.
//   node --max-semi-space-size=2 bench/tools/swap-external.mjs [swaps=4]
// Needs `npm run build` first; KWP_DIST=other-dist to measure another build.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dist = (p) => import(join(root, process.env.KWP_DIST ?? 'dist', p));
const { SCALES, generateCluster } = await dist('bench/generator.js');
const { loadState, engineFor } = await dist('bench/harness.js');
const { defaultPipeline } = await dist('host/pipeline/spec.js');

const swaps = Number(process.argv[2] ?? '4');
const engine = engineFor(loadState(generateCluster(SCALES.default)));
engine.activate(engine.build(defaultPipeline()));
const npChanged = defaultPipeline();
npChanged.stages = npChanged.stages.map((s) => (s.name === 'np' ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));
const mib = (x) => (x / 1048576).toFixed(1);
let samples = [];
const sampler = setInterval(() => { const m = process.memoryUsage(); samples.push(`${mib(m.external)}/${mib(m.arrayBuffers)}`); }, 25);
for (let i = 0; i < swaps; i++) {
  await new Promise((r) => setTimeout(r, 300));
  samples = [];
  const next = await engine.buildAsync(i % 2 ? defaultPipeline() : npChanged);
  samples.push('|swap|');
  engine.activate(next).dispose();
  await new Promise((r) => setTimeout(r, 100));
  console.log(`swap ${i}: external/arrayBuffers MiB every 25 ms: ${samples.join(' ')}`);
}
clearInterval(sampler);
engine.active.dispose();
process.exit(0);
