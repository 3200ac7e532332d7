// Prints bench/results/latest.json (or the file given) as the markdown tables
// docs/performance.md carries, so the doc's figures are copied, not retyped.
//   node bench/tools/results-markdown.mjs [bench/results/latest.json]
import { readFileSync } from 'node:fs';

const r = JSON.parse(readFileSync(process.argv[2] ?? 'bench/results/latest.json', 'utf8'));
const n = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : String(v)) : v ?? '–');
const row = (cells) => `| ${cells.join(' | ')} |`;
const status = (ok) => (ok ? 'met' : '**missed**');
const e = r.e2e ?? {};
const lines = [];
lines.push(`Run: ${r.startedAt} (${r.mode}), commit ${r.machine.commit}, ${r.machine.cores} cores (${r.machine.cpuModel}), node ${r.machine.node}, load average ${r.machine.loadAverage1m} at the start and ${r.machine.loadAverage1mAtEnd} at the end, ${r.durationSec} s.`);
lines.push('');
lines.push(row(['figure', 'measured', 'target', '']));
lines.push(row(['---', '---:', '---', '---']));
const t = [
  ['`pipeline.decisionsPerSec` (batched, per CPU-second)', r.pipeline?.decisionsPerSec, '≥ 1,000,000', r.pipeline && status(r.pipeline.decisionsPerSec >= 1e6)],
  ['`pipeline.decisionsPerWallSec` (same run, wall clock)', r.pipeline?.decisionsPerWallSec, '', ''],
  ['`pipeline.singleDecisionsPerSec` (`allows`, one per call)', r.pipeline?.singleDecisionsPerSec, '', ''],
  ['`pipeline.p50Micros` / `p99Micros` (`allows`)', `${n(r.pipeline?.p50Micros)} / ${n(r.pipeline?.p99Micros)}`, '', ''],
  ['`pipeline.emptyDecisionsPerSec` (5 Next stages, batched)', r.pipeline?.emptyDecisionsPerSec, '', ''],
  ['`pipeline.ratioToEmpty`', r.pipeline?.ratioToEmpty, '≥ 0.33', r.pipeline && status(r.pipeline.ratioToEmpty >= 0.33)],
  ['`pipeline.singleRatioToEmpty` (one per call)', r.pipeline?.singleRatioToEmpty, '', ''],
  ['`pipeline.decisionCacheHitRate` (timed loop)', r.pipeline?.decisionCacheHitRate, '', ''],
  ['`pipeline.uncachedDecisionsPerSec` (decision caches off, batched)', r.pipeline?.uncachedDecisionsPerSec, '', ''],
  ['`pipeline.uncachedRatioToEmpty`', r.pipeline?.uncachedRatioToEmpty, '', ''],
  ['`pipeline.allowedFraction` (flow mix allowed)', r.pipeline?.allowedFraction, '', ''],
  ['`scaling.small.decisionsPerSec`', r.scaling?.small.decisionsPerSec, '', ''],
  ['`scaling.manyPods.decisionsPerSec` (small policies, 10,000 pods)', r.scaling?.manyPods?.decisionsPerSec, '', ''],
  ['`scaling.large.decisionsPerSec`', r.scaling?.large.decisionsPerSec, '', ''],
  ['`scaling.ratio` (large / small)', r.scaling?.ratio, '≥ 0.5', r.scaling && status(r.scaling.ratio >= 0.5)],
  ['`scaling.small` / `large.uncachedDecisionsPerSec` (caches off)', `${n(r.scaling?.small.uncachedDecisionsPerSec)} / ${n(r.scaling?.large.uncachedDecisionsPerSec)}`, '', ''],
  ['`scaling.uncachedRatio` (large / small, caches off)', r.scaling?.uncachedRatio, '', ''],
  ['`update.p50Millis` / `p99Millis` (large)', `${n(r.update?.p50Millis)} / ${n(r.update?.p99Millis)}`, '≤ 100 (p99)', r.update && status(r.update.p99Millis <= 100)],
  ['`memory.rssMiB` (large, an Agent as `kwp agent` starts it, fresh process)', r.memory?.rssMiB, '≤ 256', r.memory && status(r.memory.rssMiB <= 256)],
  ['`hotSwap.swaps` / `errors`', `${n(r.hotSwap?.swaps)} / ${n(r.hotSwap?.errors)}`, 'errors = 0', r.hotSwap && status(r.hotSwap.errors === 0)],
  ['`hotSwap.buildP50Millis` / `buildMaxMillis` (`buildAsync`)', `${n(r.hotSwap?.buildP50Millis)} / ${n(r.hotSwap?.buildMaxMillis)}`, '', ''],
  ['`hotSwap.maxStallMillis` (longest wait of the decision loop)', r.hotSwap?.maxStallMillis, '', ''],
  ['`hotSwap.syncBuildMillis` (one `build`: the stall without `buildAsync`)', r.hotSwap?.syncBuildMillis, '', ''],
];
if (e.reason) t.push(['`e2e`', `not run: ${e.reason}`, '', '']);
else if (e.connPerSec) {
  t.push(['`e2e.mode`', e.mode, '', '']);
  t.push(['`e2e.connPerSec.enforced`', e.connPerSec.enforced, '≥ 0.9 × acceptAll', status(e.connPerSec.enforced >= 0.9 * e.connPerSec.acceptAll)]);
  t.push(['`e2e.connPerSec.acceptAll`', e.connPerSec.acceptAll, '', '']);
  t.push(['`e2e.connPerSec.kernelOnly`', e.connPerSec.kernelOnly, '', '']);
  t.push(['`e2e.packetProcessP50Micros`', e.packetProcessP50Micros, '≤ 10', status(e.packetProcessP50Micros <= 10)]);
  t.push(['`e2e.packetProcessP99Micros`', e.packetProcessP99Micros, '≤ 100', status(e.packetProcessP99Micros <= 100)]);
  t.push(['`e2e.judgeP50Micros` / `judgeP99Micros` (pipeline only)', `${n(e.judgeP50Micros)} / ${n(e.judgeP99Micros)}`, '', '']);
  t.push(['`e2e.verdictCallP50Micros` / `verdictCallP99Micros`', `${n(e.verdictCallP50Micros)} / ${n(e.verdictCallP99Micros)}`, '', '']);
  if (e.inheritedPriority) t.push([`same agent at nice 0 (packet thread at ${e.packetThreadNice} above): conn/s, packet p50 / p99 µs`, `${n(e.inheritedPriority.connPerSec)}, ${n(e.inheritedPriority.packetProcessP50Micros)} / ${n(e.inheritedPriority.packetProcessP99Micros)}`, '', '']);
}
for (const [a, b, c, d] of t) lines.push(row([a, n(b), c, d ?? '']));
if (r.breakdown) {
  const b = r.breakdown;
  lines.push('');
  lines.push(`Breakdown at the default scale (ns per packet, per CPU-second): lookups and encoding ${n(b.encodeNsPerPacket)}; one Next stage ${n(b.emptyOneStageSingleNsPerPacket)} one packet per call (≈ ${n(b.crossingNsPerCallSingle)} per module call beyond the encoding) and ${n(b.emptyOneStageBatchNsPerPacket)} batched (≈ ${n(b.recordNsBatched)} per record); default pipeline without the two v1alpha1 stages ${n(b.withoutV1alpha1StagesDecisionsPerSec)} decisions/s.`);
  lines.push('');
  lines.push(row(['stage alone', 'ns/packet batched', 'ns/packet one per call', 'records per packet']));
  lines.push(row(['---', '---:', '---:', '---:']));
  for (const [name, s] of Object.entries(b.stages)) lines.push(row([name, n(s.batchNsPerPacket), n(s.singleNsPerPacket), n(s.callsPerPacket)]));
}
if (r.memory) {
  lines.push('');
  lines.push(`Memory (large): RSS ${n(r.memory.rssMiB)} MiB = V8 heap ${n(r.memory.heapUsedMiB)} MiB used + external ${n(r.memory.externalMiB)} MiB (WebAssembly memories ${n(r.memory.wasmMemoryMiB)} MiB: ${Object.entries(r.memory.wasmMemoryMiBByStage ?? {}).map(([k, v]) => `${k} ${v}`).join(', ')}) + code and runtime.`);
}
console.log(lines.join('\n'));
