// The NFQUEUE binding, loaded on demand. `nfqueue` is an optional native
// dependency: `npm ci` must succeed on machines without libnetfilter-queue, and
// only `kwp agent` needs it, so it is required lazily and its absence becomes
// one clear KwpError instead of a stack trace at import time.

import { createRequire } from 'node:module';
import { KwpError } from '../errors.js';

export const NF_DROP = 0;
export const NF_ACCEPT = 1;
/** Run the hook function that queued the packet again (xtables mode, see dataplane.ts). */
export const NF_REPEAT = 4;

/** One open queue: packets arrive on the callback, verdicts go back by packet id. */
export interface PacketQueue {
  /** `mark` replaces the packet's mark when given (nfq_set_verdict2). */
  verdict(packetId: number, verdict: number, mark?: number): void;
  /**
   * A batch reader's (nfqueue-batch.ts): true while a wakeup's packets are
   * being handed over, when verdicts are held and sent together once the
   * wakeup's last packet (and `WakeupHooks.beforeSend`) returned. Absent or
   * false: each verdict is in the kernel when `verdict` returns.
   */
  readonly holding?: boolean;
}

/** A batch reader calls these around each wakeup's one send of verdicts. */
export interface WakeupHooks {
  /** The wakeup's packets were all handed over; verdicts given here are still held. */
  beforeSend?(): void;
  /** The held verdicts are in the kernel. */
  afterSend?(): void;
}

/** What the dataplane needs from a queue binding; tests substitute their own. */
export type QueueOpener = (
  queueId: number,
  onPacket: (packetId: number, nfmark: number, payload: Buffer) => void,
  hooks?: WakeupHooks,
) => PacketQueue;

interface NfqueueInfo {
  id: number;
  nfmark: number;
}

interface NfqueueBinding {
  NFQueue: new () => {
    open(num: number, bufferBytes: number): void;
    // The native object behind the JS wrapper: calling it directly avoids a wrapper object per packet.
    bindings: {
      read(callback: (info: NfqueueInfo, payload: Buffer) => void): void;
      setVerdict(id: number, verdict: number, markOrBuffer: number | null, buffer?: Buffer | null): void;
    };
  };
}

const INSTALL_HINT =
  'install it with `apt-get install libnetfilter-queue-dev g++ make python3` then `npm install nfqueue@0.3.2` (it is an optional dependency)';

let loaded: NfqueueBinding | undefined;

/** Load the binding or throw KWP_ERR_NFQUEUE_UNAVAILABLE saying what to install. */
export function loadNfqueue(moduleName = 'nfqueue'): NfqueueBinding {
  if (loaded && moduleName === 'nfqueue') return loaded;
  try {
    const require = createRequire(import.meta.url);
    const binding = require(moduleName) as NfqueueBinding;
    if (moduleName === 'nfqueue') loaded = binding;
    return binding;
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new KwpError('KWP_ERR_NFQUEUE_UNAVAILABLE', `the nfqueue native binding could not be loaded (${reason}); ${INSTALL_HINT}`, { cause: err });
  }
}

/**
 * The kernel queue `queueId` through the binding. The binding offers no close:
 * the netlink socket stays bound (and keeps the event loop alive) until the
 * process exits, so stopping means removing the rules that feed the queue.
 */
export function nfqueueOpener(bufferBytes = 4 * 1024 * 1024): QueueOpener {
  return (queueId, onPacket) => {
    const binding = loadNfqueue();
    const queue = new binding.NFQueue();
    try {
      queue.open(queueId, bufferBytes);
    } catch (err) {
      throw new KwpError(
        'KWP_ERR_DATAPLANE',
        `could not bind NFQUEUE ${queueId} (${err instanceof Error ? err.message : String(err)}); run as root and make sure no other process holds queue ${queueId}`,
        { cause: err },
      );
    }
    const native = queue.bindings;
    native.read((info, payload) => onPacket(info.id, info.nfmark, payload));
    return {
      verdict(packetId, verdict, mark) {
        if (mark === undefined) native.setVerdict(packetId, verdict, null);
        else native.setVerdict(packetId, verdict, mark >>> 0, null);
      },
    };
  };
}
