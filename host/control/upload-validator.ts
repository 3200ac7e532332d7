// Runs upload validation on a dedicated worker thread, one upload at a time,
// so the main thread keeps deciding packets while a module is instrumented,
// compiled and self-tested. The worker is started on first use and kept. Two
// clocks stop a thread that overruns, answer its upload and leave the uploads
// queued behind it to a fresh thread: the self-test deadline (the limits'
// selfTestTimeoutMs, counted from the moment module code starts to run) and a
// watchdog over the whole validation (`watchdogMs`, for compilation).
import type { Worker } from 'node:worker_threads';
import { KwpError, ErrorCatalogue, type ErrorCode } from '../errors.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { validateUpload, type UploadValidationRequest } from './upload-validation.js';
import { startPackageWorker } from './source-worker.js';
import type { SelfTestStarted, WorkerAnswer } from './upload-worker.js';

export interface UploadValidator {
  validate(req: UploadValidationRequest): Promise<CompiledEvaluator>;
  close(): Promise<void>;
}

/** Validation on the caller's thread: simplest, but blocks it for the duration. */
export class InlineValidator implements UploadValidator {
  async validate(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    return validateUpload(req);
  }
  async close(): Promise<void> {}
}

/**
 * How much later than its own deadline a self-test is cut off: the deadline
 * starts when the worker says the self-test begins, and the message and the
 * timer each take a turn of an event loop.
 */
export const SELF_TEST_GRACE_MS = 250;

interface PendingUpload {
  id: number;
  worker: Worker;
  resolve: (c: CompiledEvaluator) => void;
  reject: (e: Error) => void;
  /** Module code starts to run: its deadline starts now. */
  selfTestStarted: () => void;
}

export class WorkerValidator implements UploadValidator {
  private worker: Worker | undefined;
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();
  private pending: PendingUpload | undefined;
  /** Threads stopped for overrunning, until they have exited (a thread in a long wasm instruction takes a while). */
  private stopping = new Set<Worker>();

  constructor(private readonly watchdogMs = 60_000) {}

  validate(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    const run = this.queue.then(() => this.runOne(req));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const w = startPackageWorker(new URL('./upload-worker.js', import.meta.url));
    w.unref();
    w.on('message', (answer: WorkerAnswer | SelfTestStarted) => {
      const p = this.pending;
      if (!p || p.id !== answer.id || p.worker !== w) return;
      if ('selfTest' in answer) {
        p.selfTestStarted();
        return;
      }
      this.pending = undefined;
      if (answer.ok) p.resolve(answer.compiled as CompiledEvaluator);
      else {
        const code = (answer.code in ErrorCatalogue ? answer.code : 'KWP_ERR_INTERNAL') as ErrorCode;
        p.reject(new KwpError(code, answer.message));
      }
    });
    const lost = (why: string) => {
      this.stopping.delete(w);
      if (this.worker === w) this.worker = undefined;
      // A thread stopped for overrunning exits later; the upload it ran was answered already.
      const p = this.pending;
      if (p?.worker !== w) return;
      this.pending = undefined;
      p.reject(new KwpError('KWP_ERR_INTERNAL', `the upload validation worker ${why}; retry the upload`));
    };
    w.on('error', (err) => lost(`failed: ${err.message}`));
    w.on('exit', (code) => lost(`exited with code ${code}`));
    this.worker = w;
    return w;
  }

  /** Answers the pending upload with `err` and stops its thread without waiting for it; the next upload gets a fresh one. */
  private abandon(p: PendingUpload, err: KwpError): void {
    if (this.pending !== p) return;
    this.pending = undefined;
    if (this.worker === p.worker) this.worker = undefined;
    this.stopping.add(p.worker);
    void p.worker.terminate();
    p.reject(err);
  }

  private runOne(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    const worker = this.ensureWorker();
    const id = this.nextId++;
    const what = `upload ${req.name}@${req.version}`;
    return new Promise<CompiledEvaluator>((resolve, reject) => {
      const timers: NodeJS.Timeout[] = [];
      const after = (ms: number, fire: () => void) => {
        const t = setTimeout(fire, ms);
        t.unref();
        timers.push(t);
      };
      const p: PendingUpload = {
        id,
        worker,
        resolve: (c) => { timers.forEach(clearTimeout); resolve(c); },
        reject: (e) => { timers.forEach(clearTimeout); reject(e); },
        selfTestStarted: () => {
          const bound = req.selfTestTimeoutMs + SELF_TEST_GRACE_MS;
          after(bound, () => this.abandon(p, new KwpError('KWP_ERR_SELF_TEST',
            `${what}: the self-test did not finish within ${req.selfTestTimeoutMs} ms (its thread was stopped after ${bound} ms); the module loops or does far too much work per call`)));
        },
      };
      // Compilation is bounded by the watchdog; module code, from the moment it starts, by its own deadline.
      after(this.watchdogMs, () => this.abandon(p, new KwpError('KWP_ERR_SELF_TEST', `${what}: validation did not finish within ${this.watchdogMs} ms; the module is far too expensive to compile or run`)));
      this.pending = p;
      worker.postMessage({ id, ...req });
    });
  }

  /** Threads that were stopped for overrunning and have not exited yet. */
  get stoppingThreads(): number { return this.stopping.size; }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
