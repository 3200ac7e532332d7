// Worker-thread entry for IsolatedInstance: one module instance in a thread
// of its own, so that the host can stop a call that does not return (by
// terminating this thread) and keep its own thread free. The loop below never
// returns to the event loop: it sleeps in Atomics.wait until the host posts a
// request, runs it on the EvaluatorInstance and wakes the host. Everything
// the instance checks (fuel, output bounds, traps) is the same code as in the
// host's thread; this file only carries arguments and results.
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { KwpError } from '../errors.js';
import { loggerOf } from '../logger.js';
import type { CompiledEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import {
  BOOT_SEQ, CLOCK_SLOT, Ctl, MAX_BATCH, Op, PAYLOAD_OFFSET, VERDICTS_OFFSET,
  codesView, monotonicMs, type LogMessage, type PortMessage, type WorkerSetup,
} from './instance-protocol.js';
import { RECORD_SIZE } from '../abi/record.js';

const setup = workerData as WorkerSetup;
const ctl = new Int32Array(setup.control, 0, 16);
const clock = new Float64Array(setup.control);
let data = new Uint8Array(setup.data);
/** Flow recording's codes of one DECIDE (see CODES_OFFSET); declared before serve() runs. */
const reasons = new Uint32Array(MAX_BATCH);
const rules = new Uint32Array(MAX_BATCH);
const port = setup.port;
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

const logger = loggerOf((level, message, fields) => {
  parentPort?.postMessage({ log: { level, message, fields: fields as Record<string, unknown> } } satisfies LogMessage);
});

function fail(err: unknown): void {
  const code = err instanceof KwpError ? err.code : 'KWP_ERR_TRAP';
  port.postMessage({ error: { code, message: (err as Error)?.message ?? String(err) } } satisfies PortMessage);
}

/** Writes a reply payload to the data area, or posts it when it does not fit. Returns its byte length. */
function reply(bytes: Uint8Array): number {
  if (bytes.length <= data.length - PAYLOAD_OFFSET) {
    data.set(bytes, PAYLOAD_OFFSET);
  } else {
    port.postMessage({ reply: bytes } satisfies PortMessage);
    ctl[Ctl.REPLY_MESSAGE] = 1;
  }
  return bytes.length;
}

const payload = (len: number) => data.slice(PAYLOAD_OFFSET, PAYLOAD_OFFSET + len);

let inst: EvaluatorInstance;
clock[CLOCK_SLOT] = monotonicMs();
Atomics.store(ctl, Ctl.PICKED, BOOT_SEQ);
try {
  const compiled = { ...setup.compiled, module: setup.module } as unknown as CompiledEvaluator;
  inst = new EvaluatorInstance(compiled, logger, { memoryPages: setup.memoryPages });
  ctl[Ctl.A0] = inst.batchCapacity;
  ctl[Ctl.A1] = inst.memoryCapPages;
  ctl[Ctl.PAGES] = inst.memoryBytes / 65536;
  Atomics.store(ctl, Ctl.READY, 1);
} catch (err) {
  fail(err);
  Atomics.store(ctl, Ctl.READY, 2);
}
Atomics.notify(ctl, Ctl.READY);
if (Atomics.load(ctl, Ctl.READY) === 1) serve();

function serve(): never {
  const verdicts = new Uint8Array(64);
  let last = 0;
  for (;;) {
    Atomics.wait(ctl, Ctl.REQ, last);
    const seq = Atomics.load(ctl, Ctl.REQ);
    if (seq === last) continue;
    last = seq;
    clock[CLOCK_SLOT] = monotonicMs();
    Atomics.store(ctl, Ctl.PICKED, seq);
    if (ctl[Ctl.NEW_DATA] === 1) {
      const msg = receiveMessageOnPort(port)?.message as PortMessage | undefined;
      if (msg && 'data' in msg) data = new Uint8Array(msg.data);
      ctl[Ctl.NEW_DATA] = 0;
    }
    ctl[Ctl.STATUS] = 0;
    ctl[Ctl.REPLY_MESSAGE] = 0;
    try {
      ctl[Ctl.RESULT] = run(ctl[Ctl.OP], verdicts);
    } catch (err) {
      fail(err);
      ctl[Ctl.STATUS] = 1;
    }
    ctl[Ctl.PAGES] = inst.memoryBytes / 65536;
    Atomics.store(ctl, Ctl.DONE, seq);
    Atomics.notify(ctl, Ctl.DONE);
  }
}

function run(op: number, verdicts: Uint8Array): number {
  switch (op) {
    case Op.DECIDE: {
      const n = ctl[Ctl.A0];
      const capacity = inst.batchCapacity;
      const records = data.subarray(0, n * RECORD_SIZE);
      const withCodes = ctl[Ctl.A1] === 1;
      for (let first = 0; first < n; first += capacity) {
        inst.decideInto(records, first, Math.min(capacity, n - first), verdicts, withCodes ? reasons : undefined, withCodes ? rules : undefined);
      }
      data.set(verdicts.subarray(0, n), VERDICTS_OFFSET);
      if (withCodes) {
        const codes = codesView(data);
        codes.set(reasons.subarray(0, n), 0);
        codes.set(rules.subarray(0, n), MAX_BATCH);
      }
      // The reason stays in the instance's batch area only for the last chunk; a single record (explain) is its own chunk.
      ctl[Ctl.REASON] = n === 1 ? inst.lastReason() : 0;
      ctl[Ctl.RULE] = n === 1 ? inst.lastRule() : 0;
      return 0;
    }
    case Op.CONFIGURE:
      inst.configure(JSON.parse(textDecoder.decode(payload(ctl[Ctl.A0]))));
      return 0;
    case Op.POD_UPSERT:
      inst.upsertPod(payload(ctl[Ctl.A0]));
      return 0;
    case Op.POD_DELETE:
      inst.deletePod(ctl[Ctl.A0]);
      return 0;
    case Op.OBJECT: {
      const len = ctl[Ctl.A2];
      inst.object(ctl[Ctl.A0], ctl[Ctl.A1], len < 0 ? undefined : payload(len));
      return 0;
    }
    case Op.EXPLAIN:
      return reply(textEncoder.encode(inst.explain(ctl[Ctl.A0])));
    case Op.ATTRIBUTION: {
      const a = inst.attribution(ctl[Ctl.A0] >>> 0, ctl[Ctl.A1] >>> 0);
      return a ? reply(textEncoder.encode(JSON.stringify(a))) : 0;
    }
    case Op.SUBJECTS: {
      const subjects = inst.subjects(ctl[Ctl.A0] < 0 ? Infinity : ctl[Ctl.A0]);
      if (subjects === 'all') return -1;
      reply(new Uint8Array(Uint32Array.from(subjects).buffer));
      return subjects.length;
    }
    case Op.CACHE_STATS: {
      const stats = inst.decisionCacheStats();
      if (!stats) return 0;
      reply(new Uint8Array(Float64Array.of(stats.hits, stats.misses).buffer));
      return 1;
    }
    default:
      throw new Error(`unknown operation ${op}`);
  }
}
