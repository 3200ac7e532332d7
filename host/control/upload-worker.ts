// Worker-thread entry for upload validation: binaryen's fuel instrumentation
// and the self-test take tens to hundreds of milliseconds, which must not
// stall the packet path on the main thread. The compiled WebAssembly.Module
// is posted back (modules are shared between threads, not recompiled).
import { parentPort } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import { validateUpload, type UploadValidationRequest } from './upload-validation.js';

export type WorkerRequest = { id: number } & UploadValidationRequest;
/** Sent before the self-test starts, so the main thread can start its deadline. */
export interface SelfTestStarted { id: number; selfTest: 'started' }
export type WorkerAnswer =
  | { id: number; ok: true; compiled: Omit<import('../runtime/loader.js').CompiledEvaluator, never> }
  | { id: number; ok: false; code: string; message: string };

parentPort?.on('message', (req: WorkerRequest) => {
  let answer: WorkerAnswer;
  try {
    const c = validateUpload(req, () => parentPort!.postMessage({ id: req.id, selfTest: 'started' } satisfies SelfTestStarted));
    answer = { id: req.id, ok: true, compiled: { meta: c.meta, sha256: c.sha256, size: c.size, module: c.module, memoryImport: c.memoryImport, limits: c.limits, source: c.source } };
  } catch (err) {
    answer = err instanceof KwpError
      ? { id: req.id, ok: false, code: err.code, message: err.message }
      : { id: req.id, ok: false, code: 'KWP_ERR_INTERNAL', message: `upload ${req.name}@${req.version}: validation failed unexpectedly: ${(err as Error).message}` };
  }
  parentPort!.postMessage(answer);
});
