// Peer clauses as the rule indexes keep them in words (sdk/networkpolicy/
// rule-index.ts, evaluators/cluster-common/rule-index.ts): what a candidate
// rule's peer test needs sits in the index's own array, so a test that fails
// — most of them, on a first-time decision that walks every candidate of a
// denied packet — reads no object of the policy. At ten thousand policies
// each selector, IPBlock and CIDR object is a cache line of its own, cold.
//   selector (SELECTOR_WORDS): raw pointer (0: none), serial (LabelSelector.id)
//   IPv4 prefix (PREFIX_WORDS): mask, masked network (CIDR.v4Mask, .v4Net)
// Pointers are raw: the objects belong to the policies, which the index's
// owner keeps alive.

import { LabelSelector } from "./selector";
import { Labels } from "./labels";
import { CIDR } from "./cidr";
import { selectorMatchesById } from "./selector-memo";

export const SELECTOR_WORDS = 2;
export const PREFIX_WORDS = 2;
/** Bit of a peer's kind word: the peer's address test is the IPv4 prefix in its words. */
export const V4_PREFIX: u32 = 0x100;

/** Stores `sel` (or none) at `w[k]`. */
export function putSelector(w: StaticArray<u32>, k: i32, sel: LabelSelector | null): void {
  w[k] = sel == null ? 0 : <u32>changetype<usize>(sel);
  w[k + 1] = sel == null ? 0 : sel.id;
}

/** Whether a selector is stored at `w[k]` (putSelector with a selector). */
@inline export function hasSelectorAt(w: StaticArray<u32>, k: i32): bool {
  return unchecked(w[k]) != 0;
}

/** Whether the selector stored at `w[k]` matches `labels` (through the memo, by serial). */
@inline export function selectorAt(w: StaticArray<u32>, k: i32, labels: Labels): bool {
  return selectorMatchesById(unchecked(w[k + 1]), <usize>unchecked(w[k]), labels);
}

/** Stores an IPv4 `cidr`'s prefix at `w[k]`; false (nothing stored) for another family. */
export function putV4Prefix(w: StaticArray<u32>, k: i32, cidr: CIDR): bool {
  if (cidr.family != 4) return false;
  w[k] = cidr.v4Mask;
  w[k + 1] = cidr.v4Net;
  return true;
}

/** CIDR.contains over a prefix stored at `w[k]` (an IPv4 CIDR: other families are outside). */
@inline export function insideV4Prefix(w: StaticArray<u32>, k: i32, family: u8, addr: usize): bool {
  return family == 4 && (load<u32>(addr) & unchecked(w[k])) == unchecked(w[k + 1]);
}
