// Why the judge costs more inside the running agent than in the microbenchmark:
// the same pipeline, the same packet, one decision every GAP µs, the thread
// either sleeping between decisions (as the agent does, in epoll, while the
// client, the server and the neighbours run on its core) or spinning (keeping
// the core and its caches). Prints p50/p99 of the first decision after the gap
// and of a second one right after it. Needs `npm run build` first.
//   node bench/tools/judge-after-sleep.mjs [gapMicros=400] [decisions=3000]
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const { SCALES, generateCluster, generateFlows } = await import(join(dist, 'bench/generator.js'));
const { loadState, engineFor } = await import(join(dist, 'bench/harness.js'));
const { defaultPipeline } = await import(join(dist, 'host/pipeline/spec.js'));
const { LatencyHistogram } = await import(join(dist, 'host/dataplane/latency-histogram.js'));

const gapMicros = Number(process.argv[2] ?? 400);
const decisions = Number(process.argv[3] ?? 3000);
const cluster = generateCluster(SCALES.default);
const packets = generateFlows(cluster, 2048).packets;
const engine = engineFor(loadState(cluster));
engine.activate(engine.build(defaultPipeline()));
for (let i = 0; i < 20; i++) for (const p of packets) engine.allows(p);
const packet = packets[7];

function run(mode) {
  const first = new LatencyHistogram();
  const again = new LatencyHistogram();
  return new Promise((resolve) => {
    let n = 0;
    const one = () => {
      let t = performance.now();
      engine.allows(packet);
      first.record((performance.now() - t) * 1000);
      t = performance.now();
      engine.allows(packet);
      again.record((performance.now() - t) * 1000);
      if (++n === decisions) return resolve({ mode, gapMicros, firstP50: first.p50(), firstP99: first.p99(), againP50: again.p50(), againP99: again.p99() });
      if (mode === 'spin') {
        const until = performance.now() + gapMicros / 1000;
        while (performance.now() < until);
        setImmediate(one);
      } else setTimeout(one, gapMicros / 1000);
    };
    one();
  });
}

for (const mode of ['sleep', 'spin', 'sleep', 'spin']) {
  const r = await run(mode);
  const f = (v) => v.toFixed(2).padStart(6);
  console.log(`${mode.padEnd(5)} gap ${gapMicros} µs: first decision p50 ${f(r.firstP50)} p99 ${f(r.firstP99)} µs; the one right after p50 ${f(r.againP50)} p99 ${f(r.againP99)} µs`);
}
