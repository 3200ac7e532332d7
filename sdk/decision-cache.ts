// A memo of verdicts for evaluators whose answer is a function of the record
// (minus its source port), the delivered objects and config, and the PodInfos
// of the record's two pods (Evaluator.cachesDecisions). The NFQUEUE only shows
// the first packet of each connection, but clients open connections to the
// same server port over and over, so the same question comes back far more
// often than the state it depends on changes.
//
// Staleness is tracked with a delivery clock instead of clearing the table:
// every delivery ticks the clock; an object or config change stamps the whole
// table stale, a pod change stamps only that pod (in a small hashed table, so
// an unrelated pod sharing the slot may also lose its entries, which costs a
// recomputation, never a wrong answer). An entry is used only when it is
// younger than every stamp that could affect it.
//
// Two tables of 8-way sets (4-way sets missed on 9 % of the bench's
// questions, keys landing five or more to a set). Beside each table, a
// 16-bit tag per way (a hash fragment, 0 = empty) in a dense array that
// stays in the CPU's near caches: a lookup reads its set's tags and touches
// an entry only when its tag matches, so a hit costs one far memory access
// instead of a walk over four cache lines of entries. An entry is read only
// after it was written, so neither table is ever cleared. A full set gives up the way the newcomer's hash
// picks rather than its oldest entry: traffic cycles through the same
// questions, and oldest-first eviction would make every key of an overfull
// set miss on every round instead of only the ones sharing a way.
//   IPv4, 32-byte entries: 0 head, 8 pod ids, 16 addresses, 24 stamp, 28 answers
//   IPv6, 64-byte entries: 0 head, 8 pod ids, 16..47 addresses, 48 stamp, 52 answers
// head = record bytes 0..7 with the source port masked out and the ICMP type
// and code put in its place; byte 3 keeps the record's flags (ABI 1.2: a
// Service hairpin is decided apart from a pod's traffic to its own address)
// in its low nibble, and an entry keeps its verdict in the high nibble.
// A pair question (ABI 1.4, kwp_decide_pair: direction byte 2) is one entry
// holding both answers: its key is the record with direction 2 and the
// ingress verdict sits in the high nibble of head byte 0. One lookup then
// answers both directions, and the tables hold half as many entries for the
// same traffic.
//
// An answer's reason and rule codes (8 bytes, ABI 1.3) are not kept in the
// entry but interned: `answers` holds each distinct (reason, rule) pair once
// and an entry's answers word holds two 16-bit indices into it, egress in the
// low half and a pair's ingress in the high half. The codes used to sit in
// two side arrays indexed by way, so a hit read four cache lines far apart
// (the set's tags, the entry, the rule code, a pair's ingress codes); now it
// reads the tags, the entry and one or two answers from a dense table in
// which the few answers a stage gives most often stay in the CPU's caches
// (with 8,192 distinct flows the side arrays did not). The answer table
// fills up only when a stage has given ANSWERS distinct answers since it
// last started one; it then starts again empty and makes every entry stale
// (an entry is used only when fresh, so it never reads an index of an older
// answer table).
import { OFF_REASON, OFF_RULE, OFF_VERDICT, OFF_SRC_POD, OFF_SRC_ADDR, OFF_DST_ADDR, OFF_ICMP_TYPE } from "./decision";

const WAYS: u32 = 8;
const V4_SETS: u32 = 4096;
const V4_ENTRY: usize = 32;
const V6_SETS: u32 = 512;
const V6_ENTRY: usize = 64;
const POD_SLOTS: u32 = 16384;
// Distinct (reason, rule) answers before the answer table starts again, and
// the open-addressing index that finds an answer's number (u16, 0 = empty).
const ANSWERS: u32 = 32768;
const ANSWER_SLOTS: u32 = ANSWERS * 2;
const STAMP_AT: usize = 24;
const HEAD_MASK: u64 = 0xFFFF_0000_0FFF_FFFF;
const VERDICT_SHIFT: u64 = 28;
const INGRESS_VERDICT_SHIFT: u64 = 4;
// An entry's head is the key's head plus the verdict in byte 3's high nibble
// (and, for a pair, the ingress verdict in byte 0's high nibble).
const ENTRY_HEAD_MASK: u64 = ~((<u64>0xF << VERDICT_SHIFT) | (<u64>0xF << INGRESS_VERDICT_SHIFT));

let v4Table: usize = 0;
let v6Table: usize = 0;
let v4Tags: usize = 0;
let v6Tags: usize = 0;
let answers: usize = 0;
let answerIndex: usize = 0;
let answerCount: u32 = 0;
const podStamps = new StaticArray<u32>(<i32>POD_SLOTS);
let clock: u32 = 1;
let objectsStamp: u32 = 1;
// Off until kwp_configure has asked the evaluator (cachesDecisions).
let enabled: bool = false;

// The key of the record being decided, kept between lookup and remember.
let head: u64 = 0;
let podIds: u64 = 0;
let a0: u64 = 0;
let a1: u64 = 0;
let a2: u64 = 0;
let a3: u64 = 0;
let slot: usize = 0;
let slotTag: usize = 0;
let tag: u16 = 0;
// After a hit on a pair entry: its head and its answers word (pairIngress).
let hitHead: u64 = 0;
let hitAnswers: u32 = 0;

// Hits and misses since the module started (u64 each), read by the host
// through the optional kwp_decision_cache_stats export.
export const stats = memory.data(16, 8);

const V4_BYTES: usize = <usize>V4_SETS * WAYS * V4_ENTRY;
const V6_BYTES: usize = <usize>V6_SETS * WAYS * V6_ENTRY;

/** Stage config `decisionCache: false` turns the memo off (measurements, debugging). */
export function setDecisionCacheEnabled(on: bool): void {
  // Allocated here, not on the first lookup, so deciding never allocates.
  // Only the tags need clearing: an entry is never read before it is written.
  if (on && v4Table == 0) {
    v4Table = heap.alloc(V4_BYTES);
    v6Table = heap.alloc(V6_BYTES);
    v4Tags = heap.alloc(<usize>V4_SETS * WAYS * 2);
    memory.fill(v4Tags, 0, <usize>V4_SETS * WAYS * 2);
    v6Tags = heap.alloc(<usize>V6_SETS * WAYS * 2);
    memory.fill(v6Tags, 0, <usize>V6_SETS * WAYS * 2);
    answers = heap.alloc(<usize>ANSWERS * 8);
    answerIndex = heap.alloc(<usize>ANSWER_SLOTS * 2);
    memory.fill(answerIndex, 0, <usize>ANSWER_SLOTS * 2);
  }
  enabled = on;
}
export function decisionCacheEnabled(): bool { return enabled; }

function tick(): u32 {
  if (clock == u32.MAX_VALUE) {
    // Four billion deliveries: start the clock again on empty tables.
    if (v4Tags != 0) {
      memory.fill(v4Tags, 0, <usize>V4_SETS * WAYS * 2);
      memory.fill(v6Tags, 0, <usize>V6_SETS * WAYS * 2);
    }
    for (let i: i32 = 0; i < <i32>POD_SLOTS; i++) unchecked(podStamps[i] = 0);
    clock = 1;
    objectsStamp = 1;
  }
  return ++clock;
}

/**
 * The number of the (reason, rule) answer, added when new. The caller has
 * made room (`makeRoom`) for every answer it interns, so a number handed out
 * stays valid until the next restart.
 */
function intern(reason: u32, rule: u32): u32 {
  const value = <u64>reason | (<u64>rule << 32);
  let i = <u32>mix(value * 0x9E3779B97F4A7C15) & (ANSWER_SLOTS - 1);
  while (true) {
    const n = <u32>load<u16>(answerIndex + <usize>i * 2);
    if (n == 0) break;
    if (load<u64>(answers + <usize>(n - 1) * 8) == value) return n - 1;
    i = (i + 1) & (ANSWER_SLOTS - 1);
  }
  store<u64>(answers + <usize>answerCount * 8, value);
  store<u16>(answerIndex + <usize>i * 2, <u16>(answerCount + 1));
  return answerCount++;
}

/**
 * Makes room for `n` new answers: when the answer table could overflow, it
 * starts again empty and every entry written so far goes stale with the
 * numbers it holds (entries are used only when younger than objectsStamp;
 * the entry about to be written gets the new clock and stays fresh).
 */
@inline function makeRoom(n: u32): void {
  if (answerCount + n <= ANSWERS) return;
  memory.fill(answerIndex, 0, <usize>ANSWER_SLOTS * 2);
  answerCount = 0;
  objectsStamp = tick();
}

/** Answer number `n`: its reason code in the low word, its rule code in the high one (the record's order). */
@inline function answerAt(n: u32): u64 { return load<u64>(answers + <usize>n * 8); }

/** An object, a reset or the config changed: nothing cached so far holds. */
export function objectsChanged(): void { objectsStamp = tick(); }

/** Pod `id` was upserted or deleted: answers about it are stale. */
export function podChanged(id: u32): void { unchecked(podStamps[id & (POD_SLOTS - 1)] = tick()); }

@inline function fresh(stamp: u32): bool {
  return stamp >= objectsStamp
    && stamp >= unchecked(podStamps[<u32>podIds & (POD_SLOTS - 1)])
    && stamp >= unchecked(podStamps[<u32>(podIds >> 32) & (POD_SLOTS - 1)]);
}

@inline function hit(rec: usize, entryHead: u64, entryAnswers: u32): bool {
  const answer = answerAt(entryAnswers & 0xFFFF);
  store<u8>(rec + OFF_VERDICT, <u8>((entryHead >> VERDICT_SHIFT) & 0xF));
  store<u64>(rec + OFF_REASON, answer);
  store<u64>(stats, load<u64>(stats) + 1);
  return true;
}

@inline function mix(h: u64): u64 {
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9;
  return h ^ (h >> 32);
}

@inline function sameKey(e: usize, v6: bool): bool {
  if ((load<u64>(e) & ENTRY_HEAD_MASK) != head || load<u64>(e, 8) != podIds || load<u64>(e, 16) != a0) return false;
  return !v6 || (load<u64>(e, 24) == a1 && load<u64>(e, 32) == a2 && load<u64>(e, 40) == a3);
}

/**
 * Looks `rec` up. On a hit, writes the cached verdict and reason into the
 * record and returns true; on a miss, notes where `remember` will put it.
 */
export function lookup(rec: usize): bool {
  head = (load<u64>(rec) & HEAD_MASK) | (<u64>load<u16>(rec + OFF_ICMP_TYPE) << 32);
  podIds = load<u64>(rec + OFF_SRC_POD);
  const v6 = load<u8>(rec, 1) == 6;
  let h: u64;
  if (v6) {
    a0 = load<u64>(rec + OFF_SRC_ADDR);
    a1 = load<u64>(rec + OFF_SRC_ADDR, 8);
    a2 = load<u64>(rec + OFF_DST_ADDR);
    a3 = load<u64>(rec + OFF_DST_ADDR, 8);
    h = mix(head * 0x9E3779B97F4A7C15 ^ podIds * 0xC2B2AE3D27D4EB4F ^ a0 * 0x165667B19E3779F9
      ^ a1 * 0xD6E8FEB86659FD93 ^ a2 * 0xFF51AFD7ED558CCD ^ a3 * 0xC4CEB9FE1A85EC53);
  } else {
    a0 = <u64>load<u32>(rec + OFF_SRC_ADDR) | (<u64>load<u32>(rec + OFF_DST_ADDR) << 32);
    h = mix(head * 0x9E3779B97F4A7C15 ^ podIds * 0xC2B2AE3D27D4EB4F ^ a0 * 0x165667B19E3779F9);
  }
  const size = v6 ? V6_ENTRY : V4_ENTRY;
  const stampAt = v6 ? STAMP_AT + 24 : STAMP_AT;
  const index = <usize>(<u32>h & ((v6 ? V6_SETS : V4_SETS) - 1));
  const set = (v6 ? v6Table : v4Table) + index * WAYS * size;
  const tags = (v6 ? v6Tags : v4Tags) + index * WAYS * 2;
  tag = <u16>(h >> 48) | 1;
  let empty: usize = WAYS;
  for (let w: usize = 0; w < <usize>WAYS; w++) {
    const t = load<u16>(tags + w * 2);
    if (t == tag) {
      const e = set + w * size;
      if (sameKey(e, v6)) {
        if (fresh(load<u32>(e + stampAt))) {
          hitHead = load<u64>(e);
          hitAnswers = load<u32>(e + stampAt, 4);
          return hit(rec, hitHead, hitAnswers);
        }
        // Stale: recompute into the same place.
        slot = e;
        slotTag = tags + w * 2;
        store<u64>(stats + 8, load<u64>(stats + 8) + 1);
        return false;
      }
    } else if (t == 0 && empty == WAYS) empty = w;
  }
  const way = empty != WAYS ? empty : <usize>(<u32>(h >> 13) & (WAYS - 1));
  slot = set + way * size;
  slotTag = tags + way * 2;
  store<u64>(stats + 8, load<u64>(stats + 8) + 1);
  return false;
}

/**
 * After `lookup` hit a pair question (direction byte 2): the ingress answer
 * of that entry, written to `out` as kwp_decide_pair's pair area entry
 * (verdict at 0, reason at 4, rule at 8).
 */
export function pairIngress(out: usize): void {
  const answer = answerAt(hitAnswers >> 16);
  store<u8>(out, <u8>((hitHead >> INGRESS_VERDICT_SHIFT) & 0xF));
  store<u32>(out, <u32>answer, 4);
  store<u32>(out, <u32>(answer >> 32), 8);
}

/** Stores the verdict `decide` just wrote into the record `lookup` missed. */
export function remember(rec: usize): void {
  const verdict = load<u8>(rec + OFF_VERDICT);
  // A verdict outside 0..3 is the stage's failure, not an answer; it would not fit the nibble either.
  if (verdict > 3) return;
  makeRoom(1);
  const egress = intern(load<u32>(rec + OFF_REASON), load<u32>(rec + OFF_RULE));
  writeEntry(rec, head | (<u64>verdict << VERDICT_SHIFT), egress);
}

/**
 * Stores a pair question's answers into the entry `lookup` missed: egress in
 * the record's result fields, ingress in `out` (a pair area entry).
 */
export function rememberPair(rec: usize, out: usize): void {
  const verdict = load<u8>(rec + OFF_VERDICT);
  const ingress = load<u8>(out);
  if (verdict > 3 || ingress > 3) return;
  makeRoom(2);
  const egress = intern(load<u32>(rec + OFF_REASON), load<u32>(rec + OFF_RULE));
  const ingressAnswer = intern(load<u32>(out, 4), load<u32>(out, 8));
  writeEntry(rec, head | (<u64>verdict << VERDICT_SHIFT) | (<u64>ingress << INGRESS_VERDICT_SHIFT), egress | (ingressAnswer << 16));
}

@inline function writeEntry(rec: usize, entryHead: u64, entryAnswers: u32): void {
  const e = slot;
  const v6 = load<u8>(rec, 1) == 6;
  const stampAt = v6 ? STAMP_AT + 24 : STAMP_AT;
  store<u64>(e, entryHead);
  store<u64>(e, podIds, 8);
  store<u64>(e, a0, 16);
  if (v6) {
    store<u64>(e, a1, 24);
    store<u64>(e, a2, 32);
    store<u64>(e, a3, 40);
  }
  store<u32>(e + stampAt, clock);
  store<u32>(e + stampAt, entryAnswers, 4);
  store<u16>(slotTag, tag);
}
