// The batch reader: the optional `kwp-nfqueue-batch` addon
// (host/dataplane/nfqueue-batch/, built by node-gyp during `npm ci` when
// libnetfilter-queue-dev is installed) drains a queue's socket at each
// wakeup and hands over all its packets in one call, and sends the verdicts
// given meanwhile in one sendto(). Like `nfqueue` it is loaded lazily and
// its absence is an answer, not a crash: `queueReaderOpener` then returns the
// binding's opener (nfqueue.ts).

import { createRequire } from 'node:module';
import { KwpError } from '../errors.js';
import { nfqueueOpener, type PacketQueue, type QueueOpener, type WakeupHooks } from './nfqueue.js';

interface NfqueueBatchBinding {
  open(queueId: number, socketBufferBytes: number, copyBytes: number, receive: ArrayBuffer, maxPackets: number, onPackets: (count: number) => void): unknown;
  /** 0, or -errno when the kernel refused the datagram. */
  verdicts(reader: unknown, slots: ArrayBuffer, count: number): number;
  close(reader: unknown): void;
  slotWords: number;
  verdictWords: number;
}

/** Which reader feeds the Dataplane: `auto` takes the batch reader when it is built, else the binding. */
export type QueueReader = 'auto' | 'batch' | 'binding';

/** Packets handed over per call at most; the socket is read again at once when more wait. */
export const MAX_BATCH_PACKETS = 64;
/** The receive buffer's payload area: a batch is handed over early when the next payload would not fit. */
const PAYLOAD_AREA_BYTES = 256 * 1024;
/** Bytes of each packet the kernel copies to us (all of it, as the binding asks: DNS answers need theirs whole). */
const COPY_BYTES = 0xffff;
/** The slots' flag that says the verdict sets the packet's mark. */
const SET_MARK = 1;

let loaded: NfqueueBatchBinding | undefined;
let loadError: string | undefined;

/** The addon, or undefined (with the reason in `batchReaderUnavailable()`) when it is not built. */
export function loadNfqueueBatch(moduleName = 'kwp-nfqueue-batch'): NfqueueBatchBinding | undefined {
  if (moduleName === 'kwp-nfqueue-batch' && (loaded || loadError)) return loaded;
  try {
    const binding = createRequire(import.meta.url)(moduleName) as NfqueueBatchBinding;
    if (moduleName === 'kwp-nfqueue-batch') loaded = binding;
    return binding;
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    if (moduleName === 'kwp-nfqueue-batch') loadError = reason;
    return undefined;
  }
}

/** Why the batch reader could not be loaded, once a load was tried and failed. */
export function batchReaderUnavailable(): string | undefined {
  return loadError;
}

/** A queue whose verdicts may be held and sent together (the batch reader's). */
export interface BatchPacketQueue extends PacketQueue {
  /** Verdicts given while this is true are sent by `flush()`, or at the end of the wakeup. */
  readonly holding: boolean;
  /** Send the held verdicts now, in one datagram. */
  flush(): void;
  /** Verdicts the kernel refused (counted per verdict; the packet then waits in the kernel until the queue's bypass or timeout). */
  readonly verdictFailures: number;
  /** Wakeups and the packets they carried, for a packets-per-wakeup figure. */
  readonly wakeups: number;
  readonly packets: number;
  close(): void;
}

/**
 * An opener over the batch reader. A wakeup's packets go to `onPacket` one
 * after another in one call; the verdicts given while they do (and in
 * `hooks.beforeSend`) are held and sent in one datagram when the last packet
 * returns; then `hooks.afterSend` runs. A verdict given outside a wakeup (an
 * asynchronous judge's) is sent at once.
 */
export function batchQueueOpener(binding: NfqueueBatchBinding, socketBufferBytes = 4 * 1024 * 1024): (queueId: number, onPacket: (id: number, mark: number, payload: Buffer) => void, hooks?: WakeupHooks) => BatchPacketQueue {
  return (queueId, onPacket, hooks) => {
    const headBytes = MAX_BATCH_PACKETS * binding.slotWords * 4;
    const receive = new ArrayBuffer(headBytes + PAYLOAD_AREA_BYTES);
    const slots = new Uint32Array(receive, 0, MAX_BATCH_PACKETS * binding.slotWords);
    const bytes = new Uint8Array(receive);
    let verdictSlots = new Uint32Array(MAX_BATCH_PACKETS * binding.verdictWords);
    let held = 0;
    let holding = false;
    let failures = 0;
    let wakeups = 0;
    let packets = 0;
    let reader: unknown;
    const send = () => {
      if (held === 0) return;
      const count = held;
      held = 0;
      if (binding.verdicts(reader, verdictSlots.buffer as ArrayBuffer, count) === 0) return;
      // The datagram was refused as a whole (a bad id stops nothing else, so this is the socket): each verdict alone once more.
      const words = binding.verdictWords;
      const one = new Uint32Array(words);
      for (let i = 0; i < count; i++) {
        one.set(verdictSlots.subarray(i * words, i * words + words));
        if (binding.verdicts(reader, one.buffer, 1) !== 0) failures++;
      }
    };
    const onPackets = (count: number) => {
      wakeups++;
      packets += count;
      holding = true;
      try {
        const words = binding.slotWords;
        for (let i = 0; i < count; i++) {
          const at = i * words;
          const offset = slots[at + 2];
          // A copy: parsed packets keep views of their payload (the fast path holds some for its fill), and the area is reused.
          onPacket(slots[at], slots[at + 1], Buffer.from(bytes.subarray(offset, offset + slots[at + 3])));
        }
        hooks?.beforeSend?.();
      } finally {
        holding = false;
        send();
      }
      hooks?.afterSend?.();
    };
    try {
      reader = binding.open(queueId, socketBufferBytes, COPY_BYTES, receive, MAX_BATCH_PACKETS, onPackets);
    } catch (err) {
      throw new KwpError(
        'KWP_ERR_DATAPLANE',
        `could not bind NFQUEUE ${queueId} (${err instanceof Error ? err.message : String(err)}); run as root and make sure no other process holds queue ${queueId}`,
        { cause: err },
      );
    }
    return {
      get holding() {
        return holding;
      },
      get verdictFailures() {
        return failures;
      },
      get wakeups() {
        return wakeups;
      },
      get packets() {
        return packets;
      },
      verdict(packetId, verdict, mark) {
        const words = binding.verdictWords;
        if (held * words === verdictSlots.length) {
          const grown = new Uint32Array(verdictSlots.length * 2);
          grown.set(verdictSlots);
          verdictSlots = grown;
        }
        const at = held * words;
        verdictSlots[at] = packetId >>> 0;
        verdictSlots[at + 1] = verdict >>> 0;
        verdictSlots[at + 2] = mark === undefined ? 0 : mark >>> 0;
        verdictSlots[at + 3] = mark === undefined ? 0 : SET_MARK;
        held++;
        if (!holding) send();
      },
      flush: send,
      close() {
        send();
        binding.close(reader);
      },
    };
  };
}

/**
 * The opener the Dataplane uses by default: the batch reader when `reader`
 * allows it and the addon is built, else the `nfqueue` binding's.
 * `reader: 'batch'` without the addon is an error rather than a silent fallback.
 */
export function queueReaderOpener(reader: QueueReader = 'auto'): { opener: QueueOpener; reader: 'batch' | 'binding' } {
  if (reader !== 'binding') {
    const binding = loadNfqueueBatch();
    if (binding) return { opener: batchQueueOpener(binding), reader: 'batch' };
    if (reader === 'batch') throw new KwpError('KWP_ERR_NFQUEUE_UNAVAILABLE', `the batch reader (kwp-nfqueue-batch) could not be loaded (${batchReaderUnavailable()}); install libnetfilter-queue-dev, g++ and make, then npm ci`);
  }
  return { opener: nfqueueOpener(), reader: 'binding' };
}
