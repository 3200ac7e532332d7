// One rule index for the whole tier, per direction, and per shared policy list
// only a bitset of which of its rules belong to the list.
//
// The per-list index (rule-index.ts) copies the port tables, rule words and
// peer words of every policy a list holds into that list's own array, so a
// tier of 60 policies whose subjects overlap ends up with hundreds of
// distinct lists, each a fresh stretch of memory that a first-time decision
// reads cold (the bench's `default` and `large` scales: about ten policies
// a pod, each a different combination). A tier's rules are few (the bench's
// Admin tier has 60, the Baseline 40), so one index over all of them — the
// same words indexTierRules writes, numbered over the tier's evaluation
// order — stays in the CPU's caches, and what a decision reads per list is
// two words per 64 rules: which rules belong to the list and which of those
// are of a policy that ties with another policy of the list.
//
// A query ORs the bitsets of the port lists that apply (rules without ports,
// the protocol's segment of the port space, the names the destination pod
// gives the packet's port) and ANDs them with the list's bits; the set bits,
// lowest first, are the candidates in evaluation order, the order the scan
// and the per-list index try them in. The port entry an Accept names is the
// first of the rule's entries that matches, found by running the rule's own
// matchers on the deciding rule only (the per-list index keeps that index in
// its entries; here only the bit is kept).
//
// Numbering changes with every policy change, so the lists' bitsets are
// stamped with the generation of the tier index they were computed for and
// recomputed when the evaluator hands out a list (TieredPolicyEvaluator.stamp).
// Tiers with more than MAX_TIER_RULES rules in a direction keep the per-list
// index: the bitsets would grow with the tier and the union stop being cheap.

import { PodInfo } from "../../sdk/index";
import { PortIndex, portSegmentAt, portSlotOf } from "../../sdk/port-index";
import { PortMatcher, PROTO_ANY } from "../../sdk/ports";
import { Policy } from "./policy";
import { indexTierRules } from "./rule-index";

/** Rules of one direction above which a tier keeps per-list indexes (16 words of 64 bits). */
export const MAX_TIER_RULES = 1024;

/**
 * The tier's rules of one direction, indexed once. `data` is a PortIndex's
 * data whose owner words are indexTierRules' rule and peer words over the
 * whole tier (so rule-index.ts' peerIndex, reasonOf, verdictOf and ruleOf
 * read it as they read a list's index; its tie bits are all 0: ties depend
 * on the list). `bits` holds, `words` u64 each: the rules without a port
 * list, the rules with a matcher for another protocol, then each protocol
 * segment's rules, then each named port's.
 */
export class TierIndex {
  data: StaticArray<u32>;
  words: i32;
  bits: StaticArray<u64> = new StaticArray<u64>(0);
  /** Bit offset (in u64) of each protocol's first segment, -1: none. */
  segBase: StaticArray<i32> = new StaticArray<i32>(3);
  nameBase: i32 = 0;
  /** The query's union of sure candidates (not re-entered: decide is one at a time). */
  sure: StaticArray<u64> = new StaticArray<u64>(0);
  /** The rules by number: their ports, for the deciding rule's port entry. */
  ports: StaticArray<StaticArray<PortMatcher>>;
  /** Keeps what `data` points at alive. */
  private index: PortIndex;
  /** Generation: a list's bits computed for another one are not this index's. */
  gen: u32;

  constructor(index: PortIndex, gen: u32) {
    this.index = index;
    this.gen = gen;
    this.data = index.data;
    this.ports = index.ports;
    const n = index.ruleCount;
    const words = (n + 63) >> 6;
    this.words = words;
    this.sure = new StaticArray<u64>(words);
    const d = index.data;
    let segments = 0;
    for (let slot = 0; slot < 3; slot++) {
      const table = <i32>d[4 + slot];
      this.segBase[slot] = -1;
      if (table != 0) segments += <i32>d[table];
    }
    const names = <i32>d[8];
    this.bits = new StaticArray<u64>((2 + segments + names) * words);
    fill(this.bits, 0, words, d, <i32>d[0], <i32>d[1]);
    fill(this.bits, words, words, d, <i32>d[2], <i32>d[3]);
    let at = 2 * words;
    for (let slot = 0; slot < 3; slot++) {
      const table = <i32>d[4 + slot];
      if (table == 0) continue;
      this.segBase[slot] = at;
      const nb = <i32>d[table];
      const starts = table + 1 + nb;
      for (let s = 0; s < nb; s++) {
        fill(this.bits, at, words, d, <i32>d[starts + s], <i32>d[starts + s + 1]);
        at += words;
      }
    }
    this.nameBase = at;
    const nt = <i32>d[7];
    for (let i = 0; i < names; i++) {
      fill(this.bits, at, words, d, <i32>d[nt + i * 3 + 2], <i32>d[nt + i * 3 + 5]);
      at += words;
    }
  }

  /** The index over `active`'s rules of one direction; null when a per-list index (or the scan) should be used. */
  static build(active: StaticArray<Policy>, egress: bool, gen: u32): TierIndex | null {
    let total = 0;
    for (let i = 0; i < active.length; i++) total += egress ? active[i].egress.length : active[i].ingress.length;
    if (total > MAX_TIER_RULES) return null;
    const x = indexTierRules(active, new StaticArray<u8>(active.length), egress);
    if (x == null) return null;
    let flat = 0;
    for (let i = 0; i < active.length; i++) {
      const p = active[i];
      if (egress) p.egressFlat = flat; else p.ingressFlat = flat;
      flat += egress ? p.egress.length : p.ingress.length;
    }
    return new TierIndex(x!, gen);
  }

  /**
   * A list's bits for this index: `words` of membership, then `words` of
   * ties (the rules of list[i] where ties[i] is 1), written into `out` when
   * it is big enough (else a new array).
   */
  bitsFor(list: StaticArray<Policy>, ties: StaticArray<u8>, egress: bool, out: StaticArray<u64> | null): StaticArray<u64> {
    const words = this.words;
    const b = out != null && out.length == 2 * words ? out! : new StaticArray<u64>(2 * words);
    for (let i = 0; i < 2 * words; i++) b[i] = 0;
    for (let i = 0; i < list.length; i++) {
      const p = list[i];
      const first = egress ? p.egressFlat : p.ingressFlat;
      const count = egress ? p.egress.length : p.ingress.length;
      for (let f = first; f < first + count; f++) {
        b[f >> 6] |= (<u64>1) << <u64>(f & 63);
        if (ties[i] != 0) b[words + (f >> 6)] |= (<u64>1) << <u64>(f & 63);
      }
    }
    return b;
  }

  /**
   * Fills `sure` with the rules whose ports certainly match `protocol`/`port`
   * towards `dst` (no port list, the protocol's segment, the names `dst`
   * gives that port); the `odd` rules (bits at `words`) are candidates that
   * their own matchers must confirm.
   */
  begin(protocol: u8, port: u16, dst: PodInfo | null): void {
    const words = this.words;
    const bits = this.bits;
    const sure = this.sure;
    for (let w = 0; w < words; w++) unchecked(sure[w] = unchecked(bits[w]));
    const d = this.data;
    const slot = portSlotOf(protocol);
    if (slot >= 0) {
      const table = <i32>unchecked(d[4 + slot]);
      if (table != 0) {
        const at = unchecked(this.segBase[slot]) + portSegmentAt(d, table, port) * words;
        for (let w = 0; w < words; w++) unchecked(sure[w] |= unchecked(bits[at + w]));
      }
    }
    const names = <i32>unchecked(d[8]);
    if (names == 0 || dst == null) return;
    const nt = <i32>unchecked(d[7]);
    const cports = dst.ports;
    for (let c = 0, nc = cports.length; c < nc; c++) {
      const cp = unchecked(cports[c]);
      if (cp.port != port || cp.protocol != protocol) continue;
      for (let i = 0; i < names; i++) {
        const np = <u8>unchecked(d[nt + i * 3]);
        if (np != protocol && np != PROTO_ANY) continue;
        if (changetype<string>(<usize>unchecked(d[nt + i * 3 + 1])) != cp.name) continue;
        const at = this.nameBase + i * words;
        for (let w = 0; w < words; w++) unchecked(sure[w] |= unchecked(bits[at + w]));
      }
    }
  }

  /** Whether rule `flat` has no port list (its port entry is -1). */
  @inline portless(flat: i32): bool {
    return ((unchecked(this.bits[flat >> 6]) >> <u64>(flat & 63)) & 1) != 0;
  }

  /** The first of rule `flat`'s port entries that matches, -1 when none does. */
  firstPort(flat: i32, protocol: u8, port: u16, dst: PodInfo | null): i32 {
    const ports = unchecked(this.ports[flat]);
    for (let i = 0, n = ports.length; i < n; i++) if (unchecked(ports[i]).matches(protocol, port, dst)) return i;
    return -1;
  }
}

/** Sets the bit of every entry's rule in data[start .. end) into bits[at .. at + words). */
function fill(bits: StaticArray<u64>, at: i32, words: i32, d: StaticArray<u32>, start: i32, end: i32): void {
  for (let k = start; k < end; k++) {
    const flat = <i32>(d[k] >> 8);
    bits[at + (flat >> 6)] |= (<u64>1) << <u64>(flat & 63);
  }
}
