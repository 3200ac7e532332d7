// PodInfo by IPv4 address, for the packet path: two lookups per packet.
// An open-addressing table (linear probing) answers in one or two memory reads
// where a Map<number, …> walks its bucket chain; with 10,000 pods the lookups
// were about 96 ns a packet through the Map. Each slot is two int32 words side
// by side, the key and the pod's id plus one (0: empty), so a probe and the id
// the batched packet path needs come from one cache line: the PodInfo object
// itself (another cache miss per end at 10,000 pods) is read only by callers
// that need more than the id. Deletion shifts the following run back, so no
// tombstones build up under pod churn.
import type { PodInfo } from '../contract.js';

export class Ipv4PodIndex {
  /** Slot i: words 2i (the key) and 2i + 1 (the value's id + 1; 0 when the slot is empty). */
  private slots = new Int32Array(128);
  private values: (PodInfo | undefined)[] = new Array(64).fill(undefined);
  private mask = 63;
  private count = 0;

  get size(): number { return this.count; }

  /** `key`: the address's 32 bits as an int32. */
  get(key: number): PodInfo | undefined {
    const slots = this.slots;
    const mask = this.mask;
    for (let i = slotOf(key, mask); ; i = (i + 1) & mask) {
      if (slots[2 * i + 1] === 0) return undefined;
      if (slots[2 * i] === key) return this.values[i];
    }
  }

  /** The id of the PodInfo `get(key)` returns, 0 when there is none: the slot's words only. */
  idOf(key: number): number {
    const slots = this.slots;
    const mask = this.mask;
    for (let i = slotOf(key, mask); ; i = (i + 1) & mask) {
      const id = slots[2 * i + 1];
      if (id === 0) return 0;
      if (slots[2 * i] === key) return id - 1;
    }
  }

  set(key: number, value: PodInfo): void {
    if ((this.count + 1) * 2 > this.mask + 1) this.grow();
    const slots = this.slots;
    const mask = this.mask;
    for (let i = slotOf(key, mask); ; i = (i + 1) & mask) {
      const empty = slots[2 * i + 1] === 0;
      if (empty || slots[2 * i] === key) {
        if (empty) this.count++;
        slots[2 * i] = key;
        slots[2 * i + 1] = value.id + 1;
        this.values[i] = value;
        return;
      }
    }
  }

  delete(key: number): void {
    const slots = this.slots;
    const mask = this.mask;
    let i = slotOf(key, mask);
    for (; ; i = (i + 1) & mask) {
      if (slots[2 * i + 1] === 0) return;
      if (slots[2 * i] === key) break;
    }
    this.count--;
    // Move back every later entry of the run that would not be found past the hole.
    for (let j = (i + 1) & mask; slots[2 * j + 1] !== 0; j = (j + 1) & mask) {
      const home = slotOf(slots[2 * j], mask);
      const reachable = i <= j ? home > i && home <= j : home > i || home <= j;
      if (reachable) continue;
      slots[2 * i] = slots[2 * j];
      slots[2 * i + 1] = slots[2 * j + 1];
      this.values[i] = this.values[j];
      i = j;
    }
    slots[2 * i + 1] = 0;
    this.values[i] = undefined;
  }

  private grow(): void {
    const slots = this.slots;
    const values = this.values;
    const capacity = (this.mask + 1) * 2;
    this.slots = new Int32Array(capacity * 2);
    this.values = new Array(capacity).fill(undefined);
    this.mask = capacity - 1;
    this.count = 0;
    for (let i = 0; i < values.length; i++) {
      if (slots[2 * i + 1] !== 0) this.set(slots[2 * i], values[i]!);
    }
  }
}

function slotOf(key: number, mask: number): number {
  const h = Math.imul(key, 0x9e3779b1);
  return (h ^ (h >>> 16)) & mask;
}
