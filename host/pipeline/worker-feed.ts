// Feeding an instance off the packet path's thread. A stage that needs a new
// instance (a new stage, a config change, a growth, a rebuild) hands the
// state, already in its wire form, to a short-lived thread (feed-worker.ts)
// that instantiates the same compiled module, feeds it in the stage's order
// and sends back a memory image of the fed instance. The stage then makes
// its instance from the image in its own thread (instance.ts, `image`): one
// copy of the module's memory instead of every module call of the feed.
// The thread is started as soon as the stage knows it will feed one, before
// the state is packed, so that its start (a thread and the host's instance
// code, tens of milliseconds) overlaps the packing; it is terminated when the
// feed is done or abandoned.
import type { Worker } from 'node:worker_threads';
import { KwpError, type ErrorCode } from '../errors.js';
import { startPackageWorker } from '../package-worker.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import type { MemoryImage } from '../runtime/instance.js';
import type { HostLogger, LogLevel } from '../logger.js';
import type { PackedRecords } from './feed-order.js';

/** What the feed thread is started with (its workerData): the module, so the thread loads it while the state is packed. */
export interface FeedThreadData {
  module: WebAssembly.Module;
  compiled: Omit<CompiledEvaluator, 'module'>;
}

/** What the feed thread is sent once the state is packed: one feed. */
export interface FeedRequest {
  memoryPages: number;
  config: unknown;
  pods: PackedRecords;
  /** Per kind index (the module's meta.kinds order). */
  objects: PackedRecords[];
}

/** What the feed thread posts: its instance's log lines, then one result. */
export type FeedMessage =
  | { log: { level: LogLevel; message: string; fields?: Record<string, unknown> } }
  | { done: FedImage }
  | { error: { code: string; message: string; memory?: FedMemory } };

/** The memory of the instance a feed failed in. */
export interface FedMemory { memoryBytes: number; memoryCapPages: number }

/** A feed that failed in the module (a trap, fuel, a refused config), with the memory of the instance it failed in. */
export class ModuleFeedFailure extends Error {
  constructor(readonly error: KwpError, readonly instance: FedMemory) {
    super(error.message);
  }
}

/** A fed instance, as an image, and the subjects it named right after the feed. */
export interface FedImage {
  image: MemoryImage;
  subjects: 'all' | number[];
}

/**
 * The feed thread's V8 heap: the packed state it was sent (ArrayBuffers,
 * outside the heap) and the host's instance code. The module's memory is not
 * in it. A thread that dies on it rejects the feed like any other failure.
 */
const FEED_THREAD_LIMITS = { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 4 } as const;

/** Threads started for feeds, process-wide: evidence for tests. */
export const feedThreadCounters = { started: 0 };

/**
 * A feed thread, started before the state it feeds is packed: its start
 * (a thread, the host's instance code) overlaps the packing in the caller's
 * thread. It feeds once and is terminated when that feed settles.
 */
export interface FeedThread {
  /**
   * Sends the state (its buffers are transferred: the caller must not use
   * them again); resolves with the image, rejects with a ModuleFeedFailure (a
   * trap, a refused config, fuel) or the thread's own failure (a KwpError).
   * Once per thread.
   */
  feed(request: FeedRequest): Promise<FedImage>;
  /** Stops the thread; a feed under way or asked later then rejects. Idempotent. */
  cancel(): void;
}

/** Starts a feed thread for a fresh instance of `compiled`; its log lines go to `logger`. */
export function startFeedThread(compiled: CompiledEvaluator, logger?: HostLogger): FeedThread {
  const { module, ...rest } = compiled;
  const data: FeedThreadData = { module, compiled: rest };
  let worker: Worker | undefined;
  let settled = false;
  let failure: unknown;
  let resolveFeed: ((image: FedImage) => void) | undefined;
  let rejectFeed: ((err: unknown) => void) | undefined;
  // A failure before the feed is asked for is kept for it.
  const settle = (image: FedImage | undefined, err?: unknown) => {
    if (settled) return;
    settled = true;
    void worker?.terminate();
    if (image) resolveFeed?.(image);
    else if (rejectFeed) rejectFeed(err);
    else failure = err;
  };
  try {
    worker = startPackageWorker(new URL('./feed-worker.js', import.meta.url), { workerData: data, resourceLimits: FEED_THREAD_LIMITS });
    feedThreadCounters.started++;
    worker.unref();
    worker.on('message', (m: FeedMessage) => {
      if ('log' in m) logger?.[m.log.level](m.log.fields ?? {}, m.log.message);
      else if ('done' in m) settle(m.done);
      else {
        const error = new KwpError(m.error.code as ErrorCode, m.error.message);
        settle(undefined, m.error.memory ? new ModuleFeedFailure(error, m.error.memory) : error);
      }
    });
    worker.on('error', (err) => settle(undefined, new KwpError('KWP_ERR_TRAP', `the thread feeding module ${compiled.meta.name} failed: ${err.message}`)));
    worker.on('exit', (code) => settle(undefined, new KwpError('KWP_ERR_TRAP', `the thread feeding module ${compiled.meta.name} stopped (exit code ${code}) before the feed was done`)));
  } catch (err) {
    settle(undefined, err);
  }
  let asked = false;
  return {
    feed(request) {
      if (asked) return Promise.reject(new Error(`a feed thread of module ${compiled.meta.name} feeds once`));
      asked = true;
      return new Promise<FedImage>((resolve, reject) => {
        if (settled) {
          reject(failure ?? new KwpError('KWP_ERR_PIPELINE_INVALID', `the feed of module ${compiled.meta.name} was abandoned`));
          return;
        }
        resolveFeed = resolve;
        rejectFeed = reject;
        const transferList = [request.pods.bytes.buffer, request.pods.ends.buffer, ...request.objects.flatMap((o) => [o.bytes.buffer, o.ends.buffer])] as ArrayBuffer[];
        worker!.postMessage(request, transferList);
      });
    },
    cancel: () => settle(undefined, new KwpError('KWP_ERR_PIPELINE_INVALID', `the feed of module ${compiled.meta.name} was abandoned`)),
  };
}
