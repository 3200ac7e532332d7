// Feeding an instance off the packet path's thread. A stage that needs a new
// instance (a new stage, a config change, a growth, a rebuild) hands the
// state, already in its wire form, to a short-lived thread (feed-worker.ts)
// that instantiates the same compiled module, feeds it in the stage's order
// and sends back a memory image of the fed instance. The stage then makes
// its instance from the image in its own thread (instance.ts, `image`): one
// copy of the module's memory instead of every module call of the feed.
// The thread is started as soon as the stage knows it will feed one, so that
// its start (a thread and the host's instance code, tens of milliseconds)
// overlaps the stage's reading of the state, and the state is streamed to it
// in chunks as the stage packs them, so that the feed overlaps the packing;
// it is terminated when the feed is done or abandoned.
// A thread's start (Node's own bootstrap of a new isolate, then the host's
// instance code) is most of a thread's cost and cannot overlap anything the
// feed needs: one spare thread is therefore kept started and loaded, waiting
// to be told its module, and the next feed takes it (see `spare` below).
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { KwpError, type ErrorCode } from '../errors.js';
import { startPackageWorker } from '../package-worker.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import type { MemoryImage } from '../runtime/instance.js';
import type { HostLogger, LogLevel } from '../logger.js';
import type { PackedRecords } from './feed-order.js';

/**
 * What a feed thread is told when a feed takes it (its first message; it was
 * started before, without it): the module, and the port and signal the state
 * then streams through.
 */
export interface FeedThreadData {
  module: WebAssembly.Module;
  compiled: Omit<CompiledEvaluator, 'module'>;
  /** Where the stage sends FeedChunks; the thread takes them synchronously (receiveMessageOnPort). */
  port: MessagePort;
  /** [0] counts chunks sent (the thread waits on it), [1] is set when the feed is abandoned. */
  signal: Int32Array;
}

/**
 * What the stage streams to its feed thread, in this order: `begin` (the
 * instance's memory cap and the stage's config), then the pods' records in
 * chunks ending with `end`, then per kind index (the module's meta.kinds
 * order) that kind's objects' JSON in chunks ending with `end`. The thread
 * feeds them in feedCalls' order (feed-order.ts) as they come, while the
 * stage is still packing the rest.
 */
export type FeedChunk =
  | { begin: { memoryPages: number; config: unknown } }
  | { records: PackedRecords }
  | { end: true };

/** What the feed thread posts: its instance's log lines, then one result. */
export type FeedMessage =
  | { log: { level: LogLevel; message: string; fields?: Record<string, unknown> } }
  | { done: FedImage & { pieces: number } }
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

/**
 * Feed threads, process-wide: evidence for tests. `started` counts the feeds
 * given a thread, `warm` those of them whose thread was the spare, started
 * and loaded before the feed asked for it.
 */
export const feedThreadCounters = { started: 0, warm: 0 };

/** A started feed thread no feed has taken yet. */
interface IdleThread {
  worker: Worker;
  /** Set when it died before a feed took it (a feed never takes a dead one). */
  exited: boolean;
}

/**
 * The one spare: started when an engine that feeds in threads is made
 * (prepareFeedThread) and again once no feed runs any more, so that
 * the next feed finds a thread that has already started and loaded. It is
 * not referenced (it keeps no process alive) and holds no instance: about
 * 3 MiB of an idle isolate.
 */
let spare: IdleThread | undefined;
/** Feeds started and not settled yet, process-wide. */
let runningFeeds = 0;

function startIdleThread(): IdleThread {
  const worker = startPackageWorker(new URL('./feed-worker.js', import.meta.url), { resourceLimits: FEED_THREAD_LIMITS });
  worker.unref();
  const idle: IdleThread = { worker, exited: false };
  worker.once('exit', () => { idle.exited = true; });
  // A spare that fails to start is dropped; the next feed starts one of its own.
  worker.once('error', () => { idle.exited = true; });
  return idle;
}

/** Has a spare feed thread started, unless one is there already. */
export function prepareFeedThread(): void {
  if (spare && !spare.exited) return;
  try {
    spare = startIdleThread();
  } catch {
    spare = undefined;
  }
}

/** Whether a spare feed thread is started and alive (tests). */
export function hasSpareFeedThread(): boolean {
  return spare !== undefined && !spare.exited;
}

/** The spare's worker, left registered as the spare (tests: a spare that dies while it waits). */
export function spareFeedThreadWorker(): Worker | undefined {
  return spare?.worker;
}

/** Stops the spare, if any (a process that no longer builds, tests); the next feed starts a thread of its own. */
export async function releaseSpareFeedThread(): Promise<void> {
  const idle = spare;
  spare = undefined;
  await idle?.worker.terminate();
}

/** The spare if it is alive (a new spare is started once this feed settles), else a thread started now. */
function takeThread(): { worker: Worker; warm: boolean } {
  const taken = spare;
  spare = undefined;
  if (taken && !taken.exited) return { worker: taken.worker, warm: true };
  return { worker: startIdleThread().worker, warm: false };
}

/**
 * A feed thread, started before the state it feeds is read: its start (a
 * thread, the host's instance code) overlaps the stage's reading, and its
 * feed the stage's packing, chunk by chunk. It feeds once and is terminated
 * when that feed settles.
 */
export interface FeedThread {
  /** Sends the next chunk (its buffers are transferred: the caller must not use them again). */
  send(chunk: FeedChunk): void;
  /**
   * The image once the last chunk is fed; rejects with a ModuleFeedFailure
   * (a trap, a refused config, fuel) or the thread's own failure or
   * abandonment (a KwpError).
   */
  readonly result: Promise<FedImage>;
  /** Stops the thread; the result then rejects. Idempotent. */
  cancel(): void;
}

/** Starts a feed thread for a fresh instance of `compiled`; its log lines go to `logger`. */
export function startFeedThread(compiled: CompiledEvaluator, logger?: HostLogger): FeedThread {
  const { module, ...rest } = compiled;
  const { port1, port2 } = new MessageChannel();
  const signal = new Int32Array(new SharedArrayBuffer(8));
  const data: FeedThreadData = { module, compiled: rest, port: port2, signal };
  let worker: Worker | undefined;
  let settled = false;
  runningFeeds++;
  let settle: (image: FedImage | undefined, err?: unknown) => void = () => {};
  const result = new Promise<FedImage>((resolve, reject) => {
    settle = (image, err) => {
      if (settled) return;
      settled = true;
      Atomics.store(signal, 1, 1);
      Atomics.notify(signal, 0);
      // An image's pieces are read from the port by the restore, which closes it after the last one.
      if (!image) port1.close();
      void worker?.terminate();
      // The next feed's thread starts once no feed runs: its start would take a core from theirs.
      if (--runningFeeds === 0) prepareFeedThread();
      if (image) resolve(image);
      else reject(err);
    };
  });
  // A stage disposed before it awaits the result must not leave an unhandled rejection.
  result.catch(() => {});
  try {
    const taken = takeThread();
    worker = taken.worker;
    feedThreadCounters.started++;
    if (taken.warm) feedThreadCounters.warm++;
    worker.postMessage(data, [port2]);
    worker.on('message', (m: FeedMessage) => {
      if ('log' in m) logger?.[m.log.level](m.log.fields ?? {}, m.log.message);
      else if ('done' in m) {
        const { image, subjects, pieces } = m.done;
        let taken = 0;
        image.nextPiece = () => {
          const got = taken < pieces ? receiveMessageOnPort(port1) : undefined;
          if (!got) throw new KwpError('KWP_ERR_INSTANTIATE', `the thread that fed module ${compiled.meta.name} sent ${taken} of its image's ${pieces} pieces`);
          if (++taken === pieces) port1.close();
          return got.message as Uint8Array;
        };
        if (pieces === 0) port1.close();
        settle({ image, subjects });
      }
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
  return {
    send(chunk) {
      if (settled) return;
      const transfer = 'records' in chunk ? [chunk.records.bytes.buffer, chunk.records.ends.buffer] as ArrayBuffer[] : [];
      port1.postMessage(chunk, transfer);
      Atomics.add(signal, 0, 1);
      Atomics.notify(signal, 0);
    },
    result,
    cancel: () => settle(undefined, new KwpError('KWP_ERR_PIPELINE_INVALID', `the feed of module ${compiled.meta.name} was abandoned`)),
  };
}
