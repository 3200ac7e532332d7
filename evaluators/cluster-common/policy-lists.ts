// The policy lists pods share. Pods selected by the same policies share one
// PodPolicies (and with it the index of its rules); finding the shared entry
// for a list a pod was just matched to must cost neither allocation nor a key
// string as long as the list is known — a rebuild looks one up for every pod,
// and the lazy fill at a pod's first decision runs in a decision's tank — so
// lists are found by a hash of their policies and compared element by element.

import { PortIndex } from "../../sdk/port-index";
import { Policy } from "./policy";

/**
 * The policies selecting one pod, in evaluation order, per direction, and
 * their rules indexed by port (null: too few to index). Shared by every pod
 * that the same policies select; immutable.
 */
export class PodPolicies {
  egress: StaticArray<Policy> = new StaticArray<Policy>(0);
  /** 1 where the policy shares its priority with another one in the list. */
  egressTie: StaticArray<u8> = new StaticArray<u8>(0);
  ingress: StaticArray<Policy> = new StaticArray<Policy>(0);
  ingressTie: StaticArray<u8> = new StaticArray<u8>(0);
  /** What decide reads: the indexes' data (null: scan). */
  egressRules: StaticArray<u32> | null = null;
  ingressRules: StaticArray<u32> | null = null;
  /** The indexes themselves, which own what the data points at. */
  egressIndex: PortIndex | null = null;
  ingressIndex: PortIndex | null = null;
  /**
   * With a tier index (tier-index.ts) in a direction: the list's rules there
   * and its ties, as bits over the tier's rule numbers (TierIndex.bitsFor),
   * valid for the tier index of generation `tierGen` only.
   */
  egressBits: StaticArray<u64> | null = null;
  ingressBits: StaticArray<u64> | null = null;
  tierGen: u32 = 0;
}

/** FNV-1a over the policies' addresses: a compiled Policy is never changed, only replaced. */
function hashOf<L>(list: L, h: u64): u64 {
  for (let i = 0, n = list.length; i < n; i++) {
    h ^= <u64>changetype<usize>(unchecked(list[i]));
    h *= 0x100000001b3;
  }
  return h;
}

function same<L>(a: StaticArray<Policy>, b: L): bool {
  const n = a.length;
  if (n != b.length) return false;
  for (let i = 0; i < n; i++) if (unchecked(a[i]) != unchecked(b[i])) return false;
  return true;
}

export class PolicyListTable {
  private readonly byHash: Map<u64, PodPolicies[]> = new Map<u64, PodPolicies[]>();
  private count: i32 = 0;
  /** Past `bound` entries the table starts over (lists still in use stay with their pods). */
  constructor(private readonly bound: i32) {}

  static key<L>(egress: L, ingress: L): u64 {
    // The length between the halves keeps [a] | [b] apart from [a, b] | [].
    return hashOf<L>(ingress, hashOf<L>(egress, 0xcbf29ce484222325) ^ (<u64>egress.length << 40));
  }

  /** The entry with exactly these lists, or null. */
  get<L>(key: u64, egress: L, ingress: L): PodPolicies | null {
    if (!this.byHash.has(key)) return null;
    const entries = this.byHash.get(key);
    for (let i = 0, n = entries.length; i < n; i++) {
      const e = unchecked(entries[i]);
      if (same<L>(e.egress, egress) && same<L>(e.ingress, ingress)) return e;
    }
    return null;
  }

  add(key: u64, entry: PodPolicies): void {
    if (this.count >= this.bound) { this.byHash.clear(); this.count = 0; }
    if (this.byHash.has(key)) this.byHash.get(key).push(entry);
    else this.byHash.set(key, [entry]);
    this.count++;
  }
}
