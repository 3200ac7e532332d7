// Per-pod state for the decision path in one open-addressing table keyed by
// pod id, with no allocation on lookup.

import { PodInfo } from "./podinfo";

/** Words per slot of PodTable's cells: id, PodInfo pointer, value pointer, unused (16 bytes, four to a cache line). */
const CELL_WORDS: u32 = 4;

/**
 * Pods by id in open addressing, with each pod's PodInfo and a value of the
 * evaluator's (what it derived for the pod; null until it has). A slot's id
 * and both pointers sit side by side in one array of words (`cells`), so a
 * lookup that finds its pod reads one cache line, not one line in each of an
 * id, a pod and a value array (at 10,000 pods those were three cache misses
 * per end of every first-time decision). The pointers in `cells` are raw:
 * the collector does not see them, so the same references are also kept in
 * `pods` and `values`, which the decision path never reads. The SDK's
 * registry and PodCache (Map has + get) would cost two hash probes per lookup.
 */
export class PodTable<T> {
  private cells: StaticArray<u32> = new StaticArray<u32>(1024 * CELL_WORDS);
  // What keeps the cells' pointers alive (AssemblyScript's collector does not move objects).
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
    const cells = this.cells;
    const mask = this.mask;
    let i = this.home(id);
    while (true) {
      const k = unchecked(cells[i * CELL_WORDS]);
      if (k == id) return <i32>i;
      if (k == 0) return -1;
      i = (i + 1) & mask;
    }
    return -1;
  }

  @inline podAt(slot: i32): PodInfo { return changetype<PodInfo>(<usize>unchecked(this.cells[<u32>slot * CELL_WORDS + 1])); }
  @inline valueAt(slot: i32): T | null { return changetype<T | null>(<usize>unchecked(this.cells[<u32>slot * CELL_WORDS + 2])); }
  @inline setValueAt(slot: i32, value: T | null): void {
    unchecked(this.values[slot] = value);
    unchecked(this.cells[<u32>slot * CELL_WORDS + 2] = <u32>changetype<usize>(value));
  }

  /** The pod with id `id`, or null. */
  pod(id: u32): PodInfo | null {
    const s = this.slot(id);
    return s < 0 ? null : this.podAt(s);
  }

  set(pod: PodInfo, value: T | null): void {
    const id = pod.id;
    if (id == 0) return;
    // Grown at 3/4 full: every stage holds every pod, and at half full the
    // 10,000-pod table was 32,768 slots (768 KiB of a stage's memory, and the
    // freed smaller tables beside it); now 16,384 (61 % full). Linear probing
    // costs about 1.8 probes for a hit at 61 % (2.5 at 3/4) against 1.5 at
    // half, four slots to a cache line.
    if ((this.count + 1) * 4 > this.pods.length * 3) this.grow();
    const cells = this.cells;
    const mask = this.mask;
    let i = this.home(id);
    while (true) {
      const k = unchecked(cells[i * CELL_WORDS]);
      if (k == 0) {
        unchecked(cells[i * CELL_WORDS] = id);
        this.count++;
        break;
      }
      if (k == id) break;
      i = (i + 1) & mask;
    }
    unchecked(this.pods[i] = pod);
    unchecked(this.values[i] = value);
    unchecked(cells[i * CELL_WORDS + 1] = <u32>changetype<usize>(pod));
    unchecked(cells[i * CELL_WORDS + 2] = <u32>changetype<usize>(value));
  }

  delete(id: u32): void {
    const at = this.slot(id);
    if (at < 0) return;
    const cells = this.cells;
    const pods = this.pods;
    const values = this.values;
    const mask = this.mask;
    // Backward-shift deletion keeps every probe chain unbroken without tombstones.
    let hole = <u32>at;
    let j = (hole + 1) & mask;
    while (true) {
      const k = unchecked(cells[j * CELL_WORDS]);
      if (k == 0) break;
      const home = this.home(k);
      // Move k into the hole when its home is not cyclically inside (hole, j].
      const between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        unchecked(cells[hole * CELL_WORDS] = k);
        unchecked(cells[hole * CELL_WORDS + 1] = unchecked(cells[j * CELL_WORDS + 1]));
        unchecked(cells[hole * CELL_WORDS + 2] = unchecked(cells[j * CELL_WORDS + 2]));
        unchecked(pods[hole] = unchecked(pods[j]));
        unchecked(values[hole] = unchecked(values[j]));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked(cells[hole * CELL_WORDS] = 0);
    unchecked(cells[hole * CELL_WORDS + 1] = 0);
    unchecked(cells[hole * CELL_WORDS + 2] = 0);
    unchecked(pods[hole] = null);
    unchecked(values[hole] = null);
    this.count--;
  }

  private grow(): void {
    const oldPods = this.pods;
    const oldValues = this.values;
    const capacity = oldPods.length << 1;
    this.cells = new StaticArray<u32>(capacity * CELL_WORDS);
    this.pods = new StaticArray<PodInfo | null>(capacity);
    this.values = new StaticArray<T | null>(capacity);
    this.mask = <u32>capacity - 1;
    this.shift = 32 - <u32>ctz(capacity);
    this.count = 0;
    for (let i = 0; i < oldPods.length; i++) {
      const pod = unchecked(oldPods[i]);
      if (pod != null) this.set(pod, unchecked(oldValues[i]));
    }
  }
}
