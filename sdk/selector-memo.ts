// Selector results memoised per (selector, label set). A decision tests a
// handful of peer selectors against the far end's labels and its namespace's
// labels; the same few selectors meet the same few label sets over and over
// (pods of one workload share one Labels object, pods of one namespace one
// namespace Labels object), so the answer is looked up instead of recomputed:
// one probe into a dense table that stays in the CPU's caches, instead of
// walking the selector's terms and the labels' pairs through several objects.
//
// Both keys are object serials that are never reused (Labels.id,
// LabelSelector.id) and both objects are immutable, so an entry can never be
// stale: a relabelled pod arrives as a new PodInfo with another Labels object.
// The table is direct-mapped: a collision overwrites, which costs a
// recomputation, never a wrong answer. Allocated once; a lookup allocates
// nothing.
//   entry = selector id (31 bits) << 33 | labels id (32 bits) << 1 | result

import { Labels } from "./labels";
import { LabelSelector } from "./selector";
import { ruleIndexEnabled } from "./rule-index-switch";

const BITS: u32 = 12;
const SLOTS: i32 = 1 << BITS;
const table = new StaticArray<u64>(SLOTS);

/** Whether `sel` matches `labels`, from the memo when it holds the pair. */
export function selectorMatches(sel: LabelSelector, labels: Labels): bool {
  return selectorMatchesById(sel.id, changetype<usize>(sel), labels);
}

/**
 * selectorMatches for a selector known by its serial `s` (its `id`) and its
 * raw pointer `sel`: the rule indexes keep both in their peer words, so a
 * memo hit does not read the selector object (at ten thousand policies a
 * cold cache line per peer tested); the selector is read on a miss only.
 */
export function selectorMatchesById(s: u32, sel: usize, labels: Labels): bool {
  const l = labels.id;
  // Serials ran out (2^31 selectors or 2^32 label sets made), or the stage
  // runs the unindexed evaluation (`ruleIndex: false`): no memo.
  if (s == 0 || l == 0 || !ruleIndexEnabled()) return changetype<LabelSelector>(sel).matches(labels);
  const key = (<u64>s << 33) | (<u64>l << 1);
  const slot = ((s * 0x9e3779b1) ^ (l * 0x85ebca77)) >> (32 - BITS);
  const e = unchecked(table[slot]);
  if ((e & ~<u64>1) == key) return (e & 1) != 0;
  const r = changetype<LabelSelector>(sel).matches(labels);
  unchecked(table[slot] = key | (r ? 1 : 0));
  return r;
}
