// Per-pod state for the decision path in one open-addressing table keyed by
// pod id, with no allocation on lookup.

import { PodInfo } from "./podinfo";

/**
 * Pods by id in open addressing, with each pod's PodInfo and a value of the
 * evaluator's (what it derived for the pod; null until it has) in arrays
 * parallel to the ids: a lookup reads the id array and the two references,
 * with no entry object to chase in between. The SDK's registry and PodCache
 * (Map has + get) would cost two hash probes per lookup.
 */
export class PodTable<T> {
  private ids: StaticArray<u32> = new StaticArray<u32>(1024);
  private pods: StaticArray<PodInfo | null> = new StaticArray<PodInfo | null>(1024);
  private values: StaticArray<T | null> = new StaticArray<T | null>(1024);
  private mask: u32 = 1023;
  private shift: u32 = 22;
  private count: i32 = 0;

  get size(): i32 { return this.count; }

  @inline private home(id: u32): u32 { return (id * 0x9e3779b1) >> this.shift; }

  /** The slot holding `id`, or -1; id 0 (not a pod) is never stored. Valid until the next set or delete. */
  slot(id: u32): i32 {
    if (id == 0) return -1;
    const ids = this.ids;
    const mask = this.mask;
    let i = this.home(id);
    while (true) {
      const k = unchecked(ids[i]);
      if (k == id) return <i32>i;
      if (k == 0) return -1;
      i = (i + 1) & mask;
    }
    return -1;
  }

  @inline podAt(slot: i32): PodInfo { return unchecked(this.pods[slot])!; }
  @inline valueAt(slot: i32): T | null { return unchecked(this.values[slot]); }
  @inline setValueAt(slot: i32, value: T | null): void { unchecked(this.values[slot] = value); }

  /** The pod with id `id`, or null. */
  pod(id: u32): PodInfo | null {
    const s = this.slot(id);
    return s < 0 ? null : this.podAt(s);
  }

  set(pod: PodInfo, value: T | null): void {
    const id = pod.id;
    if (id == 0) return;
    if ((this.count + 1) << 1 > this.ids.length) this.grow();
    const ids = this.ids;
    const mask = this.mask;
    let i = this.home(id);
    while (true) {
      const k = unchecked(ids[i]);
      if (k == 0) {
        unchecked(ids[i] = id);
        this.count++;
        break;
      }
      if (k == id) break;
      i = (i + 1) & mask;
    }
    unchecked(this.pods[i] = pod);
    unchecked(this.values[i] = value);
  }

  delete(id: u32): void {
    const at = this.slot(id);
    if (at < 0) return;
    const ids = this.ids;
    const pods = this.pods;
    const values = this.values;
    const mask = this.mask;
    // Backward-shift deletion keeps every probe chain unbroken without tombstones.
    let hole = <u32>at;
    let j = (hole + 1) & mask;
    while (true) {
      const k = unchecked(ids[j]);
      if (k == 0) break;
      const home = this.home(k);
      // Move k into the hole when its home is not cyclically inside (hole, j].
      const between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        unchecked(ids[hole] = k);
        unchecked(pods[hole] = unchecked(pods[j]));
        unchecked(values[hole] = unchecked(values[j]));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked(ids[hole] = 0);
    unchecked(pods[hole] = null);
    unchecked(values[hole] = null);
    this.count--;
  }

  private grow(): void {
    const oldIds = this.ids;
    const oldPods = this.pods;
    const oldValues = this.values;
    const capacity = oldIds.length << 1;
    this.ids = new StaticArray<u32>(capacity);
    this.pods = new StaticArray<PodInfo | null>(capacity);
    this.values = new StaticArray<T | null>(capacity);
    this.mask = <u32>capacity - 1;
    this.shift = 32 - <u32>ctz(capacity);
    this.count = 0;
    for (let i = 0; i < oldIds.length; i++) {
      if (unchecked(oldIds[i]) != 0) this.set(unchecked(oldPods[i])!, unchecked(oldValues[i]));
    }
  }
}
