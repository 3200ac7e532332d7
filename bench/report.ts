// The reference figures the bench is compared with, the targets it is held
// to, and the printed table.

/** kube-network-policies' published figures, as quoted in the issue this bench answers. */
export const REFERENCE = {
  project: 'kube-network-policies (Go, nfqueue)',
  packetProcessP50Micros: '50-120',
  packetProcessP99Micros: 625,
  packetsPerSec: 8000,
  note: 'figures quoted in the issue; not measured on this machine',
};

/**
 * The targets the bench is held to: the issues' figures (issue 20 for the
 * packet path, issue 19 for flow recording). One entry a figure; the printed
 * table's verdict and `latest.json`'s `targets` both come from here.
 */
type Target = { op: '>=' | '<=' | '='; value: number; of?: string; note?: string };

const TARGET_LIST: Record<string, Target> = {
  'pipeline.decisionsPerSec': { op: '>=', value: 1_500_000 },
  'pipeline.uncachedDecisionsPerSec': { op: '>=', value: 500_000 },
  'pipeline.ratioToEmpty': { op: '>=', value: 0.33 },
  'flows.packetPathCostPercent': { op: '<=', value: 5 },
  'flows.batchPacketPathCostPercent': { op: '<=', value: 5 },
  'scaling.ratio': { op: '>=', value: 0.5 },
  'scaling.uncachedRatio': { op: '>=', value: 0.5 },
  'update.p99Millis': { op: '<=', value: 100 },
  'memory.rssMiB': { op: '<=', value: 128 },
  'hotSwap.errors': { op: '=', value: 0 },
  'hotSwap.buildMaxMillis': { op: '<=', value: 300 },
  'hotSwap.maxStallMillis': { op: '<=', value: 5 },
  'e2e.connPerSec.enforced': { op: '>=', value: 0.9, of: 'e2e.connPerSec.acceptAll' },
  'e2e.packetProcessP50Micros': { op: '<=', value: 10 },
  'e2e.packetProcessP99Micros': { op: '<=', value: 100 },
  'e2e.judgeP50Micros': { op: '<=', value: 2 },
  'e2e.judgeP99Micros': { op: '<=', value: 10 },
  'e2e.strictCutMillis': { op: '<=', value: 1000, note: '10,000 connections' },
  'e2e.fastPath.vsKernelOnly': { op: '>=', value: 0.95 },
};

function describeTarget(t: Target): string {
  const of = t.of ? ` x ${t.of.split('.').pop()}` : '';
  const note = t.note ? ` (${t.note})` : '';
  return `${t.op} ${t.value}${of}${note}`;
}

/** The targets as written to `latest.json`: figure → "op value". */
export const TARGETS: Record<string, string> = Object.fromEntries(
  Object.entries(TARGET_LIST).map(([key, t]) => [key, describeTarget(t)]),
);

type Json = Record<string, any>;

function get(result: Json, path: string): unknown {
  return path.split('.').reduce<any>((v, k) => (v == null ? undefined : v[k]), result);
}

function fmt(v: unknown): string {
  if (v === undefined) return '-';
  if (typeof v === 'number') return Number.isInteger(v) ? v.toLocaleString('en-US') : String(v);
  // A spread: quartiles, or the load average at the start and the end.
  if (Array.isArray(v)) return v.map(fmt).join(' to ');
  return String(v);
}

/** 'met', 'MISSED', or '' when the figure (or the one it is relative to) was not measured. */
export function verdict(result: Json, key: string): string {
  const t = TARGET_LIST[key];
  const v = get(result, key);
  if (!t || typeof v !== 'number') return '';
  let bound = t.value;
  if (t.of) {
    const base = get(result, t.of);
    if (typeof base !== 'number') return '';
    bound = t.value * base;
  }
  const met = t.op === '>=' ? v >= bound : t.op === '<=' ? v <= bound : v === bound;
  return met ? 'met' : 'MISSED';
}

const ROWS: Array<[string, string]> = [
  ['pipeline.decisionsPerSec', 'decisions/s, default scale, batched (allowsBatch)'],
  ['pipeline.singleDecisionsPerSec', 'decisions/s, default scale, one packet per call (allows)'],
  ['pipeline.p50Micros', 'decision p50 µs (allows, hrtime per call)'],
  ['pipeline.p99Micros', 'decision p99 µs (allows, hrtime per call)'],
  ['pipeline.emptyDecisionsPerSec', 'decisions/s, 5 Next stages, batched'],
  ['pipeline.ratioToEmpty', 'default / empty (batched)'],
  ['pipeline.singleRatioToEmpty', 'default / empty (one per call)'],
  ['pipeline.decisionCacheHitRate', 'decision-cache hit rate (batched loop)'],
  ['pipeline.uncachedDecisionsPerSec', 'decisions/s, decision caches off, batched'],
  ['pipeline.uncachedRatioToEmpty', 'caches off / empty (batched)'],
  ['pipeline.allowedFraction', 'share of the flow mix allowed'],
  ['flows.offDecisionsPerSec', 'decisions/s, allows, flow recording off (median turn)'],
  ['flows.onDecisionsPerSec', 'decisions/s, allows, flow recording on (packet path, median turn)'],
  ['flows.packetPathCostPercent', 'flow recording cost on the packet path, median of paired turns, %'],
  ['flows.packetPathCostQuartiles', '  its quartiles, %'],
  ['flows.withDrainCostPercent', 'flow recording cost with the drain, median, %'],
  ['flows.batchOffDecisionsPerSec', 'decisions/s, allowsBatch, flow recording off (median turn)'],
  ['flows.batchOnDecisionsPerSec', 'decisions/s, allowsBatch, flow recording on (packet path, median turn)'],
  ['flows.batchPacketPathCostPercent', 'flow recording cost on the batched packet path, median of paired turns, %'],
  ['flows.batchPacketPathCostQuartiles', '  its quartiles, %'],
  ['flows.batchWithDrainCostPercent', 'flow recording cost on the batched path with the drain, median, %'],
  ['flows.loadAverage1m', 'load average during the flows section'],
  ['isolation.batchDecisionsPerSec.thread', 'decisions/s batched, instances in the main thread (per CPU-s)'],
  ['isolation.batchDecisionsPerSec.worker', 'decisions/s batched, each instance in its thread (per CPU-s)'],
  ['isolation.batchDecisionsPerWallSec.thread', 'decisions/s batched, in the main thread (per wall s)'],
  ['isolation.batchDecisionsPerWallSec.worker', 'decisions/s batched, in instance threads (per wall s)'],
  ['isolation.singleDecisionsPerSec.thread', 'decisions/s one per call, in the main thread (per CPU-s)'],
  ['isolation.singleDecisionsPerSec.worker', 'decisions/s one per call, in instance threads (per CPU-s)'],
  ['isolation.p50Micros.thread', 'decision p50 µs, in the main thread'],
  ['isolation.p50Micros.worker', 'decision p50 µs, in instance threads'],
  ['isolation.p99Micros.thread', 'decision p99 µs, in the main thread'],
  ['isolation.p99Micros.worker', 'decision p99 µs, in instance threads'],
  ['isolation.rssPerThreadMiB', 'RSS per instance thread, MiB (incl. its module memory)'],
  ['scaling.small.decisionsPerSec', 'decisions/s, small (100 pods, 10 policies)'],
  ['scaling.manyPods.decisionsPerSec', 'decisions/s, small policies over 10k pods'],
  ['scaling.large.decisionsPerSec', 'decisions/s, large (10k pods, 10k NPs)'],
  ['scaling.ratio', 'large / small'],
  ['scaling.small.uncachedDecisionsPerSec', 'decisions/s, small, caches off'],
  ['scaling.large.uncachedDecisionsPerSec', 'decisions/s, large, caches off'],
  ['scaling.uncachedRatio', 'large / small, caches off'],
  ['update.p50Millis', 'policy change → deciding with it, p50 ms (large)'],
  ['update.p99Millis', 'policy change → deciding with it, p99 ms (large)'],
  ['memory.rssMiB', 'agent RSS MiB, large scale, fresh process'],
  ['hotSwap.swaps', 'pipeline swaps under decision load (default)'],
  ['hotSwap.errors', 'swap errors'],
  ['hotSwap.buildMaxMillis', 'longest buildAsync, ms'],
  ['hotSwap.maxStallMillis', 'longest wait of the decision loop during swaps, ms'],
  ['hotSwap.maxStallGcMillis', '  the collector\'s pauses inside that wait, ms'],
  ['hotSwap.markCompacts', 'mark-compacts of the packet path\'s thread during the swaps'],
  ['hotSwap.syncBuildMillis', 'one synchronous build (packet path held), ms'],
  ['hotSwap.byChange.stageAdded.buildMaxMillis', '  a stage added (five shared): longest build, ms'],
  ['hotSwap.byChange.stageAdded.maxStallMillis', '  a stage added: longest wait, ms'],
  ['hotSwap.byChange.stageAdded.maxStallGcMillis', '  a stage added: the collector\'s pauses inside that wait, ms'],
  ['hotSwap.byChange.stageRemoved.buildMaxMillis', '  a stage removed (all shared): longest build, ms'],
  ['hotSwap.byChange.stageRemoved.maxStallMillis', '  a stage removed: longest wait, ms'],
  ['hotSwap.byChange.stageConfigChanged.buildMaxMillis', '  one stage\'s config changed (np fed anew): longest build, ms'],
  ['hotSwap.byChange.stageConfigChanged.maxStallMillis', '  one stage\'s config changed: longest wait, ms'],
  ['hotSwap.byChange.stageConfigChanged.maxStallGcMillis', '  one stage\'s config changed: the collector\'s pauses inside that wait, ms'],
  ['hotSwap.byChange.stageConfigRestored.buildMaxMillis', '  that config restored (np shared with the previous pipeline): longest build, ms'],
  ['hotSwap.byChange.stageConfigRestored.maxStallMillis', '  that config restored: longest wait, ms'],
  ['hotSwap.mainThreadFeed.buildMaxMillis', 'np\'s config changed, engine without feed threads: build, ms'],
  ['hotSwap.mainThreadFeed.maxStallMillis', 'np\'s config changed, engine without feed threads: longest wait, ms'],
  ['e2e.mode', 'e2e queue mode'],
  ['e2e.queueReader', 'e2e queue reader (batch: kwp-nfqueue-batch, binding: nfqueue)'],
  ['e2e.packetsPerWakeup', '  policy packets per wakeup (batch reader; 0 with the binding)'],
  ['e2e.connPerSec.enforced', 'TCP conn/s, default pipeline'],
  ['e2e.connPerSec.acceptAll', 'TCP conn/s, allow-all pipeline'],
  ['e2e.connPerSec.kernelOnly', 'TCP conn/s, no queue'],
  ['e2e.connPerSec.fastPath', 'TCP conn/s, default pipeline with the kernel fast path (median turn of the pairs)'],
  ['e2e.fastPath.kernelOnlyConnPerSec', '  TCP conn/s, no queue, in the same pairs (median turn)'],
  ['e2e.fastPath.vsKernelOnly', '  the fast path against no queue, median of paired turns'],
  ['e2e.fastPath.vsKernelOnlyQuartiles', '  its quartiles'],
  ['e2e.fastPath.cpuVsKernelOnly', '  CPU per connection, no queue ÷ fast path (client and server), median of pairs'],
  ['e2e.fastPath.cpuVsKernelOnlyQuartiles', '  its quartiles'],
  ['e2e.fastPath.pairs', '  pairs (kernelOnly and fast-path turns, alternating)'],
  ['e2e.fastPath.queuedPacketsDuringRateRuns', '  packets the fast-path agent saw in its rate runs'],
  ['e2e.fastPath.addedConnectMicros.cachedP50', '  added connect time, cached tuple, p50 µs'],
  ['e2e.fastPath.addedConnectMicros.cachedP99', '  added connect time, cached tuple, p99 µs'],
  ['e2e.fastPath.addedConnectMicros.uncachedP50', '  added connect time, uncached tuple (agent decides), p50 µs'],
  ['e2e.fastPath.addedConnectMicros.uncachedP99', '  added connect time, uncached tuple (agent decides), p99 µs'],
  ['e2e.fastPath.loadAverage1m', '  load average during the pairs'],
  ['e2e.packetProcessP50Micros', 'packet process p50 µs (dataplane histogram)'],
  ['e2e.packetProcessP99Micros', 'packet process p99 µs (dataplane histogram)'],
  ['e2e.judgeP50Micros', 'of which the pipeline (judge) p50 µs'],
  ['e2e.judgeP99Micros', 'of which the pipeline (judge) p99 µs'],
  ['e2e.verdictCallP50Micros', 'of which the verdict call p50 µs'],
  ['e2e.verdictCallP99Micros', 'of which the verdict call p99 µs'],
  ['e2e.busyPoll.judgeP50Micros', 'with the busy poll: judge p50 µs'],
  ['e2e.busyPoll.judgeP99Micros', 'with the busy poll: judge p99 µs'],
  ['e2e.busyPoll.connPerSec', 'with the busy poll: TCP conn/s'],
  ['e2e.busyPoll.agentCpuMicrosPerPacket', 'with the busy poll: agent CPU µs per queued packet'],
  ['e2e.busyPoll.withoutAgentCpuMicrosPerPacket', 'without it: agent CPU µs per queued packet'],
  ['e2e.strictCutMillis', 'strict mode: ms to cut 10,000 denied connections'],
  ['e2e.strictCutPath', 'strict mode cut path'],
  ['e2e.reason', 'e2e skipped because'],
  ['fleet.agents', 'fleet: simulated agents on one emulator'],
  ['fleet.convergenceP50Millis', 'fleet: change to a node reporting it, p50 ms'],
  ['fleet.convergenceP99Millis', 'fleet: change to a node reporting it, p99 ms'],
  ['fleet.apiRequestsPerChange', 'fleet: API-server requests per change'],
  ['fleet.watchEventsPerChange', 'fleet: watch events sent per change'],
  ['fleet.bytesPerChange', 'fleet: bytes sent by the API server per change'],
];

export function formatTable(result: Json): string {
  const lines: string[] = [];
  const m = result.machine ?? {};
  lines.push(`kube-wasm-policies bench (${result.mode}) — ${m.cores} cores, ${m.cpuModel}, node ${m.node}, load ${m.loadAverage1m} → ${m.loadAverage1mAtEnd}`);
  const w1 = Math.max(...ROWS.map(([, d]) => d.length));
  for (const [key, description] of ROWS) {
    const v = get(result, key);
    if (v === undefined) continue;
    const target = (TARGETS as Record<string, string>)[key] ?? '';
    lines.push(`${description.padEnd(w1)}  ${fmt(v).padStart(12)}  ${target.padEnd(20)} ${verdict(result, key)}`);
  }
  lines.push(`reference (${REFERENCE.project}): p50 ${REFERENCE.packetProcessP50Micros} µs, p99 ${REFERENCE.packetProcessP99Micros} µs, ~${REFERENCE.packetsPerSec} packets/s`);
  return lines.join('\n');
}

/**
 * The results as the markdown docs/performance.md carries (bench/tools/results-markdown.mjs
 * prints it): the run, then one row a measured figure of ROWS with its target and verdict,
 * so the doc's table and the printed one cannot disagree on a target.
 */
export function formatMarkdown(result: Json): string {
  const m = result.machine ?? {};
  const md = (v: unknown) => fmt(v).replace(/\|/g, '\\|');
  const lines: string[] = [];
  lines.push(`Run: ${result.startedAt} (${result.mode}), commit ${m.commit}, ${m.cores} cores (${m.cpuModel}), node ${m.node}, load average ${m.loadAverage1m} at the start and ${m.loadAverage1mAtEnd} at the end, ${result.durationSec} s.`);
  for (const merge of result.merged ?? []) {
    lines.push(`Merged into it: ${merge.sections.join(', ')} from ${merge.startedAt}, commit ${merge.machine?.commit}, load average ${merge.machine?.loadAverage1m} → ${merge.machine?.loadAverage1mAtEnd}.`);
  }
  lines.push('');
  lines.push('| figure | what it is | measured | target | |');
  lines.push('| --- | --- | ---: | --- | --- |');
  for (const [key, description] of ROWS) {
    const v = get(result, key);
    if (v === undefined) continue;
    const t = TARGETS[key] ?? '';
    const v2 = verdict(result, key);
    lines.push(`| \`${key}\` | ${description.trim()} | ${md(v)} | ${t.replace(/>=/, '≥').replace(/<=/, '≤').replace(/\d{4,}/g, (d) => Number(d).toLocaleString('en-US'))} | ${v2 === 'MISSED' ? '**missed**' : v2} |`);
  }
  const b = result.breakdown;
  if (b?.stages) {
    lines.push('');
    lines.push('| stage alone | ns/packet batched | ns/packet one per call | records per packet |');
    lines.push('| --- | ---: | ---: | ---: |');
    for (const [name, s] of Object.entries<any>(b.stages)) lines.push(`| ${name} | ${fmt(s.batchNsPerPacket)} | ${fmt(s.singleNsPerPacket)} | ${fmt(s.callsPerPacket)} |`);
  }
  return lines.join('\n');
}
