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

export const TARGETS = {
  'pipeline.decisionsPerSec': '>= 1000000',
  'pipeline.ratioToEmpty': '>= 0.33',
  'flows.packetPathCostPercent': '<= 5',
  'flows.batchPacketPathCostPercent': '<= 5',
  'scaling.ratio': '>= 0.5',
  'update.p99Millis': '<= 100',
  'memory.rssMiB': '<= 128',
  'hotSwap.errors': '= 0',
  'hotSwap.buildMaxMillis': '<= 300',
  'hotSwap.maxStallMillis': '<= 5',
  'e2e.connPerSec.enforced': '>= 0.9 x acceptAll',
  'e2e.packetProcessP50Micros': '<= 10',
  'e2e.packetProcessP99Micros': '<= 100',
  'e2e.judgeP50Micros': '<= 2',
  'e2e.judgeP99Micros': '<= 10',
  'e2e.strictCutMillis': '<= 1000 (10,000 connections)',
  'e2e.fastPath.vsKernelOnly': '>= 0.95',
};

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

function verdict(result: Json, key: string): string {
  const v = get(result, key);
  if (typeof v !== 'number') return '';
  switch (key) {
    case 'pipeline.decisionsPerSec': return v >= 1_000_000 ? 'met' : 'MISSED';
    case 'pipeline.ratioToEmpty': return v >= 0.33 ? 'met' : 'MISSED';
    case 'flows.packetPathCostPercent':
    case 'flows.batchPacketPathCostPercent': return v <= 5 ? 'met' : 'MISSED';
    case 'scaling.ratio': return v >= 0.5 ? 'met' : 'MISSED';
    case 'update.p99Millis': return v <= 100 ? 'met' : 'MISSED';
    case 'memory.rssMiB': return v <= 128 ? 'met' : 'MISSED';
    case 'hotSwap.errors': return v === 0 ? 'met' : 'MISSED';
    case 'hotSwap.buildMaxMillis': return v <= 300 ? 'met' : 'MISSED';
    case 'hotSwap.maxStallMillis': return v <= 5 ? 'met' : 'MISSED';
    case 'e2e.connPerSec.enforced': {
      const base = get(result, 'e2e.connPerSec.acceptAll');
      return typeof base === 'number' ? (v >= 0.9 * base ? 'met' : 'MISSED') : '';
    }
    case 'e2e.packetProcessP50Micros': return v <= 10 ? 'met' : 'MISSED';
    case 'e2e.packetProcessP99Micros': return v <= 100 ? 'met' : 'MISSED';
    case 'e2e.judgeP50Micros': return v <= 2 ? 'met' : 'MISSED';
    case 'e2e.judgeP99Micros': return v <= 10 ? 'met' : 'MISSED';
    case 'e2e.strictCutMillis': return v <= 1000 ? 'met' : 'MISSED';
    case 'e2e.fastPath.vsKernelOnly': return v >= 0.95 ? 'met' : 'MISSED';
    default: return '';
  }
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
  ['hotSwap.syncBuildMillis', 'one synchronous build (packet path held), ms'],
  ['hotSwap.byChange.stageAdded.buildMaxMillis', '  a stage added (five shared): longest build, ms'],
  ['hotSwap.byChange.stageAdded.maxStallMillis', '  a stage added: longest wait, ms'],
  ['hotSwap.byChange.stageRemoved.buildMaxMillis', '  a stage removed (all shared): longest build, ms'],
  ['hotSwap.byChange.stageRemoved.maxStallMillis', '  a stage removed: longest wait, ms'],
  ['hotSwap.byChange.stageConfigChanged.buildMaxMillis', '  one stage\'s config changed (np fed anew): longest build, ms'],
  ['hotSwap.byChange.stageConfigChanged.maxStallMillis', '  one stage\'s config changed: longest wait, ms'],
  ['hotSwap.byChange.stageConfigRestored.buildMaxMillis', '  that config restored (np shared with the previous pipeline): longest build, ms'],
  ['hotSwap.byChange.stageConfigRestored.maxStallMillis', '  that config restored: longest wait, ms'],
  ['hotSwap.mainThreadFeed.buildMaxMillis', 'np\'s config changed, engine without feed threads: build, ms'],
  ['hotSwap.mainThreadFeed.maxStallMillis', 'np\'s config changed, engine without feed threads: longest wait, ms'],
  ['e2e.mode', 'e2e queue mode'],
  ['e2e.connPerSec.enforced', 'TCP conn/s, default pipeline'],
  ['e2e.connPerSec.acceptAll', 'TCP conn/s, allow-all pipeline'],
  ['e2e.connPerSec.kernelOnly', 'TCP conn/s, no queue'],
  ['e2e.connPerSec.fastPath', 'TCP conn/s, default pipeline with the kernel fast path'],
  ['e2e.fastPath.vsKernelOnly', '  the fast path against no queue'],
  ['e2e.fastPath.addedConnectMicros.cachedP50', '  added connect time, cached tuple, p50 µs'],
  ['e2e.fastPath.addedConnectMicros.cachedP99', '  added connect time, cached tuple, p99 µs'],
  ['e2e.fastPath.addedConnectMicros.uncachedP50', '  added connect time, uncached tuple (agent decides), p50 µs'],
  ['e2e.fastPath.addedConnectMicros.uncachedP99', '  added connect time, uncached tuple (agent decides), p99 µs'],
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
