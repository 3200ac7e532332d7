// Steps 3-13 of an upload (docs/admin-api.md, "Upload validation"): the
// loader's static checks, fuel instrumentation and compilation, the name and
// version against kwp.meta, then instantiation, configuration and the
// self-test decision under a deadline. Pure: no store state, no files, so it
// can run on a worker thread (upload-worker.ts) as well as in-line.
import { KwpError } from '../errors.js';
import { compileEvaluator, type CompiledEvaluator } from '../runtime/loader.js';
import type { SandboxLimits } from '../runtime/limits.js';
import { runSelfTest } from './self-test.js';

export interface UploadValidationRequest {
  bytes: Uint8Array;
  name: string;
  version: string;
  limits: SandboxLimits;
  selfTestConfig: Record<string, unknown>;
  selfTestTimeoutMs: number;
  /** The store's cache of instrumented forms, so a restart need not instrument an upload again. */
  instrumentationCache?: string;
}

/** `beforeSelfTest` is told when compilation is done and module code is about to run (the worker starts the deadline then). */
export function validateUpload(req: UploadValidationRequest, beforeSelfTest?: () => void): CompiledEvaluator {
  const source = `upload ${req.name}@${req.version}`;
  const compiled = compileEvaluator(req.bytes, { source, limits: req.limits, instrumentationCache: req.instrumentationCache });
  if (compiled.meta.name !== req.name || compiled.meta.version !== req.version) {
    throw new KwpError('KWP_ERR_NAME_MISMATCH', `${source}: the module's kwp.meta says ${compiled.meta.name}@${compiled.meta.version}; upload it with name=${compiled.meta.name}&version=${compiled.meta.version}, or change module.json and rebuild`);
  }
  beforeSelfTest?.();
  runSelfTest(compiled, req.selfTestTimeoutMs, req.selfTestConfig);
  return compiled;
}
