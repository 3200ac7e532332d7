// Synchronous fuel instrumentation without binaryen in the caller's thread.
// binaryen is an ES module with top-level await, so it cannot be loaded
// synchronously, yet compileEvaluator is synchronous and called from many
// places (engine builds, the module store, the test kit, embedders). On an
// instrumentation-cache miss the caller's thread blocks while a helper thread
// does the rewrite. The helper stays for a moment so a batch of misses pays
// for binaryen once, then exits and takes binaryen's memory with it.
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { startPackageWorker } from '../package-worker.js';
import { DEFAULT_LIMITS } from './limits.js';
import type { HelperAnswer, HelperRequest, HelperSetup } from './instrument-worker.js';

/** A rewrite of the largest module the default limits accept takes seconds; this only bounds a helper that never answers. */
const ANSWER_TIMEOUT_MS = 120_000;
const IDLE_MS = 2_000;

interface Helper {
  worker: Worker;
  port: MessagePort;
  signal: Int32Array;
  idle?: NodeJS.Timeout;
}

let helper: Helper | undefined;
let started = 0;

function startHelper(heapMiB: number): Helper {
  // A heap of its own: a module binaryen chokes on ends this thread, not the process.
  const worker = startPackageWorker(new URL('./instrument-worker.js', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: heapMiB } });
  worker.unref();
  const { port1, port2 } = new MessageChannel();
  port1.unref();
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const h: Helper = { worker, port: port1, signal };
  // A helper that fails shows up as a timed-out answer; the event only needs a listener so it is not an uncaught error.
  worker.on('error', () => stopHelper(h));
  worker.on('exit', () => stopHelper(h));
  worker.postMessage({ port: port2, signal } satisfies HelperSetup, [port2]);
  started++;
  return h;
}

function stopHelper(h: Helper): void {
  if (helper === h) helper = undefined;
  clearTimeout(h.idle);
  h.port.close();
  void h.worker.terminate();
}

/** Runs the rewrite on the helper thread and blocks until it answers. Throws plain Errors. */
export function rewriteOnHelper(bytes: Uint8Array, startFuel: number, heapMiB = DEFAULT_LIMITS.validationHeapMiB): Uint8Array {
  const h = (helper ??= startHelper(heapMiB));
  clearTimeout(h.idle);
  Atomics.store(h.signal, 0, 0);
  h.port.postMessage({ bytes, startFuel } satisfies HelperRequest);
  const waited = Atomics.wait(h.signal, 0, 0, ANSWER_TIMEOUT_MS);
  const answer = receiveMessageOnPort(h.port)?.message as HelperAnswer | undefined;
  if (waited === 'timed-out' || !answer) {
    stopHelper(h);
    throw new Error(`the instrumentation helper thread did not answer within ${ANSWER_TIMEOUT_MS / 1000} s`);
  }
  h.idle = setTimeout(() => stopHelper(h), IDLE_MS);
  h.idle.unref();
  if (!answer.ok) throw new Error(answer.message);
  return answer.bytes;
}

/** How many helper threads this thread has started: evidence for tests that a path never needed one. */
export function helpersStarted(): number {
  return started;
}
