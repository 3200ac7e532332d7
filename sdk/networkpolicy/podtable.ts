// Per-pod state for the decision path in one open-addressing table keyed by
// pod id. A decision needs the subject's PodInfo and isolation and the peer's
// PodInfo; the SDK's registry and PodCache (Map has + get) would cost four
// hash probes for that, this table one per pod, with no allocation on lookup.

import { PodInfo } from "../index";
import { Policy } from "./policy";
import { DirectionRules, indexRules } from "./rule-index";

/**
 * The policies isolating one pod, per direction, and their rules indexed by
 * port (null: too few rules to index). Shared by every pod isolated by the
 * same policies; immutable.
 */
export class Isolation {
  ingressRules: DirectionRules | null = null;
  egressRules: DirectionRules | null = null;
  constructor(public ingress: StaticArray<Policy>, public egress: StaticArray<Policy>) {
    this.ingressRules = indexRules(ingress, true);
    this.egressRules = indexRules(egress, false);
  }
  get any(): bool { return this.ingress.length > 0 || this.egress.length > 0; }
}

export const NO_POLICIES = new StaticArray<Policy>(0);
export const NOT_ISOLATED = new Isolation(NO_POLICIES, NO_POLICIES);

/**
 * Pods by id in open addressing, with each pod's PodInfo and Isolation in
 * arrays parallel to the ids: a lookup reads the id array and the two
 * references, with no entry object to chase in between.
 */
export class PodTable {
  private ids: StaticArray<u32> = new StaticArray<u32>(1024);
  private pods: StaticArray<PodInfo | null> = new StaticArray<PodInfo | null>(1024);
  private isolations: StaticArray<Isolation | null> = new StaticArray<Isolation | null>(1024);
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
  @inline isolationAt(slot: i32): Isolation { return unchecked(this.isolations[slot])!; }
  @inline setIsolationAt(slot: i32, isolation: Isolation): void { unchecked(this.isolations[slot] = isolation); }

  /** The pod with id `id`, or null. */
  pod(id: u32): PodInfo | null {
    const s = this.slot(id);
    return s < 0 ? null : this.podAt(s);
  }

  set(pod: PodInfo, isolation: Isolation): void {
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
    unchecked(this.isolations[i] = isolation);
  }

  delete(id: u32): void {
    const at = this.slot(id);
    if (at < 0) return;
    const ids = this.ids;
    const pods = this.pods;
    const isos = this.isolations;
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
        unchecked(isos[hole] = unchecked(isos[j]));
        hole = j;
      }
      j = (j + 1) & mask;
    }
    unchecked(ids[hole] = 0);
    unchecked(pods[hole] = null);
    unchecked(isos[hole] = null);
    this.count--;
  }

  private grow(): void {
    const oldIds = this.ids;
    const oldPods = this.pods;
    const oldIsos = this.isolations;
    const capacity = oldIds.length << 1;
    this.ids = new StaticArray<u32>(capacity);
    this.pods = new StaticArray<PodInfo | null>(capacity);
    this.isolations = new StaticArray<Isolation | null>(capacity);
    this.mask = <u32>capacity - 1;
    this.shift = 32 - <u32>ctz(capacity);
    this.count = 0;
    for (let i = 0; i < oldIds.length; i++) {
      if (unchecked(oldIds[i]) != 0) this.set(unchecked(oldPods[i])!, unchecked(oldIsos[i])!);
    }
  }
}
