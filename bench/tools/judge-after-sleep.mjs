// Why the judge costs more inside the running agent than in the microbenchmark:
// the same pipeline, the same packet, one decision every GAP µs, the thread
// either sleeping between decisions (as the agent does, in epoll, while the
// client, the server and the neighbours run on its core) or spinning (keeping
// the core and its caches). Prints p50/p99 of the first decision after the gap
// and of a second one right after it, with `allows` walking both directions in
// one module call per stage (the pair walk, as shipped) and one direction at a
// time (as before it), in turns. Needs `npm run build` first.
//   node bench/tools/judge-after-sleep.mjs [gapMicros=400] [decisions=3000] [packets=same|cycle]
// `cycle` asks a different packet of 2,048 each time (most of them decided
// before, as in the warm-up), `same` one packet throughout.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const { SCALES, generateCluster, generateFlows } = await import(join(dist, 'bench/generator.js'));
const { loadState, engineFor } = await import(join(dist, 'bench/harness.js'));
const { defaultPipeline } = await import(join(dist, 'host/pipeline/spec.js'));
const { LatencyHistogram } = await import(join(dist, 'host/dataplane/latency-histogram.js'));

const gapMicros = Number(process.argv[2] ?? 400);
const decisions = Number(process.argv[3] ?? 3000);
const cycle = process.argv[4] === 'cycle';
const cluster = generateCluster(SCALES.default);
const packets = generateFlows(cluster, 2048).packets;
const engine = engineFor(loadState(cluster));
const pipeline = engine.build(defaultPipeline());
engine.activate(pipeline);
for (let i = 0; i < 20; i++) for (const p of packets) engine.allows(p);
let at = 7;

function run(mode) {
  const first = new LatencyHistogram();
  const again = new LatencyHistogram();
  return new Promise((resolve) => {
    let n = 0;
    const one = () => {
      const packet = packets[cycle ? (at = (at + 1) & 2047) : at];
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

for (let round = 0; round < 2; round++) {
  for (const walk of ['pairs', 'single']) {
    pipeline.pairWalk = walk === 'pairs';
    for (const mode of ['sleep', 'spin']) {
      const r = await run(mode);
      const f = (v) => v.toFixed(2).padStart(6);
      console.log(`${walk.padEnd(6)} ${mode.padEnd(5)} gap ${gapMicros} µs: first decision p50 ${f(r.firstP50)} p99 ${f(r.firstP99)} µs; the one right after p50 ${f(r.againP50)} p99 ${f(r.againP99)} µs`);
    }
  }
}
