// Flow recording, off the packet path: the active pipeline appends compact
// records to a FlowBuffer (host/flow-records/flow-buffer.ts); this drains the
// buffer every `drainMs`, resolves pods, workloads and rule attribution, and
// aggregates by (source workload, destination workload, port, protocol,
// verdict, deciding policy and rule of each direction, pipeline revision) for
// `intervalMs` before it emits one record per key (docs/flows.md) to a
// bounded ring, the flow log, followers and the per-policy verdict counts.
import { Kinds, type PodInfo } from '../contract.js';
import { verdictName } from '../abi/verdict.js';
import { formatIP } from '../net/ip.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { Attribution } from '../abi/attribution.js';
import { FlowBuffer, MAX_AUDIT_STAGES, namesPolicy, Outcome } from './flow-buffer.js';
import type { FlowAction, FlowAudit, FlowDirection, FlowRecord } from './flow-record.js';
import { protocolName } from './flow-record.js';
import { workloadOf } from './workload.js';
import { SlotKeys } from './slot-keys.js';
import { FlowLogWriter } from './flow-log-writer.js';
import { PolicyVerdictCounts } from './policy-verdicts.js';
import { matchesFlow, type FlowFilter } from './flow-filter.js';
import { TimeSlices } from '../time-slices.js';

/** Where recording is switched on: the policy engine hands the buffer to every pipeline it activates. */
export interface FlowTap {
  recordFlows(buffer: FlowBuffer | undefined): void;
}

export interface FlowRecorderOptions {
  state: ClusterState;
  /** The node name records carry (`--node-name`), "" when unknown. */
  node?: string;
  /** Aggregation interval (default 10 s). */
  intervalMs?: number;
  /** Aggregated records kept in memory for `GET /v1/flows` (default 10,000). */
  ringSize?: number;
  /** Connections the packet path may append between two drains (default 16,384). */
  bufferCapacity?: number;
  /** How often the buffer is drained (default 250 ms). */
  drainMs?: number;
  /** JSON lines of every emitted record. */
  log?: FlowLogWriter;
  now?: () => number;
}

const ACTIONS: Record<number, FlowAction> = {
  [Outcome.Default]: 'Default', [Outcome.Accept]: 'Accept', [Outcome.Deny]: 'Deny',
  [Outcome.Skipped]: 'Skipped', [Outcome.Failure]: 'Failure', [Outcome.Remote]: 'Remote', [Outcome.Unknown]: 'Unknown',
  // Only without the pipeline that would finish the walk (finishEgress): it never ran.
  [Outcome.Pending]: 'Skipped',
};

/**
 * A drain slice's time before it yields to the event loop, and the
 * connections it aggregates between two reads of the clock: a connection of
 * a key already open this interval costs well under a microsecond, one of a
 * key new in the interval about 160 µs at the bench's default scale (pods,
 * workloads, and the modules asked for attribution), so a count alone does
 * not bound a slice (4,096 new keys held the event loop for about 0.7 s).
 */
const DRAIN_SLICE_MS = 2;
const DRAIN_CHUNK = 32;

interface OpenRecord { record: FlowRecord; count: number; first: number; last: number }

interface End { name: string; workload: string; labels: Record<string, string>; namespaceLabels: Record<string, string>; pod?: PodInfo }

const NO_LABELS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export class FlowRecorder {
  readonly buffer: FlowBuffer;
  readonly verdictCounts = new PolicyVerdictCounts();
  readonly intervalMs: number;
  readonly ringSize: number;
  private readonly state: ClusterState;
  private readonly node: string;
  private readonly drainMs: number;
  private readonly now: () => number;
  /** The interval's records by attribution key, and by the numeric slot keys that led to them (`keys` numbers them). */
  private readonly open = new Map<string, OpenRecord>();
  private readonly keys = new SlotKeys();
  private byKey: OpenRecord[] = [];
  /** Pods as this interval first saw them. */
  private readonly ends = new Map<number, End>();
  private readonly ring: FlowRecord[] = [];
  /** Index in `ring` of the oldest record once it is full. */
  private ringStart = 0;
  private readonly followers = new Set<(r: FlowRecord) => void>();
  /** (pipeline revision, stage, reason, rule) → attribution, for the current interval: the same answer comes back often. */
  private readonly attributions = new Map<string, Attribution | undefined>();
  private drainTimer: NodeJS.Timeout | undefined;
  private sliceQueued = false;
  private readonly visit = (slot: number): void => this.aggregate(slot);
  private flushTimer: NodeJS.Timeout | undefined;
  private tap: FlowTap | undefined;
  /** Connections aggregated so far, and records emitted. */
  connections = 0;
  emitted = 0;

  constructor(private readonly options: FlowRecorderOptions) {
    this.state = options.state;
    this.node = options.node ?? '';
    this.intervalMs = options.intervalMs ?? 10_000;
    this.ringSize = options.ringSize ?? 10_000;
    this.drainMs = options.drainMs ?? 250;
    this.now = options.now ?? Date.now;
    if (!(this.intervalMs >= 100)) throw new RangeError(`flow interval must be at least 100 ms, got ${this.intervalMs}`);
    if (!(Number.isInteger(this.ringSize) && this.ringSize >= 1)) throw new RangeError(`flow ring size must be a positive integer, got ${this.ringSize}`);
    this.buffer = new FlowBuffer(options.bufferCapacity ?? 16384);
    this.buffer.beforeChange = () => this.settle();
  }

  /**
   * Before a stage's module changes (a delivery, a new instance, disposal:
   * FlowBuffer.settle): every pending connection is aggregated now, so the
   * codes its walk left to the drain, the egress walks it left
   * (finishEgress) and the attribution text of its codes are asked of the
   * module state that decided it; and the keys known so far are forgotten,
   * since a key leaves its codes to the state it was first seen under.
   */
  private settle(): void {
    this.drain();
    if (this.keys.size > 0) {
      this.keys.clear();
      this.byKey = [];
    }
    this.attributions.clear();
  }

  /** Starts recording the pipelines `tap` activates, with timers that do not keep the process alive. */
  start(tap: FlowTap): void {
    this.tap = tap;
    tap.recordFlows(this.buffer);
    this.drainTimer = setInterval(() => this.drainSlice(), Math.min(this.drainMs, this.intervalMs)).unref();
    this.flushTimer = setInterval(() => this.flush(), this.intervalMs).unref();
  }

  /** Stops recording and emits what was aggregated so far. */
  stop(): void {
    this.tap?.recordFlows(undefined);
    this.tap = undefined;
    if (this.drainTimer) clearInterval(this.drainTimer);
    if (this.flushTimer) clearInterval(this.flushTimer);
    this.drainTimer = this.flushTimer = undefined;
    this.flush();
  }

  /** Aggregates every connection the packet path appended since the last drain. */
  drain(): number {
    return this.buffer.drain(this.visit);
  }

  /**
   * The timer's drain: DRAIN_SLICE_MS of it at a time, the rest after the
   * event loop has had its turn (setImmediate runs after pending I/O), so a
   * burst of recorded connections never holds up the packets queued behind it.
   */
  private drainSlice(): void {
    this.sliceQueued = false;
    const slice = new TimeSlices(DRAIN_SLICE_MS);
    do this.buffer.drain(this.visit, DRAIN_CHUNK);
    while (this.buffer.pending > 0 && !slice.due());
    if (this.buffer.pending > 0 && !this.sliceQueued && this.tap !== undefined) {
      this.sliceQueued = true;
      setImmediate(() => this.drainSlice());
    }
  }

  /** Ends the interval: drains, then emits every open record to the ring, the log and followers. */
  flush(): FlowRecord[] {
    this.drain();
    const out: FlowRecord[] = [];
    for (const { record, count, first, last } of this.open.values()) {
      record.count = count;
      record.firstSeen = new Date(first).toISOString();
      record.lastSeen = new Date(last).toISOString();
      out.push(record);
      for (const [direction, d] of [['egress', record.egress], ['ingress', record.ingress]] as const) {
        if (d.action === 'Accept' || d.action === 'Deny' || d.action === 'Failure') {
          this.verdictCounts.add({ stage: d.stage, policy: d.policy, rule: d.rule, direction, verdict: d.action.toLowerCase() }, count);
        }
      }
    }
    this.open.clear();
    this.keys.clear();
    this.byKey = [];
    this.ends.clear();
    this.attributions.clear();
    for (const r of out) this.keep(r);
    this.emitted += out.length;
    this.options.log?.write(out);
    for (const r of out) for (const f of this.followers) f(r);
    return out;
  }

  /** Records in the ring that pass `filter`, oldest first, at most `filter.limit` (the newest ones). */
  query(filter: FlowFilter = {}): FlowRecord[] {
    const all = this.ring.length < this.ringSize ? this.ring : [...this.ring.slice(this.ringStart), ...this.ring.slice(0, this.ringStart)];
    const hits = all.filter((r) => matchesFlow(r, filter));
    return filter.limit !== undefined && hits.length > filter.limit ? hits.slice(hits.length - filter.limit) : hits;
  }

  /** Every record in the ring, oldest first: what POST /v1/diff decides when a request brings no flows (RecordedFlowSource). */
  records(): FlowRecord[] {
    return this.query();
  }

  /** Calls `listener` with every record emitted from now on; returns the unsubscribe. */
  follow(listener: (r: FlowRecord) => void): () => void {
    this.followers.add(listener);
    return () => { this.followers.delete(listener); };
  }

  /** How many records the ring holds, and what was lost. */
  stats(): { ring: number; ringSize: number; open: number; connections: number; emitted: number; dropped: number; pending: number } {
    return { ring: this.ring.length, ringSize: this.ringSize, open: this.open.size, connections: this.connections, emitted: this.emitted, dropped: this.buffer.dropped, pending: this.buffer.pending };
  }

  private keep(r: FlowRecord): void {
    if (this.ring.length < this.ringSize) { this.ring.push(r); return; }
    this.ring[this.ringStart] = r;
    this.ringStart = (this.ringStart + 1) % this.ringSize;
  }

  private aggregate(slot: number): void {
    const b = this.buffer;
    this.connections++;
    const found = this.keys.entryOf(b, slot);
    let entry: OpenRecord;
    if (found >= 0) entry = this.byKey[found];
    else {
      // A key seen for the first time this interval: names, workloads and
      // attribution are worked out now, once; several keys can lead to one
      // record (two replicas of a workload, a NetworkPolicy deny naming its
      // subject pod in its codes).
      entry = this.entryFor(b.pipelineOf(slot) as Pipeline | undefined, slot);
      this.byKey[~found] = entry;
    }
    entry.count++;
    const t = b.timeOf(slot);
    if (t < entry.first) entry.first = t;
    if (t > entry.last) entry.last = t;
  }

  /** The open record a connection with a new key belongs to: an existing one with the same attribution, or a new one. */
  private entryFor(pipeline: Pipeline | undefined, slot: number): OpenRecord {
    const b = this.buffer;
    // The one-packet walk left the deciding stages' codes to the drain: asked once per key (and state).
    if (b.codesDeferred(slot)) {
      if (pipeline) pipeline.attributeDeferred(b, slot);
      else if (b.walkDeferred(slot)) b.walkLost(slot);
      else {
        for (let dir = 0; dir < 2; dir++) if (namesPolicy(b.direction(slot, dir).outcome)) b.codesLost(slot, dir);
        b.codesAsked(slot);
      }
    }
    // The pair walk left this denied connection's egress to the drain: walked once per key and interval.
    if (b.direction(slot, 0).outcome === Outcome.Pending) pipeline?.finishEgress(b, slot);
    const src = this.end('src', b.srcPod(slot), slot);
    const dst = this.end('dst', b.dstPod(slot), slot);
    const revision = b.revision(slot);
    const audited = pipeline !== undefined && pipeline.auditing.length > 0 && b.audited(slot);
    const egress = this.direction(pipeline, revision, slot, 0);
    const ingress = this.direction(pipeline, revision, slot, 1);
    const audit = audited ? this.audits(pipeline!, revision, slot) : [];
    const verdict: 'allow' | 'deny' = b.allowed(slot) ? 'allow' : 'deny';
    const port = b.dstPort(slot);
    const protocolNumber = b.protocol(slot);
    const protocol = protocolName(protocolNumber);
    const key = JSON.stringify([src.workload, dst.workload, port, protocol, verdict, revision, egress.stage, egress.policy, egress.rule, egress.action,
      ingress.stage, ingress.policy, ingress.rule, ingress.action, audit]);
    const known = this.open.get(key);
    if (known) return known;
    const record: FlowRecord = {
      src: src.name, dst: dst.name, port, protocol, family: b.family(slot) === 6 ? 6 : 4, srcPort: b.srcPort(slot),
      srcWorkload: src.workload, dstWorkload: dst.workload, srcLabels: src.labels, dstLabels: dst.labels,
      srcNamespaceLabels: src.namespaceLabels, dstNamespaceLabels: dst.namespaceLabels,
      dstPortName: dst.pod?.containerPorts.find((p) => p.port === port && p.protocol === protocolNumber)?.name ?? '',
      verdict, egress, ingress, audit, count: 0, firstSeen: '', lastSeen: '', revision, node: this.node,
    };
    const entry: OpenRecord = { record, count: 0, first: Infinity, last: -Infinity };
    this.open.set(key, entry);
    return entry;
  }

  /** One end of a connection: the pod as it is now (cached for the interval), or the address. */
  private end(which: 'src' | 'dst', podId: number, slot: number): End {
    if (podId !== 0) {
      const cached = this.ends.get(podId);
      if (cached) return cached;
      const pod = this.state.podById(podId);
      if (pod) {
        const obj = this.state.object(Kinds.Pod, `${pod.namespace}/${pod.name}`);
        const end: End = {
          name: `${pod.namespace}/${pod.name}`, workload: obj ? workloadOf(obj) : `${pod.namespace}/Pod/${pod.name}`,
          labels: { ...pod.podLabels }, namespaceLabels: { ...pod.namespaceLabels }, pod,
        };
        this.ends.set(podId, end);
        return end;
      }
    }
    const ip = formatIP(this.buffer.address(which, slot));
    return { name: ip, workload: ip, labels: NO_LABELS, namespaceLabels: NO_LABELS };
  }

  private direction(pipeline: Pipeline | undefined, revision: number, slot: number, dir: 0 | 1): FlowDirection {
    const d = this.buffer.direction(slot, dir);
    const action = ACTIONS[d.outcome] ?? 'Default';
    const stage = pipeline && d.stage >= 0 ? pipeline.stages[d.stage] : undefined;
    const out: FlowDirection = { stage: stage?.name ?? '', policy: '', rule: '', action };
    if (!stage || action === 'Failure') return out;
    const a = this.attribute(pipeline!, revision, d.stage, d.reason, d.rule);
    if (a) {
      out.policy = a.policy;
      out.rule = a.rule;
      if (a.peer) out.peer = a.peer;
      if (a.port) out.rulePort = a.port;
    }
    return out;
  }

  private audits(pipeline: Pipeline, revision: number, slot: number): FlowAudit[] {
    const out: FlowAudit[] = [];
    const b = this.buffer;
    for (let dir = 0; dir < 2; dir++) {
      for (let k = 0; k < MAX_AUDIT_STAGES && k < pipeline.auditing.length; k++) {
        const { verdict: v, reason, rule } = b.audit(slot, dir, k);
        // Not decided, or Next: the stage had nothing to say.
        if (v <= 1) continue;
        const stage = pipeline.auditing[k];
        const a = this.attribute(pipeline, revision, pipeline.stages.indexOf(stage), reason, rule);
        out.push({ stage: stage.name, direction: dir === 0 ? 'egress' : 'ingress', policy: a?.policy ?? '', rule: a?.rule ?? '', action: verdictName(v - 1) });
      }
    }
    return out;
  }

  private attribute(pipeline: Pipeline, revision: number, stageIndex: number, reason: number, rule: number): Attribution | undefined {
    if (reason === 0) return undefined;
    const key = `${revision}|${stageIndex}|${reason}|${rule}`;
    if (this.attributions.has(key)) return this.attributions.get(key);
    const a = pipeline.stages[stageIndex]?.attribution(reason, rule);
    this.attributions.set(key, a);
    return a;
  }
}
