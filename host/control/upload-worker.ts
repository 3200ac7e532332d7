// Entry of the upload validation process (upload-validator.ts): binaryen's
// fuel instrumentation and the self-test take tens to hundreds of
// milliseconds, which must not stall the packet path, and a hostile module
// must not be able to exhaust the agent's heap. The instrumented form goes to
// the store's instrumentation cache, so the agent compiles the module from it
// without binaryen; only the verdict and the metadata come back.
import { KwpError } from '../errors.js';
import { validateUpload, type UploadValidationRequest } from './upload-validation.js';

export type WorkerRequest = { id: number } & UploadValidationRequest;
/** Sent before the self-test starts, so the agent can start its deadline. */
export interface SelfTestStarted { id: number; selfTest: 'started' }
export type WorkerAnswer =
  | { id: number; ok: true }
  | { id: number; ok: false; code: string; message: string };

process.on('message', (req: WorkerRequest) => {
  let answer: WorkerAnswer;
  try {
    validateUpload(req, () => process.send!({ id: req.id, selfTest: 'started' } satisfies SelfTestStarted));
    answer = { id: req.id, ok: true };
  } catch (err) {
    answer = err instanceof KwpError
      ? { id: req.id, ok: false, code: err.code, message: err.message }
      : { id: req.id, ok: false, code: 'KWP_ERR_INTERNAL', message: `upload ${req.name}@${req.version}: validation failed unexpectedly: ${(err as Error).message}` };
  }
  process.send!(answer);
});
// The parent may go away without a word (a crash): then so does this process.
process.on('disconnect', () => process.exit(0));
