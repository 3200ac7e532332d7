// A module instance in a thread of its own: the wall-clock backstop that does
// not depend on fuel. The calling thread (the agent's main thread, which also
// runs the sources, the admin API and /healthz) hands each call to the
// instance's thread through shared memory and waits for it with a deadline
// (sandbox limits decisionDeadlineMs for kwp_decide, callDeadlineMs for every
// other call). A call that has not returned by then is abandoned: the thread
// is terminated (V8 stops wasm at the next loop back-edge or call, ~10 ms),
// the instance is broken with KWP_ERR_DEADLINE_EXCEEDED, and the stage answers
// its failure policy and rebuilds off the packet path (stage.ts).
//
// The deadline counts from the moment the thread picked the call up, not from
// the request: on a loaded node a thread may wait for a core, and that wait
// is not the module's. A thread that does not even pick a call up within
// PICKUP_GRACE_MS is taken for dead.
import { parseAttribution, type Attribution } from '../abi/attribution.js';
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import { startPackageWorker } from '../package-worker.js';
import { RECORD_SIZE } from '../abi/record.js';
import type { CompiledEvaluator } from './loader.js';
import type { DecisionCacheStats, ModuleInstance } from './instance.js';
import type { HostLogger } from '../logger.js';
import {
  BOOT_SEQ, CLOCK_SLOT, CTL_BYTES, Ctl, INITIAL_PAYLOAD_BYTES, MAX_BATCH, Op, PAYLOAD_OFFSET, VERDICTS_OFFSET,
  codesView, monotonicMs, type LogMessage, type PortMessage, type WorkerSetup,
} from './instance-protocol.js';

/** How long a thread may take to start before it runs module code (loading the host's code, not the module's). */
const BOOT_GRACE_MS = 60_000;
/** How long an idle instance thread may take to pick up a call before it is taken for dead. */
const PICKUP_GRACE_MS = 2_000;

/** Atomics.waitAsync (Node 16+); the compiler's ES2022 library does not declare it yet. */
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: false; value: string } | { async: true; value: Promise<string> };
}).waitAsync;

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/**
 * The V8 heap of an instance's thread: it holds the host's instance code and
 * each call's arguments, never the module's memory (a WebAssembly memory is
 * outside the heap). A thread past it dies, which the next call handles as a
 * trap. Applied when the thread runs the compiled package; a thread started
 * from the TypeScript sources (tests) may first load the compiler, and runs
 * without it.
 */
export const THREAD_HEAP_LIMITS = { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 } as const;
/**
 * What one instance thread may cost outside its module's memory, counted in
 * memoryBudgetMiB for every stage that runs its instance in a thread: the
 * heap above and about 4 MiB of isolate, code and stack (a thread measured 5
 * to 7 MiB of RSS beside a 3 MiB module memory).
 */
export const INSTANCE_THREAD_BYTES = (THREAD_HEAP_LIMITS.maxOldGenerationSizeMb + THREAD_HEAP_LIMITS.maxYoungGenerationSizeMb + 4) * 1048576;

/** Threads started and stopped by deadlines, process-wide: evidence for tests and the bench. */
export const isolationCounters = { threadsStarted: 0, threadsStopped: 0 };

/** A decision posted without waiting (IsolatedInstance.decideIntoAsync). */
interface Flight {
  seq: number;
  done: boolean;
  error: unknown;
  /** Copies the verdicts out of the shared buffer (throws when the call failed). */
  take: () => void;
}

export class IsolatedInstance implements ModuleInstance {
  readonly name: string;
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly ctl: Int32Array;
  private readonly clock: Float64Array;
  private data: Uint8Array;
  private seq = 0;
  private closed = false;
  private exited = false;
  private reason = 0;
  private rule = 0;
  private readonly decisionDeadlineMs: number;
  private readonly callDeadlineMs: number;
  private readonly feedDeadlineMs: number;
  /** See ModuleInstance.feeding: configuration and deliveries return at once, `settle` waits. */
  feeding = false;
  /** The call posted while feeding that nobody waited for yet. */
  private pending: { seq: number; what: string } | undefined;
  /**
   * The decision posted by decideIntoAsync, not yet landed: whoever sees it
   * done first (its awaiting caller, or the next call, which must wait for
   * it before it writes the shared buffer) copies its verdicts out.
   */
  private flight: Flight | undefined;
  /** close() was asked while a flight was out: the thread stops once it lands (within decisionDeadlineMs). */
  private closeWhenLanded = false;
  batchCapacity = 0;
  memoryCapPages = 0;
  broken: KwpError | undefined;

  private constructor(private readonly compiled: CompiledEvaluator, logger: HostLogger | undefined, memoryPages: number | undefined) {
    this.name = compiled.meta.name;
    this.decisionDeadlineMs = compiled.limits.decisionDeadlineMs;
    this.callDeadlineMs = compiled.limits.callDeadlineMs;
    this.feedDeadlineMs = compiled.limits.feedDeadlineMs;
    const control = new SharedArrayBuffer(CTL_BYTES);
    const data = new SharedArrayBuffer(PAYLOAD_OFFSET + INITIAL_PAYLOAD_BYTES);
    this.ctl = new Int32Array(control, 0, 16);
    this.clock = new Float64Array(control);
    this.data = new Uint8Array(data);
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const { meta, sha256, size, memoryImport, limits, source, reservedBytes } = compiled;
    const setup: WorkerSetup = { module: compiled.module, compiled: { meta, sha256, size, memoryImport, limits, source, reservedBytes }, memoryPages, control, data, port: port2 };
    this.worker = startPackageWorker(new URL('./instance-worker.js', import.meta.url), { workerData: setup, transferList: [port2], resourceLimits: THREAD_HEAP_LIMITS });
    isolationCounters.threadsStarted++;
    // The thread never keeps the process alive, and its log lines arrive through the event loop.
    this.worker.unref();
    this.port.unref();
    this.worker.on('message', (m: LogMessage) => {
      if (m && typeof m === 'object' && 'log' in m) logger?.[m.log.level](m.log.fields ?? {}, m.log.message);
    });
    this.worker.on('error', () => { this.exited = true; });
    this.worker.on('exit', () => { this.exited = true; });
  }

  /** Starts the thread and waits (blocking) until the module is instantiated. Throws KWP_ERR_INSTANTIATE or KWP_ERR_DEADLINE_EXCEEDED. */
  static start(compiled: CompiledEvaluator, logger?: HostLogger, options: { memoryPages?: number } = {}): IsolatedInstance {
    const inst = new IsolatedInstance(compiled, logger, options.memoryPages);
    const started = monotonicMs();
    for (;;) {
      Atomics.wait(inst.ctl, Ctl.READY, 0, 50);
      if (inst.bootDone(started)) return inst;
    }
  }

  /** `start`, waiting without blocking the calling thread's event loop (thread start-up takes tens of ms). */
  static async startAsync(compiled: CompiledEvaluator, logger?: HostLogger, options: { memoryPages?: number } = {}): Promise<IsolatedInstance> {
    const inst = new IsolatedInstance(compiled, logger, options.memoryPages);
    const started = monotonicMs();
    for (;;) {
      const wait = waitAsync(inst.ctl, Ctl.READY, 0, 50);
      if (wait.async) await wait.value;
      if (inst.bootDone(started, inst.feedDeadlineMs, 'feedDeadlineMs')) return inst;
    }
  }

  /** True once instantiated; throws when instantiation failed or overran its deadline. */
  private bootDone(started: number, deadlineMs = this.callDeadlineMs, limitName = 'callDeadlineMs'): boolean {
    const ready = Atomics.load(this.ctl, Ctl.READY);
    if (ready === 1) {
      // The thread splits a batch by the module's own capacity (ctl A0), so one call carries any batch.
      this.batchCapacity = MAX_BATCH;
      this.memoryCapPages = this.ctl[Ctl.A1];
      return true;
    }
    if (ready === 2) {
      const err = this.portError() ?? new KwpError('KWP_ERR_INSTANTIATE', `${this.compiled.source}: instantiation failed`);
      this.close();
      throw err;
    }
    const now = monotonicMs();
    if (Atomics.load(this.ctl, Ctl.PICKED) === BOOT_SEQ) {
      if (now - this.clock[CLOCK_SLOT] >= deadlineMs) this.overran('instantiation (its start function)', deadlineMs, limitName);
    } else if (this.exited || now - started > BOOT_GRACE_MS) {
      this.close();
      throw new KwpError('KWP_ERR_INSTANTIATE', `${this.compiled.source}: the thread for its instance did not start within ${BOOT_GRACE_MS / 1000} s`);
    }
    return false;
  }

  private portError(): KwpError | undefined {
    const msg = receiveMessageOnPort(this.port)?.message as PortMessage | undefined;
    if (msg && 'error' in msg) return new KwpError(msg.error.code as ConstructorParameters<typeof KwpError>[0], msg.error.message);
    return undefined;
  }

  get memoryBytes(): number { return this.ctl[Ctl.PAGES] * 65536; }

  /** Runs one operation whose arguments are in place; returns its result. */
  private call(op: number, deadlineMs: number, what: string, limitName: string, feedable = false): number {
    if (this.broken) throw this.broken;
    if (this.pending) this.waitPendingSync();
    if (this.exited) this.fail(new KwpError('KWP_ERR_TRAP', `module ${this.name}: the thread running its instance stopped`));
    const seq = this.post(op);
    if (feedable && this.feeding) {
      this.pending = { seq, what };
      return 0;
    }
    return this.waitFor(seq, deadlineMs, what, limitName);
  }

  /** Before writing a call's arguments: the call posted while feeding, or the decision in flight, must be done with them. */
  private ready(): void {
    if (this.flight) this.waitFlightSync();
    if (this.pending) this.waitPendingSync();
  }

  /** The decision in flight, waited for by another call: blocking, with the decision deadline. Its error goes to its own caller. */
  private waitFlightSync(): void {
    const f = this.flight!;
    try {
      this.waitFor(f.seq, this.decisionDeadlineMs, 'kwp_decide', 'decisionDeadlineMs');
      this.land(f);
    } catch (err) {
      this.land(f, err);
    }
  }

  private land(f: Flight, err?: unknown): void {
    if (f.done) return;
    f.done = true;
    this.flight = undefined;
    if (err !== undefined) f.error = err;
    else f.take();
    if (this.closeWhenLanded) this.close();
  }

  /**
   * decideInto without blocking: the thread decides while the caller's event
   * loop runs on, and the verdicts are in `verdicts` when the promise
   * resolves (rejected like decideInto: deadline, trap, a stopped thread).
   * The next call into this instance, if it comes first, waits for the
   * decision synchronously, as it would have waited for a synchronous one.
   */
  async decideIntoAsync(records: Uint8Array, first: number, n: number, verdicts: Uint8Array): Promise<void> {
    for (let done = 0; done < n; done += MAX_BATCH) {
      this.ready();
      if (this.broken) throw this.broken;
      if (this.exited) this.fail(new KwpError('KWP_ERR_TRAP', `module ${this.name}: the thread running its instance stopped`));
      const m = Math.min(MAX_BATCH, n - done);
      const from = (first + done) * RECORD_SIZE;
      const at = first + done;
      this.data.set(records.subarray(from, from + m * RECORD_SIZE), 0);
      this.ctl[Ctl.A0] = m;
      this.ctl[Ctl.A1] = 0;
      const f: Flight = { seq: this.post(Op.DECIDE), done: false, error: undefined, take: () => {} };
      f.take = () => {
        if (this.ctl[Ctl.STATUS] !== 0) this.fail(this.portError() ?? new KwpError('KWP_ERR_TRAP', `module ${this.name}: kwp_decide failed`));
        verdicts.set(this.data.subarray(VERDICTS_OFFSET, VERDICTS_OFFSET + m), at);
      };
      this.flight = f;
      await this.awaitFlight(f);
    }
    this.reason = 0;
    this.rule = 0;
  }

  private async awaitFlight(f: Flight): Promise<void> {
    const requested = monotonicMs();
    let wait = this.decisionDeadlineMs;
    while (!f.done) {
      const done = Atomics.load(this.ctl, Ctl.DONE);
      if (done === f.seq) {
        try {
          this.land(f);
        } catch (err) {
          f.error = err;
        }
        break;
      }
      // Every call waits for the flight before it posts (ready), so nothing finishes past it unseen; if something did, its verdicts are gone.
      if (done !== f.seq - 1) {
        this.land(f, new KwpError('KWP_ERR_TRAP', `module ${this.name}: the decision in flight was overtaken by another call`));
        break;
      }
      const w = waitAsync(this.ctl, Ctl.DONE, f.seq - 1, wait);
      if ((w.async ? await w.value : w.value) !== 'timed-out' || f.done) continue;
      try {
        wait = this.remaining(f.seq, requested, this.decisionDeadlineMs, 'kwp_decide', 'decisionDeadlineMs');
      } catch (err) {
        this.land(f, err);
      }
    }
    if (f.error !== undefined) throw f.error;
  }

  /** Posts the operation whose arguments are in place; returns its sequence number. */
  private post(op: number): number {
    const seq = ++this.seq;
    this.ctl[Ctl.OP] = op;
    Atomics.store(this.ctl, Ctl.REQ, seq);
    Atomics.notify(this.ctl, Ctl.REQ);
    return seq;
  }

  /** A call posted while feeding, waited for by a caller that did not settle it: blocking, with the feed deadline. */
  private waitPendingSync(): void {
    const { seq, what } = this.pending!;
    this.pending = undefined;
    this.waitFor(seq, this.feedDeadlineMs, what, 'feedDeadlineMs');
  }

  /** Waits, without blocking the event loop, for the call posted while feeding; throws its error. */
  async settle(): Promise<void> {
    const pending = this.pending;
    if (!pending) return;
    const ctl = this.ctl;
    const requested = monotonicMs();
    let wait = this.feedDeadlineMs;
    while (Atomics.load(ctl, Ctl.DONE) !== pending.seq) {
      const w = waitAsync(ctl, Ctl.DONE, pending.seq - 1, wait);
      if ((w.async ? await w.value : w.value) !== 'timed-out') continue;
      if (this.broken) throw this.broken;
      wait = this.remaining(pending.seq, requested, this.feedDeadlineMs, pending.what, 'feedDeadlineMs');
    }
    this.pending = undefined;
    if (ctl[Ctl.STATUS] !== 0) this.fail(this.portError() ?? new KwpError('KWP_ERR_TRAP', `module ${this.name}: ${pending.what} failed`));
  }

  /** After a wait timed out: how much longer to wait, or throws when the call overran (or its thread is dead). */
  private remaining(seq: number, requested: number, deadlineMs: number, what: string, limitName: string): number {
    const now = monotonicMs();
    if (Atomics.load(this.ctl, Ctl.PICKED) !== seq) {
      // Not started yet: the thread waits for a core. Not the module's time.
      if (now - requested < PICKUP_GRACE_MS) return deadlineMs;
      this.fail(new KwpError('KWP_ERR_TRAP', `module ${this.name}: the thread running its instance did not pick up ${what} within ${PICKUP_GRACE_MS} ms; it was stopped`));
    }
    const ran = now - this.clock[CLOCK_SLOT];
    if (ran >= deadlineMs) this.overran(what, deadlineMs, limitName);
    return Math.max(1, deadlineMs - ran);
  }

  private waitFor(seq: number, deadlineMs: number, what: string, limitName: string): number {
    const ctl = this.ctl;
    const requested = monotonicMs();
    let wait = deadlineMs;
    while (Atomics.load(ctl, Ctl.DONE) !== seq) {
      if (Atomics.wait(ctl, Ctl.DONE, seq - 1, wait) !== 'timed-out') continue;
      wait = this.remaining(seq, requested, deadlineMs, what, limitName);
    }
    if (ctl[Ctl.STATUS] !== 0) this.fail(this.portError() ?? new KwpError('KWP_ERR_TRAP', `module ${this.name}: ${what} failed`));
    return ctl[Ctl.RESULT];
  }

  private overran(what: string, deadlineMs: number, limitName: string): never {
    isolationCounters.threadsStopped++;
    this.fail(new KwpError('KWP_ERR_DEADLINE_EXCEEDED', `module ${this.name}: ${what} did not return within ${deadlineMs} ms (sandbox limit ${limitName}); the thread running it was stopped`));
  }

  private fail(err: KwpError): never {
    this.broken = err;
    this.close();
    throw err;
  }

  /** Puts `bytes` in the payload area, first handing the thread a larger data buffer when they do not fit. */
  private setPayload(bytes: Uint8Array): void {
    if (PAYLOAD_OFFSET + bytes.length > this.data.length) {
      let size = this.data.length - PAYLOAD_OFFSET;
      while (size < bytes.length) size *= 2;
      const next = new SharedArrayBuffer(PAYLOAD_OFFSET + size);
      this.data = new Uint8Array(next);
      this.port.postMessage({ data: next } satisfies PortMessage);
      this.ctl[Ctl.NEW_DATA] = 1;
    }
    this.data.set(bytes, PAYLOAD_OFFSET);
  }

  /** The reply of the last call: from the payload area, or the message it came in when too large. */
  private replyBytes(len: number): Uint8Array {
    if (this.ctl[Ctl.REPLY_MESSAGE] === 1) {
      const msg = receiveMessageOnPort(this.port)?.message as PortMessage | undefined;
      if (msg && 'reply' in msg) return msg.reply as Uint8Array;
      return new Uint8Array(0);
    }
    return this.data.slice(PAYLOAD_OFFSET, PAYLOAD_OFFSET + len);
  }

  configure(config: unknown): void {
    this.ready();
    const bytes = textEncoder.encode(JSON.stringify(config ?? {}));
    this.setPayload(bytes);
    this.ctl[Ctl.A0] = bytes.length;
    this.call(Op.CONFIGURE, this.callDeadlineMs, 'kwp_configure', 'callDeadlineMs', true);
  }

  upsertPod(record: Uint8Array): void {
    this.ready();
    this.setPayload(record);
    this.ctl[Ctl.A0] = record.length;
    this.call(Op.POD_UPSERT, this.callDeadlineMs, 'kwp_pod_upsert', 'callDeadlineMs', true);
  }

  deletePod(id: number): void {
    this.ready();
    this.ctl[Ctl.A0] = id;
    this.call(Op.POD_DELETE, this.callDeadlineMs, 'kwp_pod_delete', 'callDeadlineMs', true);
  }

  object(kind: number, op: number, json?: Uint8Array): void {
    this.ready();
    if (json) this.setPayload(json);
    this.ctl[Ctl.A0] = kind;
    this.ctl[Ctl.A1] = op;
    this.ctl[Ctl.A2] = json ? json.length : -1;
    this.call(Op.OBJECT, this.callDeadlineMs, 'kwp_object', 'callDeadlineMs', true);
  }

  decideOne(record: Uint8Array): number {
    this.ready();
    this.data.set(record.subarray(0, RECORD_SIZE), 0);
    this.ctl[Ctl.A0] = 1;
    this.call(Op.DECIDE, this.decisionDeadlineMs, 'kwp_decide', 'decisionDeadlineMs');
    this.reason = this.ctl[Ctl.REASON] >>> 0;
    this.rule = this.ctl[Ctl.RULE] >>> 0;
    return this.data[VERDICTS_OFFSET];
  }

  lastReason(): number { return this.reason; }

  lastRule(): number { return this.rule; }

  /** The thread's instance asks the module (kwp_attribution, or the reason text before ABI 1.3). */
  attribution(reason: number, rule: number): Attribution | undefined {
    if (reason === 0) return undefined;
    this.ready();
    this.ctl[Ctl.A0] = reason;
    this.ctl[Ctl.A1] = rule;
    const len = this.call(Op.ATTRIBUTION, this.callDeadlineMs, 'kwp_attribution', 'callDeadlineMs');
    return len > 0 ? parseAttribution(textDecoder.decode(this.replyBytes(len))) : undefined;
  }

  /** Any n up to MAX_BATCH in one call: the thread splits it by the module's batch capacity. */
  decideInto(records: Uint8Array, first: number, n: number, verdicts: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array): void {
    this.ready();
    // Flow recording wants the codes of a batch too: the thread puts them beside the verdicts.
    const withCodes = reasons !== undefined && rules !== undefined;
    for (let done = 0; done < n; done += MAX_BATCH) {
      const m = Math.min(MAX_BATCH, n - done);
      const from = (first + done) * RECORD_SIZE;
      this.data.set(records.subarray(from, from + m * RECORD_SIZE), 0);
      this.ctl[Ctl.A0] = m;
      this.ctl[Ctl.A1] = withCodes ? 1 : 0;
      this.call(Op.DECIDE, this.decisionDeadlineMs, 'kwp_decide', 'decisionDeadlineMs');
      verdicts.set(this.data.subarray(VERDICTS_OFFSET, VERDICTS_OFFSET + m), first + done);
      if (withCodes) {
        const codes = codesView(this.data);
        reasons.set(codes.subarray(0, m), first + done);
        rules.set(codes.subarray(MAX_BATCH, MAX_BATCH + m), first + done);
      }
    }
    this.reason = 0;
    this.rule = 0;
  }

  explain(reason: number): string {
    this.ready();
    if (reason === 0) return '';
    this.ctl[Ctl.A0] = reason;
    const len = this.call(Op.EXPLAIN, this.callDeadlineMs, 'kwp_explain', 'callDeadlineMs');
    return textDecoder.decode(this.replyBytes(len));
  }

  decisionCacheStats(): DecisionCacheStats | undefined {
    this.ready();
    if (this.broken) return undefined;
    if (this.call(Op.CACHE_STATS, this.callDeadlineMs, 'kwp_decision_cache_stats', 'callDeadlineMs') === 0) return undefined;
    const bytes = this.replyBytes(16);
    const view = new DataView(bytes.buffer, bytes.byteOffset, 16);
    return { hits: view.getFloat64(0, true), misses: view.getFloat64(8, true) };
  }

  subjects(maxIds = Infinity): 'all' | number[] {
    this.ready();
    this.ctl[Ctl.A0] = Number.isFinite(maxIds) ? Math.min(maxIds, 0x7fffffff) : -1;
    const n = this.call(Op.SUBJECTS, this.callDeadlineMs, 'kwp_subjects', 'callDeadlineMs');
    if (n < 0) return 'all';
    const bytes = this.replyBytes(n * 4);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(view.getUint32(i * 4, true));
    return ids;
  }

  close(): void {
    if (this.closed) return;
    // A decision in flight lands first (or overruns its deadline): its packets get verdicts, not a stopped thread.
    if (this.flight && !this.broken) {
      this.closeWhenLanded = true;
      return;
    }
    this.closed = true;
    this.port.close();
    void this.worker.terminate().catch(() => undefined);
  }
}
