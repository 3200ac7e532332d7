// Paired measurement of two builds of the evaluators in one process: two
// engines over two copies of the same cluster, one loading its modules from
// <dirA> and one from <dirB> (each as bench/tools/named-wasm.mjs writes them),
// timed in alternating turns (batched, per CPU-second), medians printed. At
// this VM's load separate processes swing by a third between runs; turns of a
// second inside one process see the same spells.
//   node bench/tools/modules-ab.mjs <dirA> <dirB> <small|default|large> <cached|uncached> [stage|-] [ms per turn] [turns]
// Needs `npm run build` first.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { SCALES, generateCluster, generateFlows } = await import(join(root, 'dist', 'bench', 'generator.js'));
const { loadState, batchThroughput } = await import(join(root, 'dist', 'bench', 'harness.js'));
const { PolicyEngine } = await import(join(root, 'dist', 'host', 'pipeline', 'engine.js'));
const { BuiltinModules, builtinWasmDir, ChainedModules } = await import(join(root, 'dist', 'host', 'pipeline', 'modules.js'));
const { defaultPipeline } = await import(join(root, 'dist', 'host', 'pipeline', 'spec.js'));

const [dirA, dirB, scaleName = 'default', cache = 'uncached', only = '-', ms = '1000', turns = '8'] = process.argv.slice(2);
if (!dirA || !dirB) { console.error('usage: modules-ab.mjs <dirA> <dirB> <scale> <cached|uncached> [stage|-] [ms] [turns]'); process.exit(2); }
const cluster = generateCluster(SCALES[scaleName]);
const { packets } = generateFlows(cluster, 8192);
const stages = defaultPipeline().stages
  .filter((s) => only === '-' || s.name === only)
  .map((s) => (cache === 'uncached' ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));
const modulesFrom = (dir) => new ChainedModules([new BuiltinModules(undefined, dir), new BuiltinModules(), new BuiltinModules(undefined, join(builtinWasmDir(), 'fixtures'))]);
const pipelines = {
  A: new PolicyEngine({ state: loadState(cluster), modules: modulesFrom(dirA), feedThreads: false }).build({ stages }),
  B: new PolicyEngine({ state: loadState(cluster), modules: modulesFrom(dirB), feedThreads: false }).build({ stages }),
};
const rates = { A: [], B: [] };
const load = loadavg()[0];
for (let t = 0; t < Number(turns); t++) {
  for (const k of t % 2 ? ['B', 'A'] : ['A', 'B']) rates[k].push(batchThroughput(pipelines[k], packets, Number(ms)));
}
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
const ratios = rates.A.map((a, i) => rates.B[i] / a);
console.log(`${scaleName} ${cache} ${only}: A ${median(rates.A).toFixed(0)}/s, B ${median(rates.B).toFixed(0)}/s, B/A ${(median(rates.B) / median(rates.A)).toFixed(3)}, turn ratios ${ratios.map((r) => r.toFixed(2)).join(' ')} (load ${load.toFixed(1)} -> ${loadavg()[0].toFixed(1)})`);
