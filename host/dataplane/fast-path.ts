// The kernel fast path: tuples the pipeline decided go into kernel sets
// (fast-path-rules.ts), so the next connections with the same source,
// destination, protocol and destination port are accepted or dropped without
// leaving the kernel. docs/dataplane.md, "The kernel fast path".
//
// The packet path only appends to an array (`add`); the sets are filled in
// batches, one `ipset restore` or `nft -f` at a time, off the packet path.
//
// Race freedom rests on two things:
//   - a generation: `ticket()` before a decision, `valid(ticket)` after it.
//     Every invalidation bumps the generation and drops what is waiting, so
//     a verdict decided before a change is never added after it;
//   - one order for every kernel step (KernelRules.exclusive): a fill that
//     is already running when a change comes finishes before the
//     invalidation's swap or flush, so whatever it wrote is removed with the
//     rest, and a fill queued behind the invalidation reads the waiting list
//     only when it runs, i.e. after the change.

import type { Packet } from '../contract.js';
import type { HostLogger } from '../logger.js';
import { fillScript, hasTupleKey, invalidateScript, type DecidedTuple, type FastPathRuleOptions } from './fast-path-rules.js';
import { LatencyHistogram } from './latency-histogram.js';

/** What made the sets forget everything (kwp_fastpath_invalidations_total{cause}). */
export type InvalidationCause =
  /** An object other than a Pod: policies, namespaces, nodes, Services, resolved DNS names. */
  | 'object'
  /** A pod added, changed (labels, IPs, ports, placement) or deleted. */
  | 'pod'
  /** A pipeline was activated. */
  | 'pipeline'
  /** A pipeline with an audit stage was activated: the fast path stays off while it is active. */
  | 'audit'
  /** A stage trapped, ran out of fuel or overran its deadline. */
  | 'stage';

export const INVALIDATION_CAUSES: readonly InvalidationCause[] = ['object', 'pod', 'pipeline', 'audit', 'stage'];

export interface FastPathOptions extends FastPathRuleOptions {
  /** How long decided tuples gather before a fill runs (default 5 ms). */
  fillDelayMs?: number;
  /** Tuples one fill writes at most (default 4096); more go into the next. */
  batchSize?: number;
  /** Decided tuples waiting at most; beyond it they are not kept (counted in `overflow`). Default 16384. */
  maxPending?: number;
  /**
   * Test only (KWP_TEST_FAST_PATH_FLUSH_DELAY_MS): every invalidation waits
   * this long, inside the kernel order, before it empties the sets, so an
   * end-to-end test can open a connection while a stale entry still decides
   * and check that strict mode cuts it all the same. Never set in production:
   * for that long the sets keep deciding as before the change.
   */
  testFlushDelayMs?: number;
}

/** What the fast path needs of the kernel rules (KernelRules). */
export interface FastPathKernel {
  readonly queueMode: 'nft' | 'xtables' | undefined;
  readonly fastPathReady: boolean;
  exclusive<T>(step: () => Promise<T>): Promise<T>;
  runFastPathScript(script: string): Promise<void>;
  kernelDecided(): Promise<{ accept: number; deny: number }>;
}

export interface FastPathCounters {
  /** Distinct entries written to the sets, by verdict. */
  added: { accept: number; deny: number };
  /** Fill scripts run. */
  batches: number;
  /** Fill scripts the kernel refused (a full set, say); their tuples are decided by the agent again. */
  fillErrors: number;
  /** Decided tuples not kept because too many were waiting. */
  overflow: number;
  /** Invalidations, by cause (coalesced ones each count). */
  invalidations: Record<InvalidationCause, number>;
  /** Swaps or flushes that reached the kernel. */
  flushes: number;
}

/**
 * What the judge says about the pipeline behind the next decision: -1 when
 * it must not be remembered (a stage answers with another state than the
 * cluster's), otherwise a count that changes whenever a stage answers by its
 * failure policy (so a decision that did is not remembered).
 */
export type JudgeHealth = () => number;

interface Waiting extends DecidedTuple {
  at: number;
}

export class FastPath {
  readonly counters: FastPathCounters = {
    added: { accept: 0, deny: 0 },
    batches: 0,
    fillErrors: 0,
    overflow: 0,
    invalidations: { object: 0, pod: 0, pipeline: 0, audit: 0, stage: 0 },
    flushes: 0,
  };
  /** From a tuple's decision to the end of the fill that wrote it, in microseconds. */
  readonly fillLagMicros = new LatencyHistogram();

  private generationValue = 1;
  private ready = false;
  /** Until someone takes on invalidating (invalidateFastPathOnChange, or an embedder's `block(undefined)`), nothing is kept. */
  private blockedBy: string | undefined = 'nothing invalidates it yet';
  private health: JudgeHealth = () => 0;
  private ticketHealth = 0;
  private waiting: Waiting[] = [];
  private fillTimer: NodeJS.Timeout | undefined;
  private flushQueued = false;
  /** Set when a fill starts, cleared when an invalidation reaches the kernel: whether the sets may hold anything. */
  private kernelMayHold = false;
  private last: Promise<unknown> = Promise.resolve();
  private lastFillError = 0;
  /** An invalidation failed to reach the kernel: nothing is kept until one does. */
  private flushFailed = false;

  private readonly fillDelayMs: number;
  private readonly batchSize: number;
  private readonly maxPending: number;
  private readonly testFlushDelayMs: number;

  constructor(
    private readonly kernel: FastPathKernel,
    private readonly tableName: string,
    options: FastPathOptions,
    private readonly logger: HostLogger,
  ) {
    this.fillDelayMs = options.fillDelayMs ?? 5;
    this.batchSize = options.batchSize ?? 4096;
    this.maxPending = options.maxPending ?? 16384;
    this.testFlushDelayMs = options.testFlushDelayMs ?? 0;
    if (this.testFlushDelayMs > 0) {
      logger.warn({ delayMs: this.testFlushDelayMs }, 'kernel fast path: test hook KWP_TEST_FAST_PATH_FLUSH_DELAY_MS is set; every invalidation reaches the kernel that much later (tests only, never in production)');
    }
  }

  /** Bumped by every invalidation. */
  get generation(): number {
    return this.generationValue;
  }

  /** Why no tuple is being kept right now, or undefined while the fast path works. */
  get blocker(): string | undefined {
    if (!this.ready) return 'the kernel rules have no fast path';
    if (this.flushFailed) return 'the sets could not be emptied after a change';
    return this.blockedBy;
  }

  /** Called once the kernel rules are installed: from now on decided tuples are kept when the kernel has the sets. */
  start(): void {
    this.ready = this.kernel.fastPathReady;
  }

  /** Stop keeping tuples (the rules are being removed). */
  stop(): void {
    this.ready = false;
    this.waiting = [];
    clearTimeout(this.fillTimer);
    this.fillTimer = undefined;
  }

  /** The function telling whether a decision may be remembered (see JudgeHealth). */
  setJudgeHealth(health: JudgeHealth): void {
    this.health = health;
  }

  /**
   * Before a decision: the generation it is made in, or -1 when its verdict
   * must not be kept. Pass it to `valid` after the decision.
   */
  ticket(): number {
    if (!this.ready || this.blockedBy !== undefined || this.flushFailed) return -1;
    const health = this.health();
    if (health < 0) return -1;
    this.ticketHealth = health;
    return this.generationValue;
  }

  /** After the decision: true when nothing changed since `ticket` that could have changed it. */
  valid(ticket: number): boolean {
    return ticket >= 0 && ticket === this.generationValue && this.health() === this.ticketHealth;
  }

  /** Keep one decided tuple (call only after `valid` said yes). Cheap: the sets are filled later. */
  add(packet: Packet, allowed: boolean): void {
    if (!hasTupleKey(packet) || packet.serviceHairpin) return;
    if (this.waiting.length >= this.maxPending) {
      this.counters.overflow++;
      return;
    }
    this.waiting.push({ packet, verdict: allowed ? 'accept' : 'deny', at: performance.now() });
    if (this.fillTimer === undefined) this.fillTimer = setTimeout(() => this.scheduleFill(), this.fillDelayMs);
  }

  /**
   * Forget every decided tuple, now: nothing decided before this call is
   * added after it, and the sets are emptied in the kernel as soon as any
   * fill already running has finished.
   */
  invalidate(cause: InvalidationCause): void {
    this.generationValue++;
    this.counters.invalidations[cause]++;
    this.waiting = [];
    if (this.flushQueued || !this.kernelMayHold) return;
    this.flushQueued = true;
    this.enqueue(() => this.flushKernel());
  }

  /**
   * Turn the fast path off while `reason` holds (an audit stage must see
   * every connection; a stage whose verdicts may depend on more than the
   * tuple), or on again with undefined. Either way the sets are invalidated.
   */
  block(reason: string | undefined, cause: InvalidationCause): void {
    if (reason !== this.blockedBy) {
      if (reason) this.logger.info({ reason }, 'kernel fast path off: every new connection goes to the agent');
      else if (this.blockedBy) this.logger.info({}, 'kernel fast path on again');
    }
    this.blockedBy = reason;
    this.invalidate(cause);
  }

  /** Resolves once every kernel step queued so far (fills, swaps) has finished. */
  settled(): Promise<void> {
    return this.last.then(() => undefined, () => undefined);
  }

  /** Packets the kernel decided through the sets since the rules went in (rule counters). */
  kernelDecided(): Promise<{ accept: number; deny: number }> {
    return this.kernel.kernelDecided();
  }

  private enqueue(step: () => Promise<void>): void {
    const run = this.kernel.exclusive(step);
    this.last = run.catch(() => undefined);
  }

  private scheduleFill(): void {
    this.fillTimer = undefined;
    this.enqueue(() => this.fill());
  }

  /** One batch into the sets. Reads the waiting list when it runs, not when it was queued. */
  private async fill(): Promise<void> {
    if (!this.ready || this.blockedBy !== undefined || this.flushFailed) {
      this.waiting = [];
      return;
    }
    const batch = this.waiting.length <= this.batchSize ? this.waiting : this.waiting.slice(0, this.batchSize);
    this.waiting = batch === this.waiting ? [] : this.waiting.slice(this.batchSize);
    if (this.waiting.length > 0 && this.fillTimer === undefined) this.fillTimer = setTimeout(() => this.scheduleFill(), 0);
    if (batch.length === 0) return;
    const { script, accept, deny } = fillScript(this.kernel.queueMode!, this.tableName, batch);
    if (script === '') return;
    this.kernelMayHold = true;
    try {
      await this.kernel.runFastPathScript(script);
    } catch (err) {
      this.counters.fillErrors++;
      const now = Date.now();
      if (now - this.lastFillError > 60_000) {
        this.lastFillError = now;
        this.logger.warn({ error: err instanceof Error ? err.message : String(err), tuples: batch.length }, 'kernel fast path: a fill was refused (the agent keeps deciding those tuples); further refusals within a minute are only counted');
      }
      return;
    }
    this.counters.batches++;
    this.counters.added.accept += accept;
    this.counters.added.deny += deny;
    const done = performance.now();
    for (const w of batch) this.fillLagMicros.record((done - w.at) * 1000);
  }

  private async flushKernel(): Promise<void> {
    this.flushQueued = false;
    if (this.testFlushDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.testFlushDelayMs));
    try {
      await this.kernel.runFastPathScript(invalidateScript(this.kernel.queueMode!, this.tableName));
      this.kernelMayHold = false;
      this.flushFailed = false;
      this.counters.flushes++;
    } catch (err) {
      // The sets may still hold stale tuples: keep no new ones until a later invalidation gets through.
      this.logger.error({ error: err instanceof Error ? err.message : String(err) }, 'kernel fast path: the sets could not be emptied; no tuple is kept until the next invalidation succeeds');
      this.flushFailed = true;
      throw err;
    }
  }
}
