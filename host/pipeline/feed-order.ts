// The order in which an instance is fed a state (sdk/ABI.md, "Feeding"):
// its config, every pod, then per kind a Reset, every object and Synced. One
// definition for the stage's feed in this thread and the feed worker's.
import { ObjectOp } from '../abi/objects.js';
import type { ModuleInstance } from '../runtime/instance.js';

/**
 * Configures and feeds `inst`, yielding after every call. `pods` are PodInfo
 * records and `objects[kind]` the kind's objects as UTF-8 JSON, both in their
 * wire form (each array is read before the next call is made).
 */
export function* feedCalls(inst: ModuleInstance, config: unknown, pods: Iterable<Uint8Array>, objects: ReadonlyArray<Iterable<Uint8Array>>): Generator<void> {
  inst.configure(config ?? {});
  yield;
  for (const record of pods) {
    inst.upsertPod(record);
    yield;
  }
  for (let kind = 0; kind < objects.length; kind++) {
    inst.object(kind, ObjectOp.Reset);
    yield;
    for (const json of objects[kind]) {
      inst.object(kind, ObjectOp.Upsert, json);
      yield;
    }
    inst.object(kind, ObjectOp.Synced);
    yield;
  }
}

/** Records packed into one buffer (one transfer to a thread): record i is `bytes[ends[i-1] .. ends[i]]`. */
export interface PackedRecords {
  bytes: Uint8Array;
  ends: Uint32Array;
}

/** Builds PackedRecords from views that may be reused after each append (the codecs' scratch buffers). */
export class RecordPacker {
  private bytes = new Uint8Array(65536);
  private ends = new Uint32Array(256);
  private count = 0;
  private used = 0;

  append(record: Uint8Array): void {
    if (this.used + record.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.used + record.length));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.bytes.set(record, this.used);
    this.used += record.length;
    if (this.count === this.ends.length) {
      const grown = new Uint32Array(this.ends.length * 2);
      grown.set(this.ends);
      this.ends = grown;
    }
    this.ends[this.count++] = this.used;
  }

  /** The records so far, trimmed to their size (copies: the packer's buffers are bigger); the packer is then empty, for a stream's next chunk. */
  take(): PackedRecords {
    const taken = { bytes: this.bytes.slice(0, this.used), ends: this.ends.slice(0, this.count) };
    this.count = 0;
    this.used = 0;
    return taken;
  }
}

/** The records of `packed`, as views into its buffer. */
export function* unpacked(packed: PackedRecords): Generator<Uint8Array> {
  let start = 0;
  for (const end of packed.ends) {
    yield packed.bytes.subarray(start, end);
    start = end;
  }
}
