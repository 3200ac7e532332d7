// The e2e bench's agent side, run in the lab's node namespace: the real
// Dataplane (NFQUEUE) judging with a PolicyEngine over the lab's objects, plus
// (for the default pipeline) the default-scale synthetic cluster, so the
// packets are decided against 10,000 pods and 1,100 policies.
//   node e2e-node.js '<E2ENodeConfig JSON>'
//   stdout: {"event":"started","mode":...}, {"event":"stats",...}, {"event":"error",...}
//   stdin: {"op":"stats"}, {"op":"reset"} (empty the histograms), {"op":"nice","value":N}
//          (renice the packet thread, to compare priorities in one process),
//          {"op":"busyPoll","value":MICROS} (the Dataplane's busy-poll window; 0 off),
//          {"op":"mark"} (CPU time and packets in "stats" count from here),
//          {"op":"detach"} (remove every rule and set: the node namespace as with no agent),
//          {"op":"attach"} (a new Dataplane on the same queues: rules and empty sets again),
//          {"op":"settle"} (wait for the fast path's pending fills), {"op":"stop"}
//   detach, attach and settle answer {"event":"done","op":...,"seq":...} when finished
//   (seq: the command's own, so a caller tells the answers of repeated commands apart;
//   "stats" echoes it too).
import type { HostLogger } from '../host/logger.js';
import { setPriority } from 'node:os';
import { createInterface } from 'node:readline';
import { kindKeyOf, Kinds, type KubeObject } from '../host/contract.js';
import { Dataplane } from '../host/dataplane/dataplane.js';
import { DEFAULT_FAST_PATH } from '../host/dataplane/fast-path-rules.js';
import { invalidateFastPathOnChange } from '../host/dataplane/fast-path-invalidation.js';
import type { PacketJudge } from '../host/dataplane/judge.js';
import { LatencyHistogram } from '../host/dataplane/latency-histogram.js';
import type { PacketQueue, QueueOpener, WakeupHooks } from '../host/dataplane/nfqueue.js';
import { queueReaderOpener, type BatchPacketQueue, type QueueReader } from '../host/dataplane/nfqueue-batch.js';
import { defaultPipeline } from '../host/pipeline/spec.js';
import { ClusterState } from '../host/state/cluster-state.js';
import { SCALES, clusterObjects, generateCluster, generateFlows } from './generator.js';
import { allowAllSpec, engineFor } from './harness.js';
import { JudgeTrace } from './judge-trace.js';
import { buildPacket } from '../host/dataplane/packet-builder.js';
import { parsePacket } from '../host/dataplane/packet-parser.js';
import type { Packet } from '../host/contract.js';

export interface E2ENodeConfig {
  pipeline: 'default' | 'allow-all';
  /** Add the default-scale synthetic cluster to the lab's objects. */
  synthetic: boolean;
  objects: KubeObject[];
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  /** Passed to the Dataplane as packetThreadNice; unset keeps the inherited priority. */
  packetThreadNice?: number;
  /** The kernel fast path, wired to the state and engine as the agent wires it. */
  fastPath?: boolean;
  /** Passed to the Dataplane as busyPollMicros (also set later by the "busyPoll" command). */
  busyPollMicros?: number;
  /** Which reader opens the queues (the Dataplane's queueReader); default auto. */
  queueReader?: QueueReader;
}

const emit = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const quiet = () => undefined;
const logger: HostLogger = {
  debug: quiet,
  info: quiet,
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', msg, ...obj })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', msg, ...obj })}\n`),
};

/**
 * Warms the JIT on the decision path before the first real packet, so that
 * the histogram measures a running agent rather than its first thousand
 * packets: the generator's IPv4 packets (plain Uint8Array addresses).
 * `asQueued` (KWP_E2E_WARM=queued, run after the Dataplane started): packets
 * shaped as the queue's instead — parsed from Buffers (the binding's
 * payloads are Buffers, so a packet's addresses are Buffer views, whose map
 * is not a Uint8Array's), IPv4 and IPv6, among them the lab's own pods to
 * each other's ports. With the default warm-up a V8 log (--log-deopt) shows
 * the path's lookups and record encoder deoptimised ("wrong map" on the
 * addresses) right after the Dataplane starts; with `asQueued` nothing on
 * the path deoptimises after the first judged packet, but in judge10's runs
 * in turns that bought no measurable judge time (docs/performance.md, "The
 * judge traced decision by decision"), so it is not the default.
 */
function warmUp(engine: ReturnType<typeof engineFor>, objects: KubeObject[], asQueued: boolean): void {
  const generated = generateFlows(generateCluster(SCALES.small), 2048).packets;
  if (!asQueued) {
    for (let i = 0; i < 20; i++) for (const p of generated) engine.allows(p);
    return;
  }
  const asBuffer = (bytes: Uint8Array) => parsePacket(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  const packets: Packet[] = [];
  for (const p of generated) {
    const q = asBuffer(buildPacket({ src: addressText(p.src), dst: addressText(p.dst), protocol: p.protocol, srcPort: p.srcPort, dstPort: p.dstPort, icmpType: p.icmpType, icmpCode: p.icmpCode }));
    if (q) packets.push(q);
  }
  // The lab's pods, each family to each other pod of the family: the tuples the bench's client asks about, on other ports.
  const labIPs = objects.filter((o) => o.kind === 'Pod').flatMap((o) => ((o as { status?: { podIPs?: { ip: string }[] } }).status?.podIPs ?? []).map((a) => a.ip));
  for (const src of labIPs) {
    for (const dst of labIPs) {
      if (src === dst || src.includes(':') !== dst.includes(':')) continue;
      for (let port = 1; port <= 64; port++) {
        const q = asBuffer(buildPacket({ src, dst, protocol: 6, srcPort: 40000 + port, dstPort: 30000 + port }));
        if (q) packets.push(q);
      }
    }
  }
  for (let i = 0; i < 20; i++) for (const p of packets) engine.allows(p);
}

/** An address's text, for the packet builder. */
function addressText(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  return groups.join(':');
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as E2ENodeConfig;
  const byKind = new Map<string, KubeObject[]>();
  if (config.synthetic) for (const [kind, list] of clusterObjects(generateCluster(SCALES.default))) byKind.set(kind, [...list]);
  for (const obj of config.objects) {
    const kind = kindKeyOf(obj);
    byKind.set(kind, [...(byKind.get(kind) ?? []), obj]);
  }
  const state = new ClusterState();
  const order = [Kinds.Namespace, Kinds.Node, Kinds.Pod];
  for (const kind of order) if (byKind.has(kind)) state.replace(kind, byKind.get(kind)!);
  for (const [kind, list] of byKind) if (!order.includes(kind as never)) state.replace(kind, list);
  const engine = engineFor(state);
  engine.activate(engine.build(config.pipeline === 'default' ? defaultPipeline() : allowAllSpec()));

  // KWP_E2E_WARM=queued: the warm-up with packets shaped as the queue's, after the Dataplane started (warmUp); by default the generator's, before it.
  const queuedWarmUp = process.env.KWP_E2E_WARM === 'queued';
  if (config.synthetic && !queuedWarmUp) warmUp(engine, config.objects, false);

  // The verdict call alone: nfq_set_verdict is a netlink send in which the
  // kernel reinjects the packet and carries it on through the stack. With the
  // batch reader, one send carries a wakeup's verdicts: each send is timed.
  const verdictMicros = new LatencyHistogram();
  const reader = queueReaderOpener(config.queueReader ?? 'auto');
  const open = reader.opener;
  // The binding cannot close a queue (nfqueue.ts), so a Dataplane attached
  // again after a detach takes over the queue the first one bound.
  const handlers = new Map<number, { onPacket: (id: number, mark: number, payload: Buffer) => void; hooks?: WakeupHooks }>();
  const bound = new Map<number, PacketQueue>();
  let sendStarted = 0;
  const queueOpener: QueueOpener = (queueId, onPacket, hooks) => {
    handlers.set(queueId, { onPacket, hooks });
    let queue = bound.get(queueId);
    if (!queue) {
      queue = open(queueId, (id, mark, payload) => handlers.get(queueId)!.onPacket(id, mark, payload), {
        beforeSend: () => {
          handlers.get(queueId)!.hooks?.beforeSend?.();
          sendStarted = performance.now();
        },
        afterSend: () => {
          if (queueId === config.queueId) verdictMicros.record((performance.now() - sendStarted) * 1000);
          handlers.get(queueId)!.hooks?.afterSend?.();
        },
      });
      bound.set(queueId, queue);
    }
    const q = queue;
    return {
      get holding() {
        return q.holding;
      },
      verdict(id, verdict, mark) {
        if (q.holding) return q.verdict(id, verdict, mark);
        const t0 = performance.now();
        q.verdict(id, verdict, mark);
        verdictMicros.record((performance.now() - t0) * 1000);
      },
    };
  };
  const policyQueue = () => bound.get(config.queueId) as Partial<BatchPacketQueue> | undefined;

  const newDataplane = () => new Dataplane({
    queueOpener,
    tableName: config.tableName,
    queueId: config.queueId,
    dnsQueueId: config.dnsQueueId,
    failOpen: true,
    strict: false,
    logger,
    packetThreadNice: config.packetThreadNice,
    busyPollMicros: config.busyPollMicros ?? 0,
    ...(config.fastPath ? { fastPath: DEFAULT_FAST_PATH } : {}),
  });
  let dataplane = newDataplane();
  let unwire = dataplane.fastPath ? invalidateFastPathOnChange({ fastPath: dataplane.fastPath, state, engine }) : () => undefined;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await dataplane.stop().catch(() => undefined);
    if (trace) trace.write(traceDir!, `${config.pipeline}${config.fastPath ? '-fastpath' : ''}${config.synthetic ? '' : '-lab'}`);
    emit({ event: 'stopped' });
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  // The dataplane's histogram spans parse, judge and the verdict syscall (in
  // which the kernel reinjects the packet); this one spans the judge alone.
  const judgeMicros = new LatencyHistogram();
  // KWP_E2E_JUDGE_TRACE (a directory): every measured decision with its gap and family, written at stop (judge-trace.ts).
  const traceDir = process.env.KWP_E2E_JUDGE_TRACE;
  const trace = traceDir ? new JudgeTrace() : undefined;
  const judge: PacketJudge = {
    allows(packet) {
      const t0 = performance.now();
      const allowed = engine.allows(packet);
      const micros = (performance.now() - t0) * 1000;
      judgeMicros.record(micros);
      trace?.record(t0, micros, packet.family);
      return allowed;
    },
    interest: () => engine.interest(),
  };
  await dataplane.start(judge);
  if (config.synthetic && queuedWarmUp) warmUp(engine, config.objects, true);
  emit({ event: 'started', mode: dataplane.queueMode, queueReader: reader.reader, packetThreadNice: dataplane.packetThreadNice ?? null, interestAll: engine.interest().all, interestIPs: engine.interest().ips.length });

  let markCpu = process.cpuUsage();
  let markPackets = 0;
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const command = JSON.parse(line) as { op: string; value?: number; seq?: number };
    const done = (step: Promise<unknown>) => void step.then(
      () => emit({ event: 'done', op: command.op, seq: command.seq }),
      (err) => emit({ event: 'done', op: command.op, seq: command.seq, error: err instanceof Error ? err.message : String(err) }),
    );
    if (command.op === 'stats') {
      const h = dataplane.decisionMicros;
      emit({
        event: 'stats', seq: command.seq, ...dataplane.counters, count: h.count, p50Micros: h.p50(), p99Micros: h.p99(), meanMicros: h.meanMicros, maxMicros: h.maxMicros,
        judgeP50Micros: judgeMicros.p50(), judgeP99Micros: judgeMicros.p99(),
        verdictP50Micros: verdictMicros.p50(), verdictP99Micros: verdictMicros.p99(),
        // The agent's CPU time (user + system, all threads) and policy packets since the last "mark".
        cpuMicrosSinceMark: ((u) => u.user + u.system)(process.cpuUsage(markCpu)), packetsSinceMark: dataplane.counters.packets - markPackets,
        busyPollMicros: dataplane.busyPoll.windowMicros,
        // The batch reader's count of wakeups and the policy packets they carried (0 with the binding).
        wakeups: policyQueue()?.wakeups ?? 0, wakeupPackets: policyQueue()?.packets ?? 0, verdictFailures: policyQueue()?.verdictFailures ?? 0,
        ...(dataplane.fastPath ? {
          fastPathAdded: dataplane.fastPath.counters.added.accept + dataplane.fastPath.counters.added.deny,
          fastPathBatches: dataplane.fastPath.counters.batches,
          fastPathFillLagP50Micros: dataplane.fastPath.fillLagMicros.p50(),
          fastPathFillLagP99Micros: dataplane.fastPath.fillLagMicros.p99(),
          fastPathBlocker: dataplane.fastPath.blocker ?? null,
        } : {}),
      });
    } else if (command.op === 'reset') {
      dataplane.decisionMicros.reset();
      judgeMicros.reset();
      trace?.phase();
      verdictMicros.reset();
    } else if (command.op === 'nice') {
      // Same thread as Dataplane.start: the one running the packet path.
      setPriority(0, command.value ?? 0);
    } else if (command.op === 'busyPoll') {
      dataplane.busyPoll.windowMicros = command.value ?? 0;
    } else if (command.op === 'mark') {
      markCpu = process.cpuUsage();
      markPackets = dataplane.counters.packets;
    } else if (command.op === 'detach') {
      unwire();
      done(dataplane.stop());
    } else if (command.op === 'attach') {
      dataplane = newDataplane();
      unwire = dataplane.fastPath ? invalidateFastPathOnChange({ fastPath: dataplane.fastPath, state, engine }) : () => undefined;
      done(dataplane.start(judge));
    } else if (command.op === 'settle') {
      // A decided tuple waits fillDelayMs (5 ms) before its fill is queued.
      done(new Promise((resolve) => setTimeout(resolve, 25)).then(() => dataplane.fastPath?.settled()));
    } else if (command.op === 'stop') void stop();
  });
  lines.on('close', () => void stop());
}

main().catch((err) => {
  emit({ event: 'error', code: err?.code, message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
