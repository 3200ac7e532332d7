// Prometheus metrics for the agent, all prefixed `kwp_`, in a registry of
// their own (an embedder's registry is left alone). Nothing here runs per
// packet except the decision-time sampler, which times one decision in
// `sampleEvery`: verdict and failure counts are read from Stage.counters when
// Prometheus scrapes, and flushed once more just before a pipeline is disposed.
import type { Dataplane, DataplaneCounters } from '../dataplane/dataplane.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { performance } from 'node:perf_hooks';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { Stage, StageCounters } from '../pipeline/stage.js';
import type { PipelineController } from '../control/pipeline-controller.js';
import type { ModuleStore } from '../control/module-store.js';
import { readNfqueueStats, NFQUEUE_PROC_FILE } from './nfqueue-stats.js';
import type { FlowRecorder } from '../flow-records/flow-recorder.js';

export interface AdminMetricsOptions {
  controller: PipelineController;
  store?: ModuleStore;
  /** Time one decision in this many per stage (default 64). */
  sampleEvery?: number;
  nfqueueStatsFile?: string;
  /** Node's process metrics (CPU, memory, event loop lag); default true. */
  processMetrics?: boolean;
  /** The agent's dataplane, when it has one: its counters and packet-process times are exported (read at scrape time, so it may start later). */
  dataplane?: Pick<Dataplane, 'counters' | 'decisionMicros'> & Partial<Pick<Dataplane, 'strictCutPath'>>;
  /** The flow recorder, when recording: per-policy verdict counts (kwp_policy_verdicts_total). */
  flows?: FlowRecorder;
}

type Snapshot = Pick<StageCounters, 'traps' | 'fuelExhausted' | 'unavailable' | 'deadlineExceeded' | 'rebuilds'> & { byDirection: Float64Array };
const ZERO: Snapshot = { byDirection: new Float64Array(8), traps: 0, fuelExhausted: 0, unavailable: 0, deadlineExceeded: 0, rebuilds: 0 };
/** Label per ABI verdict number. */
const VERDICT_LABELS = ['next', 'accept', 'deny', 'pass'] as const;

export class AdminMetrics {
  readonly registry = new Registry();
  private readonly seen = new Map<Stage, Snapshot>();
  /** Stages whose decide and decideVerdicts sample decision times. */
  private readonly timed = new WeakSet<Stage>();
  private readonly verdicts: Counter<'stage' | 'module' | 'direction' | 'verdict'>;
  private readonly traps: Counter<'module' | 'stage'>;
  private readonly fuel: Counter<'module' | 'stage'>;
  private readonly unavailable: Counter<'module' | 'stage'>;
  private readonly deadlines: Counter<'module' | 'stage'>;
  private readonly rebuilds: Counter<'module' | 'stage'>;
  private readonly decisionSeconds: Histogram<'stage'>;
  private readonly swaps: Counter<'action'>;
  private readonly uploads: Counter<'outcome'>;
  private readonly uploadsSeen = new Map<string, number>();
  private readonly sampleEvery: number;

  constructor(private readonly options: AdminMetricsOptions) {
    const registers = [this.registry];
    const sync = () => this.sync();
    this.sampleEvery = Math.max(1, options.sampleEvery ?? 64);
    this.verdicts = new Counter({
      name: 'kwp_stage_verdicts_total',
      help: 'Verdicts returned by each stage, by direction of the walk (egress: the source is the subject; ingress: the destination).',
      labelNames: ['stage', 'module', 'direction', 'verdict'], registers, collect: sync,
    });
    this.traps = new Counter({ name: 'kwp_module_traps_total', help: 'Calls that trapped, by module and stage.', labelNames: ['module', 'stage'], registers, collect: sync });
    this.fuel = new Counter({ name: 'kwp_module_fuel_exhausted_total', help: 'Calls that ran out of fuel, by module and stage.', labelNames: ['module', 'stage'], registers, collect: sync });
    this.deadlines = new Counter({
      name: 'kwp_stage_deadline_exceeded_total',
      help: 'Module calls that overran their wall-clock deadline (sandbox limits decisionDeadlineMs, callDeadlineMs): the thread running the module was stopped and the stage answered its failure policy.',
      labelNames: ['module', 'stage'], registers, collect: sync,
    });
    this.rebuilds = new Counter({ name: 'kwp_stage_rebuilds_total', help: 'Instances a stage rebuilt after its module broke (trap, fuel, deadline) or outgrew its memory cap.', labelNames: ['module', 'stage'], registers, collect: sync });
    this.unavailable = new Counter({ name: 'kwp_stage_unavailable_total', help: 'Decisions answered by the failure policy while the stage rebuilt its module.', labelNames: ['module', 'stage'], registers, collect: sync });
    // Counted by the flow recorder at each drain (off the packet path), one per
    // decided direction; label sets are capped (docs/flows.md, "Metrics").
    const flows = options.flows;
    new Counter({
      name: 'kwp_policy_verdicts_total',
      help: 'Connections decided, by the stage, policy and rule that decided each direction (from flow recording; label sets past the cap count as policy="other").',
      labelNames: ['stage', 'policy', 'rule', 'direction', 'verdict'], registers,
      collect() {
        const recorder = flows;
        if (!recorder) return;
        this.reset();
        for (const { labels, count } of recorder.verdictCounts.entries()) this.inc(labels, count);
      },
    });
    new Counter({
      name: 'kwp_policy_verdict_label_sets_dropped_total',
      help: 'Distinct stage/policy/rule/direction/verdict label sets counted into the policy="other" series because kwp_policy_verdicts_total reached its cap.',
      registers,
      collect() { this.reset(); this.inc(flows?.verdictCounts.droppedLabelSets ?? 0); },
    });
    new Counter({
      name: 'kwp_flow_records_dropped_total',
      help: 'Decided connections not recorded because the packet path filled the flow buffer before the recorder drained it.',
      registers,
      collect() { this.reset(); this.inc(flows?.buffer.dropped ?? 0); },
    });
    new Counter({
      name: 'kwp_flow_records_unattributed_total',
      help: 'Directions of flow records whose deciding stage or rule the drain could not work out (action Unknown, or a policy without its rule), counted once per flow key and drain interval: a stage failed between the connection and the drain, or answered the drain otherwise than the packet.',
      registers,
      collect() { this.reset(); this.inc(flows?.buffer.unattributed ?? 0); },
    });
    this.decisionSeconds = new Histogram({
      name: 'kwp_stage_decision_seconds',
      help: `Time one stage takes for one decision, sampled one decision in ${this.sampleEvery}.`,
      labelNames: ['stage'], registers,
      buckets: [0.25e-6, 0.5e-6, 1e-6, 2e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 1e-3, 10e-3],
    });
    const controller = options.controller;
    new Gauge({
      name: 'kwp_pipeline_revision', help: 'Revision of the active pipeline.', registers,
      collect() { this.set(controller.livePipelines()[0]?.revision ?? 0); },
    });
    new Gauge({
      name: 'kwp_pipeline_stages', help: 'Stages in the active pipeline.', registers,
      collect() { this.set(controller.livePipelines()[0]?.stages.length ?? 0); },
    });
    // Gauges, not counters: the module keeps the counts, and they start again
    // with every new instance (a rebuild after a trap, a pipeline swap).
    const cacheGauge = (name: string, help: string, pick: (s: { hits: number; misses: number }) => number) => new Gauge({
      name, help, labelNames: ['stage', 'module'], registers,
      collect() {
        this.reset();
        for (const s of controller.livePipelines()[0]?.stages ?? []) {
          const stats = s.decisionCacheStats();
          if (stats) this.set({ stage: s.name, module: s.compiled.meta.name }, pick(stats));
        }
      },
    });
    cacheGauge('kwp_stage_decision_cache_hits', 'Decisions the stage answered from its decision cache since its module instance started.', (s) => s.hits);
    cacheGauge('kwp_stage_decision_cache_misses', 'Decisions the stage computed (decision-cache misses) since its module instance started.', (s) => s.misses);
    this.swaps = new Counter({ name: 'kwp_pipeline_swaps_total', help: 'Pipeline activations, by action (startup, set, rollback, auto-rollback).', labelNames: ['action'], registers });
    this.uploads = new Counter({
      name: 'kwp_module_uploads_total', help: 'Module uploads by outcome: stored, unchanged, or the KWP_ERR code that refused them.',
      labelNames: ['outcome'], registers, collect: () => this.syncUploads(),
    });
    const file = options.nfqueueStatsFile ?? NFQUEUE_PROC_FILE;
    const queueGauge = (name: string, help: string, pick: (s: ReturnType<typeof readNfqueueStats>[number]) => number) =>
      new Gauge({
        name, help, labelNames: ['queue'], registers,
        collect() {
          this.reset();
          for (const s of readNfqueueStats(file)) this.set({ queue: String(s.queue) }, pick(s));
        },
      });
    queueGauge('kwp_nfqueue_waiting_packets', 'Packets waiting in each NFQUEUE for a verdict (kernel view).', (s) => s.waiting);
    queueGauge('kwp_nfqueue_queue_dropped_packets', 'Packets the kernel dropped because the queue was full (since the queue was bound).', (s) => s.queueDropped);
    queueGauge('kwp_nfqueue_user_dropped_packets', 'Packets the kernel could not deliver to the agent socket (since the queue was bound).', (s) => s.userDropped);
    this.stageStateMetrics(controller, registers);
    if (options.dataplane) this.dataplaneMetrics(options.dataplane, registers);
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'kwp_' });

    controller.observe({
      built: (p) => this.instrument(p),
      activated: (_next, _previous, entry) => this.swaps.inc({ action: entry.action }),
      retired: (p) => {
        for (const s of p.stages) this.flush(s);
        // A stage the engine shares with a live pipeline keeps counting: forgetting what was flushed would count it again.
        const live = new Set(controller.livePipelines().filter((q) => q !== p).flatMap((q) => q.stages));
        for (const s of p.stages) if (!live.has(s)) this.seen.delete(s);
      },
    });
    for (const p of controller.livePipelines()) this.instrument(p);
  }

  /**
   * Times one decision in `sampleEvery` on each stage: single decisions, and
   * (when the stage has a batched path) one batch in `sampleEvery`, observed
   * as its time per record.
   */
  private instrument(p: Pipeline): void {
    const every = this.sampleEvery;
    for (const stage of p.stages) {
      // A stage shared with an earlier revision (PolicyEngine) is timed already.
      if (this.timed.has(stage)) continue;
      this.timed.add(stage);
      const hist = this.decisionSeconds.labels({ stage: stage.name });
      const decide = stage.decide.bind(stage);
      let n = 0;
      stage.decide = (record: Uint8Array): number => {
        if (++n < every) return decide(record);
        n = 0;
        const t = performance.now();
        const v = decide(record);
        hist.observe((performance.now() - t) / 1000);
        return v;
      };
      // The codes' arrays are passed on: flow recording reads them from every batch, sampled or not.
      const batched = stage as unknown as { decideVerdicts?: (records: Uint8Array, count: number, verdicts: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array) => void };
      const decideVerdicts = batched.decideVerdicts?.bind(stage);
      if (decideVerdicts) {
        let b = 0;
        batched.decideVerdicts = (records, count, verdicts, reasons, rules) => {
          if (++b < every || count === 0) return decideVerdicts(records, count, verdicts, reasons, rules);
          b = 0;
          const t = performance.now();
          decideVerdicts(records, count, verdicts, reasons, rules);
          hist.observe((performance.now() - t) / 1000 / count);
        };
      }
      // The pair walk (ABI 1.4) decides through decidePairs: one batch in `sampleEvery`, per record.
      const decidePairs = stage.decidePairs.bind(stage);
      let q = 0;
      stage.decidePairs = (records, count, egress, ingress, codes) => {
        if (++q < every || count === 0) return decidePairs(records, count, egress, ingress, codes);
        q = 0;
        const t = performance.now();
        decidePairs(records, count, egress, ingress, codes);
        hist.observe((performance.now() - t) / 1000 / count);
      };
    }
  }

  /** Dataplane counters as monotonic counters, and its packet-process times as a histogram, all read at scrape time. */
  private dataplaneMetrics(dp: NonNullable<AdminMetricsOptions['dataplane']>, registers: Registry[]): void {
    const counters: Array<[keyof DataplaneCounters, string]> = [
      ['packets', 'Packets the policy queue delivered to the agent.'],
      ['accepted', 'Queued packets the pipeline accepted.'],
      ['dropped', 'Queued packets the pipeline denied (dropped).'],
      ['parseErrors', 'Queued packets that could not be parsed (given the configured default).'],
      ['dnsAnswers', 'DNS answers observed for domainNames peers.'],
      ['strictCut', 'Accepted connections strict mode cut because the policy now denies them.'],
      ['strictCutFailures', 'Connections strict mode should have cut but could not (logged with the error).'],
    ];
    for (const [field, help] of counters) {
      const name = `kwp_dataplane_${field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`;
      let last = 0;
      new Counter({
        name, help, registers,
        collect() {
          const now = Number(dp.counters[field]);
          if (now > last) this.inc(now - last);
          last = now;
        },
      });
    }
    new Gauge({
      name: 'kwp_dataplane_strict_cut_path', help: 'How strict mode cuts connections: 1 for the path in use, netlink (batches through the kwp-conntrack-netlink addon) or conntrack-process (one conntrack process per connection); absent without strict mode.',
      labelNames: ['path'], registers,
      collect() {
        this.reset();
        const path = dp.strictCutPath;
        if (path) this.set({ path }, 1);
      },
    });
    new Gauge({
      name: 'kwp_packet_process_micros', help: 'Time from a queued packet to its verdict, percentiles over the agent\'s life, in microseconds.',
      labelNames: ['quantile'], registers,
      collect() {
        this.set({ quantile: '0.5' }, dp.decisionMicros.p50());
        this.set({ quantile: '0.99' }, dp.decisionMicros.p99());
      },
    });
  }

  /** Per stage of the active pipeline: its memory and cap, and whether it answers with the cluster's current state. */
  private stageStateMetrics(controller: PipelineController, registers: Registry[]): void {
    const stageGauge = (name: string, help: string, read: (s: Stage) => number, extraLabels: string[] = [], labels?: (s: Stage) => Record<string, string>) => new Gauge({
      name, help, labelNames: ['stage', 'module', ...extraLabels], registers,
      collect() {
        this.reset();
        for (const s of controller.livePipelines()[0]?.stages ?? []) {
          this.set({ stage: s.name, module: s.compiled.meta.name, ...labels?.(s) }, read(s));
        }
      },
    });
    stageGauge('kwp_stage_memory_pages', 'Pages (64 KiB) of linear memory the stage instance uses.', (s) => s.memoryBytes / 65536);
    stageGauge('kwp_stage_memory_cap_pages', 'Pages the stage instance may grow to: maxMemoryPages plus memoryPerStateByte per byte of its state, at most maxStageMemoryPages (docs/sandbox.md).', (s) => s.memoryCapPages);
    stageGauge('kwp_stage_state_bytes', 'Bytes of state (PodInfo records, objects as JSON) the stage instance holds.', (s) => s.heldBytes);
    stageGauge('kwp_stage_state_stale',
      '1 while the stage answers with another state than the cluster\'s; reason: growing (a bigger instance is being fed), rebuilding (its module broke), refreshing (a change too large to deliver at once is being fed to a fresh instance), rejected (it cannot hold the current state and keeps the last one it held).',
      (s) => (s.stateProblem ? 1 : 0), ['reason'], (s) => ({ reason: s.stateProblem?.kind ?? 'none' }));
    stageGauge('kwp_stage_state_rejected', 'States the stage\'s module could not hold within the per-stage memory ceiling, since the stage started.', (s) => s.stateCounters.rejected);
  }

  private sync(): void {
    for (const p of this.options.controller.livePipelines()) for (const s of p.stages) this.flush(s);
  }

  private flush(stage: Stage): void {
    const last = this.seen.get(stage) ?? ZERO;
    const c = stage.counters;
    const labels = { stage: stage.name, module: stage.compiled.meta.name };
    const add = (counter: Counter<any>, extra: Record<string, string>, now: number, before: number) => {
      if (now > before) counter.inc({ ...labels, ...extra }, now - before);
    };
    const byDirection = stage.verdictsByDirection;
    for (let i = 0; i < 8; i++) {
      add(this.verdicts, { direction: i < 4 ? 'egress' : 'ingress', verdict: VERDICT_LABELS[i & 3] }, byDirection[i], last.byDirection[i]);
    }
    add(this.traps, {}, c.traps, last.traps);
    add(this.fuel, {}, c.fuelExhausted, last.fuelExhausted);
    add(this.unavailable, {}, c.unavailable, last.unavailable);
    add(this.deadlines, {}, c.deadlineExceeded, last.deadlineExceeded);
    add(this.rebuilds, {}, c.rebuilds, last.rebuilds);
    this.seen.set(stage, {
      byDirection: Float64Array.from(byDirection), traps: c.traps, fuelExhausted: c.fuelExhausted, unavailable: c.unavailable,
      deadlineExceeded: c.deadlineExceeded, rebuilds: c.rebuilds,
    });
  }

  private syncUploads(): void {
    const store = this.options.store;
    if (!store) return;
    for (const [outcome, count] of store.uploadOutcomes) {
      const before = this.uploadsSeen.get(outcome) ?? 0;
      if (count > before) this.uploads.inc({ outcome }, count - before);
      this.uploadsSeen.set(outcome, count);
    }
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
