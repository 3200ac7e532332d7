// The shared-memory protocol between an IsolatedInstance (the host's side)
// and the thread that runs its module (instance-worker.ts). One call at a
// time: the host writes the arguments, bumps REQ and waits for DONE to reach
// the same number, so a call costs two futex wake-ups and no message; only
// payloads too large for the data area and error details travel as messages.
import { RECORD_SIZE } from '../abi/record.js';

/** Int32 slots of the control buffer. */
export const Ctl = {
  /** Sequence number of the latest request (host writes). */
  REQ: 0,
  /** Sequence number of the latest finished request (worker writes). */
  DONE: 1,
  OP: 2,
  A0: 3,
  A1: 4,
  A2: 5,
  /** The call's i32 result. */
  RESULT: 6,
  /** 0: returned; 1: threw (the error follows as a message). */
  STATUS: 7,
  /** Pages of the instance's memory after the call. */
  PAGES: 8,
  /** 0 while booting, 1 instantiated (A0: batch capacity, A1: memory cap pages), 2 failed (the error follows as a message). */
  READY: 9,
  /** Sequence number of the request the worker began (BOOT_SEQ while instantiating); its start time is in the clock slot. */
  PICKED: 10,
  /** 1 when a new data buffer waits on the port (host writes, worker clears). */
  NEW_DATA: 11,
  /** 1 when the reply's payload did not fit the data area and follows as a message. */
  REPLY_MESSAGE: 12,
  /** Reason code of record 0 of the last decided batch. */
  REASON: 13,
  /** Rule code (ABI 1.3) of record 0 of the last decided batch. */
  RULE: 14,
} as const;
export const CTL_INTS = 16;
/** Float64 slot (index in a Float64Array over the same buffer): when the worker picked up the current request, in monotonic ms. */
export const CLOCK_SLOT = CTL_INTS / 2;
export const CTL_BYTES = CTL_INTS * 4 + 8;
/** PICKED while the worker instantiates the module (its start function runs then). */
export const BOOT_SEQ = -1;

export const Op = {
  /** A0 records; A1 1 when the reason and rule codes are wanted too (at CODES_OFFSET). */
  DECIDE: 1,
  CONFIGURE: 2,
  POD_UPSERT: 3,
  POD_DELETE: 4,
  OBJECT: 5,
  EXPLAIN: 6,
  SUBJECTS: 7,
  CACHE_STATS: 8,
  /** A0 reason, A1 rule: the attribution as JSON in the payload (length returned, 0 for none). */
  ATTRIBUTION: 9,
} as const;

/** Layout of the data buffer: the records of a batch, their verdicts, then the payload area. */
export const MAX_BATCH = 64;
export const VERDICTS_OFFSET = MAX_BATCH * RECORD_SIZE;
export const PAYLOAD_OFFSET = VERDICTS_OFFSET + MAX_BATCH;
/**
 * DECIDE with A1 = 1 (flow recording): the thread also puts each record's
 * reason code (MAX_BATCH words) and then its rule code (MAX_BATCH words) at
 * the start of the payload area, in the host's byte order.
 */
export const CODES_OFFSET = PAYLOAD_OFFSET;
/** The reason and rule codes of a batch, as both threads read them in `data`. */
export function codesView(data: Uint8Array): Uint32Array {
  return new Uint32Array(data.buffer, data.byteOffset + CODES_OFFSET, MAX_BATCH * 2);
}
export const INITIAL_PAYLOAD_BYTES = 256 * 1024;

/** Both threads read the same clock: process.hrtime is CLOCK_MONOTONIC, whichever thread reads it. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface WorkerSetup {
  module: WebAssembly.Module;
  compiled: {
    meta: unknown;
    sha256: string;
    size: number;
    memoryImport?: { min: number; max?: number };
    limits: unknown;
    source: string;
    reservedBytes: number;
  };
  memoryPages?: number;
  control: SharedArrayBuffer;
  data: SharedArrayBuffer;
  /** Errors, replies too large for the data area (worker → host) and new data buffers (host → worker). */
  port: import('node:worker_threads').MessagePort;
}

/** A message on the port. */
export type PortMessage =
  | { error: { code: string; message: string } }
  | { reply: unknown }
  | { data: SharedArrayBuffer };

/** A log line of the module, posted to the worker's parent port (read by the host's event loop). */
export interface LogMessage { log: { level: 'debug' | 'info' | 'warn' | 'error'; message: string; fields?: Record<string, unknown> } }
