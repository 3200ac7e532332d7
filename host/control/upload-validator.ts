// Runs upload validation in a child process of its own, one upload at a
// time, so the main thread keeps deciding packets while a module is
// instrumented and self-tested, and so nothing an upload does can take the
// agent down: the child has a V8 heap limit (sandbox limit
// validationHeapMiB), and when a module makes it exceed that — even inside
// one native allocation, where a worker thread's resourceLimits cannot stop
// V8 from aborting the whole process — only the child ends. The child is
// started on first use and kept. Two clocks kill a child that overruns,
// answer its upload and leave the uploads queued behind it to a fresh child:
// the self-test deadline (the limits' selfTestTimeoutMs, counted from the
// moment module code starts, plus SELF_TEST_GRACE_MS) and a watchdog over the
// whole validation (`watchdogMs`, for compilation). A killed process stops at
// once, whatever the module was doing.
import type { ChildProcess } from 'node:child_process';
import { KwpError, ErrorCatalogue, type ErrorCode } from '../errors.js';
import { compileEvaluator, type CompiledEvaluator } from '../runtime/loader.js';
import { DEFAULT_LIMITS } from '../runtime/limits.js';
import { validateUpload, type UploadValidationRequest } from './upload-validation.js';
import { startPackageProcess } from '../package-worker.js';
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

const STDERR_KEPT = 4096;

/**
 * How much later than its own deadline a self-test is cut off: the deadline
 * starts when the child says the self-test begins, and the message and the
 * timer each take a turn of an event loop.
 */
export const SELF_TEST_GRACE_MS = 250;

/**
 * Uploads validated or waiting for it at once. Each holds its body (up to
 * maxModuleBytes) until its turn, and one upload may hold the process for up
 * to the watchdog's minute: the rate limits let 120 a minute in, so an
 * unbounded queue held hundreds of MiB more every minute an attacker kept
 * it fed, and made every later upload wait for hours. Past this many, an
 * upload is refused at once (429 KWP_ERR_RATE_LIMITED).
 */
export const MAX_WAITING_UPLOADS = 8;

interface PendingUpload {
  id: number;
  what: string;
  child: ChildProcess;
  resolve: () => void;
  reject: (e: Error) => void;
  /** Module code starts to run: its deadline starts now. */
  selfTestStarted: () => void;
}

export class ProcessValidator implements UploadValidator {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();
  private pending: PendingUpload | undefined;
  /** The end of the child's stderr, where V8 says why it aborted. */
  private stderr = '';

  /** Uploads in validation or queued for it. */
  private waiting = 0;

  /** `heapMiB`: the child's V8 heap (sandbox limit validationHeapMiB); `maxWaiting`: MAX_WAITING_UPLOADS. */
  constructor(private readonly watchdogMs = 60_000, private readonly heapMiB = DEFAULT_LIMITS.validationHeapMiB, private readonly maxWaiting = MAX_WAITING_UPLOADS) {}

  validate(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    if (this.waiting >= this.maxWaiting) {
      return Promise.reject(new KwpError('KWP_ERR_RATE_LIMITED', `upload ${req.name}@${req.version}: ${this.waiting} uploads are being validated or waiting for it, the most the agent queues; retry once they are answered`));
    }
    this.waiting++;
    const run = this.queue.then(() => this.runOne(req)).finally(() => { this.waiting--; });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private ensureChild(): ChildProcess {
    if (this.child) return this.child;
    const c = startPackageProcess(new URL('./upload-worker.js', import.meta.url), [`--max-old-space-size=${this.heapMiB}`]);
    holdOpen(c, false);
    this.stderr = '';
    c.stderr?.setEncoding('utf8');
    c.stderr?.on('data', (chunk: string) => { this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT); });
    c.on('message', (answer: WorkerAnswer | SelfTestStarted) => {
      const p = this.pending;
      if (!p || p.id !== answer.id || p.child !== c) return;
      if ('selfTest' in answer) {
        p.selfTestStarted();
        return;
      }
      this.pending = undefined;
      if (answer.ok) p.resolve();
      else {
        const code = (answer.code in ErrorCatalogue ? answer.code : 'KWP_ERR_INTERNAL') as ErrorCode;
        p.reject(new KwpError(code, answer.message));
      }
    });
    c.on('error', () => { /* a failed spawn also exits; the exit handler answers */ });
    c.on('exit', (code, signal) => {
      if (this.child === c) this.child = undefined;
      const p = this.pending;
      // A child killed for overrunning exits later, its upload answered already; the pending one may be the next upload's.
      if (!p || p.child !== c) return;
      this.pending = undefined;
      if (/heap limit|out of memory/i.test(this.stderr)) {
        p.reject(new KwpError('KWP_ERR_VALIDATION_LIMIT', `${p.what}: validating it needed more than the ${this.heapMiB} MiB heap the validation process may use (sandbox limit validationHeapMiB); the module declares more than it can run with (tables, functions), so it was refused`));
      } else {
        p.reject(new KwpError('KWP_ERR_INTERNAL', `${p.what}: the upload validation process ended (${signal ?? `exit code ${code}`}) before it answered; retry the upload`));
      }
    });
    this.child = c;
    return c;
  }

  private async runOne(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    const what = `upload ${req.name}@${req.version}`;
    await this.inChild(req, what);
    // The child wrote the instrumented form to the cache, so this compiles
    // without binaryen; the loader's static checks run again here, cheaply.
    return compileEvaluator(req.bytes, { source: what, limits: req.limits, instrumentationCache: req.instrumentationCache });
  }

  private inChild(req: UploadValidationRequest, what: string): Promise<void> {
    const child = this.ensureChild();
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      const timers: NodeJS.Timeout[] = [];
      const after = (ms: number, fire: () => void) => {
        const t = setTimeout(fire, ms);
        t.unref();
        timers.push(t);
      };
      // An idle child must not keep the agent's event loop alive; one at work must, until it answers.
      holdOpen(child, true);
      const settle = () => { timers.forEach(clearTimeout); holdOpen(child, false); };
      const p: PendingUpload = {
        id, what, child,
        resolve: () => { settle(); resolve(); },
        reject: (e) => { settle(); reject(e); },
        selfTestStarted: () => {
          const bound = req.selfTestTimeoutMs + SELF_TEST_GRACE_MS;
          after(bound, () => this.abandon(p, new KwpError('KWP_ERR_SELF_TEST',
            `${what}: the self-test did not finish within ${req.selfTestTimeoutMs} ms (its process was killed after ${bound} ms); the module loops or does far too much work per call`)));
        },
      };
      // Compilation is bounded by the watchdog; module code, from the moment it starts, by its own deadline.
      after(this.watchdogMs, () => this.abandon(p, new KwpError('KWP_ERR_SELF_TEST', `${what}: validation did not finish within ${this.watchdogMs} ms; the module is far too expensive to compile or run`)));
      this.pending = p;
      child.send({ id, ...req });
    });
  }

  /** Answers the pending upload with `err` and kills its child; the next upload starts a fresh one. */
  private abandon(p: PendingUpload, err: KwpError): void {
    if (this.pending !== p) return;
    this.pending = undefined;
    if (this.child === p.child) this.child = undefined;
    p.child.kill('SIGKILL');
    p.reject(err);
  }

  async close(): Promise<void> {
    const c = this.child;
    this.child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  }
}

function holdOpen(c: ChildProcess, hold: boolean): void {
  const handles = [c, (c as unknown as { channel?: { ref(): void; unref(): void } }).channel, c.stderr as unknown as { ref?(): void; unref?(): void } | null];
  for (const h of handles) hold ? h?.ref?.() : h?.unref?.();
}
