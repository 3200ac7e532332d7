// Paired measurement of the pair walk (ABI 1.4, kwp_decide_pair) against the
// one-direction walk in one process: two pipelines over two copies of the same
// cluster, timed in alternating turns (batched, per CPU-second), medians printed.
//   node bench/tools/pair-walk-ab.mjs <small|default|large> <cached|uncached> [ms per turn] [turns]
// Needs `npm run build` first.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { SCALES, generateCluster, generateFlows } = await import(join(root, 'dist', 'bench', 'generator.js'));
const { loadState, engineFor, batchThroughput } = await import(join(root, 'dist', 'bench', 'harness.js'));
const { defaultPipeline } = await import(join(root, 'dist', 'host', 'pipeline', 'spec.js'));

const [scaleName = 'default', cache = 'cached', ms = '1000', turns = '8'] = process.argv.slice(2);
const cluster = generateCluster(SCALES[scaleName]);
const { packets } = generateFlows(cluster, 8192);
const stages = defaultPipeline().stages.map((s) => (cache === 'uncached' ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));
// Separate engines: stages (and their decision caches) are not shared between the two walks.
const pipelines = { one: engineFor(loadState(cluster)).build({ stages }), pairs: engineFor(loadState(cluster)).build({ stages }) };
pipelines.one.pairWalk = false;
const rates = { one: [], pairs: [] };
const load = loadavg()[0];
for (let t = 0; t < Number(turns); t++) {
  for (const walk of t % 2 ? ['pairs', 'one'] : ['one', 'pairs']) rates[walk].push(batchThroughput(pipelines[walk], packets, Number(ms)));
}
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
console.log(`${scaleName} ${cache}: one-direction ${median(rates.one).toFixed(0)}/s, pair walk ${median(rates.pairs).toFixed(0)}/s, ratio ${(median(rates.pairs) / median(rates.one)).toFixed(3)} (load ${load.toFixed(1)} -> ${loadavg()[0].toFixed(1)})`);
