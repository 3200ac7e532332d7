// Profile target: the default pipeline (or one stage of it) deciding the flow mix
// through allowsBatch for twenty seconds (8,192 packets, the full bench mix). docs/performance.md shows how to run
// it under --cpu-prof with evaluators built with names.
//   node --cpu-prof dist/bench/profile.js <small|default|large> [stage-name|-] [uncached] [ms]
// `uncached` turns every stage's decision cache off (the first-time cost).
import { SCALES, generateCluster, generateFlows } from './generator.js';
import { loadState, engineFor, batchThroughput } from './harness.js';
import { defaultPipeline } from '../host/pipeline/spec.js';
const scale = SCALES[(process.argv[2] ?? 'default') as 'default'];
const cluster = generateCluster(scale);
const flows = generateFlows(cluster, 8192);
const engine = engineFor(loadState(cluster));
const only = process.argv[3] && process.argv[3] !== '-' ? process.argv[3] : undefined;
const uncached = process.argv[4] === 'uncached';
const ms = Number(process.argv[5] ?? 20000);
const spec = defaultPipeline();
const stages = (only ? spec.stages.filter((s) => s.name === only) : spec.stages)
  .map((s) => (uncached ? { ...s, config: { ...(s.config ?? {}), decisionCache: false } } : s));
const p = engine.build({ stages });
console.log('batch', batchThroughput(p, flows.packets, ms).toFixed(0));
