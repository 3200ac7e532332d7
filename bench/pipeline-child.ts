// Run by bench/run.ts (the pipeline and scaling sections): one of a section's
// timing loops in a process of its own, over its own copy of one scale's
// cluster and flows (the default scale for the pipeline section; small,
// manyPods and large for the scaling section) (the generator is seeded, so every process decides the
// same packets against the same objects). The loops used to take turns in one
// process, and then each was timed with the code V8 had optimised for all of
// them (the batched walk also served the empty pipeline's stages, which take
// the one-direction walk, and the pipeline without caches; `allows` ran in
// between) and with a heap holding three pipelines. In one paired run every
// figure came out 18–29 % higher with the loops in their own processes
// (docs/performance.md, "Fourth pass"). The parent still takes turns — it
// asks each child for one measurement at a time, so a disturbance of the
// shared machine hits a round, not a figure — but no loop shares its
// process's code or heap with another. The scaling section measured its three
// scales one after the other in the bench's own process until 2026-12-03: the
// scale measured later ran in a heap that still held the earlier scales'
// garbage and with code V8 had optimised for them (docs/performance.md,
// "First-time decisions", sixth pass).
//
// Protocol (process.send): the child sends { ready } once built; then answers
// { measure: ms } with { rate, wallRate } (decisions per CPU-second and per
// wall second), { latency: samples } with the one-per-call latency, { counts }
// with the decision caches' hits and misses so far, { health } with the
// stages that broke or answered by their failure policy (a figure measured
// then would be the failure policy's speed), and exits on { exit }.
import { SCALES, generateCluster, generateFlows } from './generator.js';
import {
  batchThroughput, cacheCounts, emptyPipelineSpec, engineFor, lastWallRate, loadState, singleLatency, singleThroughput, stageProblems, uncachedPipelineSpec,
} from './harness.js';
import { defaultPipeline } from '../host/pipeline/spec.js';

export const PIPELINE_LOOPS = {
  batch: { spec: defaultPipeline, batched: true },
  batchEmpty: { spec: emptyPipelineSpec, batched: true },
  single: { spec: defaultPipeline, batched: false },
  singleEmpty: { spec: emptyPipelineSpec, batched: false },
  batchUncached: { spec: uncachedPipelineSpec, batched: true },
} as const;
export type PipelineLoop = keyof typeof PIPELINE_LOOPS;

export type ScaleName = keyof typeof SCALES;

type Request = { measure: number } | { latency: number } | { counts: true } | { health: true } | { exit: true };

function main(): void {
  const [loopName, flowCount, scaleName = 'default'] = process.argv.slice(2);
  const loop = PIPELINE_LOOPS[loopName as PipelineLoop];
  const scale = SCALES[scaleName as ScaleName];
  if (!loop || !scale || !process.send) {
    throw new Error(`pipeline-child: unknown loop "${loopName}" (one of ${Object.keys(PIPELINE_LOOPS).join(', ')}) or scale "${scaleName}" (one of ${Object.keys(SCALES).join(', ')}), or not started with an IPC channel`);
  }
  const cluster = generateCluster(scale);
  const { packets } = generateFlows(cluster, Number(flowCount));
  const engine = engineFor(loadState(cluster));
  const pipeline = engine.build(loop.spec());
  engine.activate(pipeline);
  const send = (m: unknown) => process.send!(m);
  process.on('message', (m: Request) => {
    if ('measure' in m) {
      const rate = loop.batched ? batchThroughput(pipeline, packets, m.measure) : singleThroughput(pipeline, packets, m.measure);
      send({ rate, wallRate: lastWallRate });
    } else if ('latency' in m) {
      singleLatency(pipeline, packets, Math.min(10_000, m.latency));
      send(singleLatency(pipeline, packets, m.latency));
    } else if ('counts' in m) {
      send(cacheCounts(pipeline));
    } else if ('health' in m) {
      send({ problems: stageProblems(pipeline) });
    } else {
      process.exit(0);
    }
  });
  send({ ready: true, packets: packets.length });
}

main();
