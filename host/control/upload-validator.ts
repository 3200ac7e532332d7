// Runs upload validation on a dedicated worker thread, one upload at a time,
// so the main thread keeps deciding packets while a module is instrumented,
// compiled and self-tested. The worker is started on first use and kept; a
// watchdog replaces it if an upload ever outlives `watchdogMs`.
import type { Worker } from 'node:worker_threads';
import { KwpError, ErrorCatalogue, type ErrorCode } from '../errors.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { validateUpload, type UploadValidationRequest } from './upload-validation.js';
import { startPackageWorker } from '../package-worker.js';
import type { WorkerAnswer } from './upload-worker.js';

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

export class WorkerValidator implements UploadValidator {
  private worker: Worker | undefined;
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();
  private pending: { id: number; resolve: (c: CompiledEvaluator) => void; reject: (e: Error) => void } | undefined;

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
    w.on('message', (answer: WorkerAnswer) => {
      const p = this.pending;
      if (!p || p.id !== answer.id) return;
      this.pending = undefined;
      if (answer.ok) p.resolve(answer.compiled as CompiledEvaluator);
      else {
        const code = (answer.code in ErrorCatalogue ? answer.code : 'KWP_ERR_INTERNAL') as ErrorCode;
        p.reject(new KwpError(code, answer.message));
      }
    });
    const lost = (why: string) => {
      if (this.worker === w) this.worker = undefined;
      const p = this.pending;
      this.pending = undefined;
      p?.reject(new KwpError('KWP_ERR_INTERNAL', `the upload validation worker ${why}; retry the upload`));
    };
    w.on('error', (err) => lost(`failed: ${err.message}`));
    w.on('exit', (code) => lost(`exited with code ${code}`));
    this.worker = w;
    return w;
  }

  private runOne(req: UploadValidationRequest): Promise<CompiledEvaluator> {
    const worker = this.ensureWorker();
    const id = this.nextId++;
    return new Promise<CompiledEvaluator>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.pending?.id !== id) return;
        this.pending = undefined;
        this.worker = undefined;
        void worker.terminate();
        reject(new KwpError('KWP_ERR_SELF_TEST', `upload ${req.name}@${req.version}: validation did not finish within ${this.watchdogMs} ms; the module is far too expensive to compile or run`));
      }, this.watchdogMs);
      timer.unref();
      this.pending = {
        id,
        resolve: (c) => { clearTimeout(timer); resolve(c); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      };
      worker.postMessage({ id, ...req });
    });
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
