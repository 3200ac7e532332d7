// Worker-thread entry for startFeedThread (worker-feed.ts): started ahead,
// told its module when a feed takes it, it instantiates the module, feeds it the state in the stage's order as the stage streams it
// (FeedChunk), and posts back a memory image of the fed instance, plus its subjects. The module's calls —
// ten thousand pod upserts, a Synced that indexes every policy, the
// collector's pauses inside them — run here, on another core than the
// packet path. Every check of the instance (fuel, output bounds, traps) is
// the same code as in the main thread; this file only carries data.
import { parentPort, receiveMessageOnPort } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import { loggerOf } from '../logger.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { EvaluatorInstance } from '../runtime/instance.js';
import { feedCalls, unpacked } from './feed-order.js';
import type { FeedChunk, FeedMessage, FeedThreadData } from './worker-feed.js';

const post = (m: FeedMessage, transfer: ArrayBuffer[] = []) => parentPort!.postMessage(m, transfer);
const logger = loggerOf((level, message, fields) => post({ log: { level, message, fields: fields as Record<string, unknown> } }));

class Abandoned extends Error {}

/**
 * The next chunk the stage sent, waiting for it: the feed's module calls run
 * synchronously (feedCalls pulls its lists), so the chunks are taken off the
 * port synchronously, with the signal's count to sleep on between them.
 */
function nextChunk({ port, signal }: FeedThreadData): FeedChunk {
  for (;;) {
    if (Atomics.load(signal, 1) !== 0) throw new Abandoned();
    const seen = Atomics.load(signal, 0);
    const m = receiveMessageOnPort(port);
    if (m) return m.message as FeedChunk;
    // Bounded, so an abandonment is seen even if its wake-up is missed.
    Atomics.wait(signal, 0, seen, 100);
  }
}

/** One list of the stream (the pods, or one kind's objects): its records until its `end`. */
function* streamedList(data: FeedThreadData, counted?: { n: number }): Generator<Uint8Array> {
  for (;;) {
    const chunk = nextChunk(data);
    if ('end' in chunk) return;
    if (!('records' in chunk)) throw new Error('the feed stream sent a second begin');
    if (counted) counted.n += chunk.records.ends.length;
    yield* unpacked(chunk.records);
  }
}

/** Feeds the instance `data` names the module of, as its stream comes, and posts the image or the failure. */
function feed(data: FeedThreadData): void {
  let inst: EvaluatorInstance | undefined;
  try {
    const first = nextChunk(data);
    if (!('begin' in first)) throw new Error('the feed stream did not begin with the instance\'s cap and config');
    const compiled = { ...data.compiled, module: data.module } as unknown as CompiledEvaluator;
    inst = new EvaluatorInstance(compiled, logger, { memoryPages: first.begin.memoryPages });
    const pods = { n: 0 };
    // Each list is pulled only once the one before it was fed (feedCalls' order), as the stream sends them.
    const objects = compiled.meta.kinds.map(() => ({ [Symbol.iterator]: () => streamedList(data) }));
    for (const _ of feedCalls(inst, first.begin.config, streamedList(data, pods), objects));
    const subjects = inst.subjects(pods.n);
    const image = inst.image();
    // The pieces wait on the stream's port, which the stage reads only as its restore copies them
    // (instance.ts, IMAGE_PIECE_BLOCKS); they are in its queue before `done` is posted.
    for (const piece of image.data) data.port.postMessage(piece, [piece.buffer as ArrayBuffer]);
    const pieces = image.data.length;
    post({ done: { image: { ...image, data: [] }, subjects, pieces } }, [image.blocks.buffer as ArrayBuffer]);
  } catch (err) {
    if (!(err instanceof Abandoned)) {
      // With the instance's memory, so the stage can tell whether a bigger cap would help (stage.ts, biggerCap).
      const memory = inst ? { memoryBytes: inst.memoryBytes, memoryCapPages: inst.memoryCapPages } : undefined;
      post({ error: { code: err instanceof KwpError ? err.code : 'KWP_ERR_TRAP', message: (err as Error)?.message ?? String(err), memory } });
    }
  }
  data.port.close();
}

// The thread is started ahead of its feed (worker-feed.ts, the spare) and told its module when a feed takes it: one feed a thread.
parentPort!.once('message', (data: FeedThreadData) => feed(data));
