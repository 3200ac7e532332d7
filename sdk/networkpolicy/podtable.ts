// Per-pod state for the decision path in one open-addressing table keyed by
// pod id. A decision needs the subject's PodInfo and isolation and the peer's
// PodInfo; the SDK's registry and PodCache (Map has + get) would cost four
// hash probes for that, this table one per pod, with no allocation on lookup.

import { PodInfo } from "../index";
import { Policy } from "./policy";

/** The policies isolating one pod, per direction. */
export class Isolation {
  constructor(public ingress: StaticArray<Policy>, public egress: StaticArray<Policy>) {}
  get any(): bool { return this.ingress.length > 0 || this.egress.length > 0; }
}

export const NO_POLICIES = new StaticArray<Policy>(0);
export const NOT_ISOLATED = new Isolation(NO_POLICIES, NO_POLICIES);

export class PodEntry {
  constructor(public pod: PodInfo, public isolation: Isolation) {}
}

export class PodTable {
  private ids: StaticArray<u32> = new StaticArray<u32>(1024);
  private entries: StaticArray<PodEntry | null> = new StaticArray<PodEntry | null>(1024);
  private mask: u32 = 1023;
  private shift: u32 = 22;
  private count: i32 = 0;

  get size(): i32 { return this.count; }

  @inline private slotOf(id: u32): u32 { return (id * 0x9e3779b1) >> this.shift; }

  /** The entry for `id`, or null; id 0 (not a pod) is never stored. */
  get(id: u32): PodEntry | null {
    if (id == 0) return null;
    const ids = this.ids;
    const mask = this.mask;
    let i = this.slotOf(id);
    while (true) {
      const k = unchecked(ids[i]);
      if (k == id) return unchecked(this.entries[i]);
      if (k == 0) return null;
      i = (i + 1) & mask;
    }
    return null;
  }

  set(id: u32, entry: PodEntry): void {
    if (id == 0) return;
    if ((this.count + 1) << 1 > this.ids.length) this.grow();
    const ids = this.ids;
    const mask = this.mask;
    let i = this.slotOf(id);
    while (true) {
      const k = unchecked(ids[i]);
      if (k == id) { unchecked(this.entries[i] = entry); return; }
      if (k == 0) {
        unchecked(ids[i] = id);
        unchecked(this.entries[i] = entry);
        this.count++;
        return;
      }
      i = (i + 1) & mask;
    }
  }

  delete(id: u32): void {
    if (id == 0) return;
    const ids = this.ids;
    const entries = this.entries;
    const mask = this.mask;
    let i = this.slotOf(id);
    while (true) {
      const k = unchecked(ids[i]);
      if (k == 0) return;
      if (k == id) break;
      i = (i + 1) & mask;
    }
    // Backward-shift deletion keeps every probe chain unbroken without tombstones.
    let hole = i;
    let j = (i + 1) & mask;
    while (true) {
      const k = unchecked(ids[j]);
      if (k == 0) break;
      const home = this.slotOf(k);
      // Move k into the hole when its home is not cyclically inside (hole, j].
      const between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        unchecked(ids[hole] = k);
        unchecked(entries[hole] = unchecked(entries[j]));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked(ids[hole] = 0);
    unchecked(entries[hole] = null);
    this.count--;
  }

  private grow(): void {
    const oldIds = this.ids;
    const oldEntries = this.entries;
    const capacity = oldIds.length << 1;
    this.ids = new StaticArray<u32>(capacity);
    this.entries = new StaticArray<PodEntry | null>(capacity);
    this.mask = <u32>capacity - 1;
    this.shift = 32 - <u32>ctz(capacity);
    this.count = 0;
    for (let i = 0; i < oldIds.length; i++) {
      const id = unchecked(oldIds[i]);
      if (id != 0) this.set(id, unchecked(oldEntries[i])!);
    }
  }
}
