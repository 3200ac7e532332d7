// Worker-thread entry for startFeedThread (worker-feed.ts): once the state
// arrives, instantiates the module, feeds it in the stage's order and posts
// back a memory image of the fed instance, plus its subjects. The module's calls —
// ten thousand pod upserts, a Synced that indexes every policy, the
// collector's pauses inside them — run here, on another core than the
// packet path. Every check of the instance (fuel, output bounds, traps) is
// the same code as in the main thread; this file only carries data.
import { parentPort, workerData } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import { loggerOf } from '../logger.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { EvaluatorInstance } from '../runtime/instance.js';
import { feedCalls, unpacked } from './feed-order.js';
import type { FeedMessage, FeedRequest, FeedThreadData } from './worker-feed.js';

const { module, compiled: rest } = workerData as FeedThreadData;
const post = (m: FeedMessage, transfer: ArrayBuffer[] = []) => parentPort!.postMessage(m, transfer);
const logger = loggerOf((level, message, fields) => post({ log: { level, message, fields: fields as Record<string, unknown> } }));

// The state comes once it is packed (the thread was started before, so that its start overlaps the packing).
parentPort!.once('message', (request: FeedRequest) => {
  let inst: EvaluatorInstance | undefined;
  try {
    const compiled = { ...rest, module } as unknown as CompiledEvaluator;
    inst = new EvaluatorInstance(compiled, logger, { memoryPages: request.memoryPages });
    for (const _ of feedCalls(inst, request.config, unpacked(request.pods), request.objects.map(unpacked)));
    const subjects = inst.subjects(request.pods.ends.length);
    const image = inst.image();
    post({ done: { image, subjects } }, [image.data.buffer as ArrayBuffer, image.blocks.buffer as ArrayBuffer]);
  } catch (err) {
    // With the instance's memory, so the stage can tell whether a bigger cap would help (stage.ts, biggerCap).
    const memory = inst ? { memoryBytes: inst.memoryBytes, memoryCapPages: inst.memoryCapPages } : undefined;
    post({ error: { code: err instanceof KwpError ? err.code : 'KWP_ERR_TRAP', message: (err as Error)?.message ?? String(err), memory } });
  }
});
