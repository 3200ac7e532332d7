// Profile target: the default pipeline (or one stage of it) deciding the flow mix
// through allowsBatch for twenty seconds (8,192 packets, the full bench mix). docs/performance.md shows how to run
// it under --cpu-prof with evaluators built with names.
//   node --cpu-prof dist/bench/profile.js <small|default|large> [stage-name]
import { SCALES, generateCluster, generateFlows } from './generator.js';
import { loadState, engineFor, batchThroughput } from './harness.js';
import { defaultPipeline } from '../host/pipeline/spec.js';
const scale = SCALES[(process.argv[2] ?? 'default') as 'default'];
const cluster = generateCluster(scale);
const flows = generateFlows(cluster, 8192);
const engine = engineFor(loadState(cluster));
const only = process.argv[3];
const spec = defaultPipeline();
const p = engine.build(only ? { stages: spec.stages.filter((s) => s.name === only) } : spec);
console.log('batch', batchThroughput(p, flows.packets, 20000).toFixed(0));
