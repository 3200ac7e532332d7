// Candidate rules by destination port and protocol. A subject's policies hold
// an ordered list of rules (policy by policy, rule by rule: the order the API
// evaluates them in); scanning all of them for every first-time question costs
// time linear in the rules, and at cluster scale mostly cache misses, one
// object chase per rule. The index answers "which of these rules can match
// (protocol, port) towards this destination pod" with the rules in that same
// order, so an evaluator walks only those and still finds the first match the
// full scan would find, with the port entry the scan would name.
//
// Built once per distinct rule list off the packet path (when pods or policies
// change); a query allocates nothing.
//
// Layout. A rule is known by its position in the list ("flat index"). Every
// port entry of a rule lands in exactly one list, as (flat << 8 | its index in
// the rule): a numeric entry in its protocol's segments, a named one in the
// list of its (protocol, name). A query merges the lists that apply to the
// packet, so a rule comes out once per match with the lowest index among its
// entries that match — the entry the rule's own in-order scan would stop at.
// NO_LIST marks a rule without a port list; SCAN (indices past 253, other
// protocols) makes the query run the rule's own matchers.
// - `any`: rules without a port list (every protocol, every port).
// - per protocol (TCP, UDP, SCTP): segments of the port space, `bounds[s]` the
//   first port of segment s, its entries in `entries[start[s] .. start[s+1])`.
// - named ports: per (protocol, name), resolved through the destination pod's
//   container ports (the container port with the packet's port and protocol
//   supplies the name).
// - `odd`: rules with a numeric matcher for another protocol (never built by
//   the shipped parsers): always candidates, scanned.
// All of it lives in one array of words (`data`), so a query reads one
// contiguous stretch of memory rather than a dozen small objects:
//   [0,1] any entries (start, end)   [2,3] odd entries   [4..6] TCP/UDP/SCTP
//   segment tables (0: none)   [7,8] names table (start, count)   [9] where
//   the owner's own words start (`build(extraWords)`: an evaluator keeps its
//   flattened rules in the same array, one allocation and one stretch of
//   memory per list)   [10,11] the port lists and modes (PortIndex.ports,
//   .modes) for SCAN entries
//   segment table: count n, n first ports, n + 1 entry offsets
//   names table: per name (protocol, name pointer, entry offset), then one
//   more such triple whose offset ends the last name's entries.
// Name pointers are raw: the strings belong to the rules' PortMatchers, which
// the index's owner keeps alive (it holds the policies).

import { PodInfo, PROTO_TCP, PROTO_UDP, PROTO_SCTP } from "./podinfo";
import { PortMatcher, PROTO_ANY } from "./ports";

/** Port byte: the rule has no port list (matches every port and protocol). */
export const PORT_NO_LIST: u32 = 0xff;
/** Port byte: the first matching port entry must be found by running the rule's matchers. */
const PORT_SCAN: u32 = 0xfe;

/** How a rule's ports take part: by its list, every port (no list), or never (it matches nothing). */
export enum PortMode { List = 0, Every = 1, Nothing = 2 }

const SLOTS = 3;
const HEADER = 12;
const EMPTY_DATA = new StaticArray<u32>(HEADER);
/** Lists a query merges: the protocol's segment, `any`, `odd` and up to this many minus three named ports. */
const MAX_LISTS = 8;

/** A protocol's port-segment table among an index's (TCP, UDP, SCTP); -1 for a protocol without ports. */
// @ts-ignore: decorator
@inline export function portSlotOf(protocol: u8): i32 {
  if (protocol == PROTO_TCP) return 0;
  if (protocol == PROTO_UDP) return 1;
  if (protocol == PROTO_SCTP) return 2;
  return -1;
}

/**
 * The segment of the port-segment table at `table` in `data` (its count,
 * then each segment's first port, ascending) that `port` falls in: the last
 * starting at or below it.
 */
// @ts-ignore: decorator
@inline export function portSegmentAt(data: StaticArray<u32>, table: i32, port: u16): i32 {
  const p = <u32>port;
  let lo = 0, hi = <i32>unchecked(data[table]) - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (unchecked(data[table + 1 + mid]) <= p) lo = mid; else hi = mid - 1;
  }
  return lo;
}

class Interval {
  constructor(public lo: i32, public hi: i32, public flat: i32, public portByte: u32) {}
}

class NameEntries {
  entries: Array<u32> = new Array<u32>(0);
  constructor(public protocol: u8, public name: string) {}
}

export class PortIndexBuilder {
  private ports: Array<StaticArray<PortMatcher>> = new Array<StaticArray<PortMatcher>>(0);
  private modes: Array<u8> = new Array<u8>(0);
  private any: Array<u32> = new Array<u32>(0);
  private odd: Array<u32> = new Array<u32>(0);
  private intervals: Array<Array<Interval>> = [new Array<Interval>(0), new Array<Interval>(0), new Array<Interval>(0)];
  private names: Array<NameEntries> = new Array<NameEntries>(0);

  get count(): i32 { return this.ports.length; }

  /** The next rule of the list (flat index = the number of rules added before it). */
  add(ports: StaticArray<PortMatcher>, mode: PortMode): void {
    const flat = this.ports.length;
    this.ports.push(ports);
    this.modes.push(<u8>mode);
    if (mode == PortMode.Nothing) return;
    if (mode == PortMode.Every || ports.length == 0) {
      this.any.push((<u32>flat << 8) | PORT_NO_LIST);
      return;
    }
    let oddSeen = false;
    for (let i = 0; i < ports.length; i++) {
      const m = ports[i];
      const portByte = i < <i32>PORT_SCAN ? <u32>i : PORT_SCAN;
      if (m.name != null) {
        const list = this.nameList(m.protocol, m.name!);
        // A rule naming the same port twice is listed once, by its first entry.
        if (list.length == 0 || (list[list.length - 1] >> 8) != <u32>flat) list.push((<u32>flat << 8) | portByte);
        continue;
      }
      const slot = portSlotOf(m.protocol);
      if (slot < 0) { oddSeen = true; continue; }
      this.intervals[slot].push(new Interval(m.port, m.endPort, flat, portByte));
    }
    if (oddSeen) this.odd.push((<u32>flat << 8) | PORT_SCAN);
  }

  private nameList(protocol: u8, name: string): Array<u32> {
    for (let i = 0; i < this.names.length; i++) {
      const n = this.names[i];
      if (n.protocol == protocol && n.name == name) return n.entries;
    }
    const n = new NameEntries(protocol, name);
    this.names.push(n);
    return n.entries;
  }

  /** The index, with `extraWords` zeroed words for the owner at `data[9]`. */
  build(extraWords: i32 = 0): PortIndex {
    const out = new Array<u32>(0);
    for (let i = 0; i < HEADER; i++) out.push(0);
    out[0] = out.length;
    for (let i = 0; i < this.any.length; i++) out.push(this.any[i]);
    out[1] = out.length;
    out[2] = out.length;
    for (let i = 0; i < this.odd.length; i++) out.push(this.odd[i]);
    out[3] = out.length;
    for (let slot = 0; slot < SLOTS; slot++) this.buildSlot(out, slot);
    const n = this.names.length;
    const table = out.length;
    out[7] = table;
    out[8] = n;
    for (let i = 0; i < n * 3 + 3; i++) out.push(0);
    for (let i = 0; i < n; i++) {
      const e = this.names[i];
      out[table + i * 3] = e.protocol;
      out[table + i * 3 + 1] = <u32>changetype<usize>(e.name);
      out[table + i * 3 + 2] = out.length;
      for (let j = 0; j < e.entries.length; j++) out.push(e.entries[j]);
    }
    out[table + n * 3 + 2] = out.length;
    out[9] = out.length;
    for (let i = 0; i < extraWords; i++) out.push(0);
    const x = new PortIndex();
    x.ports = StaticArray.fromArray<StaticArray<PortMatcher>>(this.ports);
    x.modes = StaticArray.fromArray<u8>(this.modes);
    out[10] = <u32>changetype<usize>(x.ports);
    out[11] = <u32>changetype<usize>(x.modes);
    x.data = StaticArray.fromArray<u32>(out);
    return x;
  }

  /**
   * Cuts the port space where some interval starts or ends; each segment
   * lists the rules whose intervals cover it, in rule order, each rule once
   * with the lowest entry index among its covering intervals.
   */
  private buildSlot(out: Array<u32>, slot: i32): void {
    const list = this.intervals[slot];
    if (list.length == 0) return;
    const cuts = new Array<i32>(0);
    cuts.push(0);
    for (let i = 0; i < list.length; i++) {
      cuts.push(list[i].lo);
      if (list[i].hi < 65535) cuts.push(list[i].hi + 1);
    }
    cuts.sort((a: i32, b: i32): i32 => a - b);
    const bounds = new Array<i32>(0);
    for (let i = 0; i < cuts.length; i++) if (bounds.length == 0 || bounds[bounds.length - 1] != cuts[i]) bounds.push(cuts[i]);
    const nb = bounds.length;
    const table = out.length;
    out[4 + slot] = table;
    out.push(nb);
    for (let s = 0; s < nb; s++) out.push(bounds[s]);
    const starts = out.length;
    for (let s = 0; s <= nb; s++) out.push(0);
    for (let s = 0; s < nb; s++) {
      out[starts + s] = out.length;
      const lo = bounds[s];
      // Intervals were added in rule order, so covering ones come out sorted by rule.
      let lastFlat = -1;
      for (let i = 0; i < list.length; i++) {
        const iv = list[i];
        if (iv.lo > lo || iv.hi < lo) continue;
        if (iv.flat == lastFlat) {
          const k = out.length - 1;
          if (iv.portByte < (out[k] & 0xff)) out[k] = (out[k] & ~<u32>0xff) | iv.portByte;
          continue;
        }
        out.push((<u32>iv.flat << 8) | iv.portByte);
        lastFlat = iv.flat;
      }
    }
    out[starts + nb] = out.length;
  }
}

// The query's cursors (offsets into the index's data): one query at a time
// per module (decide is not re-entered), so they live here rather than in
// every index.
const curPos = new StaticArray<i32>(MAX_LISTS);
const curEnd = new StaticArray<i32>(MAX_LISTS);
let curCount: i32 = 0;
let curProtocol: u8 = 0;
let curPort: u16 = 0;
let curDst: PodInfo | null = null;
/** More named ports resolved than there are cursors: the query walks every rule instead. */
let curEveryRule: bool = false;
let curNextFlat: i32 = 0;
let curData: StaticArray<u32> = EMPTY_DATA;

/**
 * Owns one index: `data` is what queries read (and what an owner passes to
 * PortIndex.begin); the lists are referenced from it and kept alive here.
 */
export class PortIndex {
  data: StaticArray<u32> = EMPTY_DATA;
  /** Per rule its port list, for SCAN entries and the fallback walk. */
  ports: StaticArray<StaticArray<PortMatcher>> = new StaticArray<StaticArray<PortMatcher>>(0);
  modes: StaticArray<u8> = new StaticArray<u8>(0);

  /** The port entry of the rule `next` returned last: its index, or -1 for a rule without a port list. */
  static portAt: i32 = -1;

  get ruleCount(): i32 { return this.ports.length; }

  /** Where the owner's words start in `data`. */
  static extra(data: StaticArray<u32>): i32 { return <i32>unchecked(data[9]); }

  /**
   * Starts a query over an index's `data`: the rules that can match
   * `protocol`/`port` towards `dst` (null: not a known pod).
   */
  static begin(data: StaticArray<u32>, protocol: u8, port: u16, dst: PodInfo | null): void {
    curData = data;
    curProtocol = protocol;
    curPort = port;
    curDst = dst;
    curCount = 0;
    curEveryRule = false;
    curNextFlat = 0;
    push(unchecked(data[0]), unchecked(data[1]));
    push(unchecked(data[2]), unchecked(data[3]));
    const slot = portSlotOf(protocol);
    if (slot >= 0) {
      const table = <i32>unchecked(data[4 + slot]);
      if (table != 0) {
        const nb = <i32>unchecked(data[table]);
        const lo = portSegmentAt(data, table, port);
        const starts = table + 1 + nb;
        push(unchecked(data[starts + lo]), unchecked(data[starts + lo + 1]));
      }
    }
    const names = <i32>unchecked(data[8]);
    if (names == 0 || dst == null) return;
    const table = <i32>unchecked(data[7]);
    const cports = dst.ports;
    for (let c = 0, nc = cports.length; c < nc; c++) {
      const cp = unchecked(cports[c]);
      if (cp.port != port || cp.protocol != protocol) continue;
      for (let i = 0; i < names; i++) {
        const at = table + i * 3;
        const np = <u8>unchecked(data[at]);
        if (np != protocol && np != PROTO_ANY) continue;
        if (changetype<string>(<usize>unchecked(data[at + 1])) != cp.name) continue;
        if (curCount == MAX_LISTS) { curEveryRule = true; return; }
        push(unchecked(data[at + 2]), unchecked(data[at + 5]));
      }
    }
  }

  /** The flat index of the next candidate rule in rule order, or -1; sets PortIndex.portAt. */
  static next(): i32 {
    if (curEveryRule) return PortIndex.nextOfAll();
    const count = curCount;
    const data = curData;
    while (true) {
      // The rule that comes first among the lists' heads.
      let flat: u32 = 0xffffff;
      for (let i = 0; i < count; i++) {
        const pos = unchecked(curPos[i]);
        if (pos >= unchecked(curEnd[i])) continue;
        const f = unchecked(data[pos]) >> 8;
        if (f < flat) flat = f;
      }
      if (flat == 0xffffff) return -1;
      // Its lowest entry index over every list it heads (each list holds a
      // rule once); any SCAN means the rule's own matchers decide.
      let portByte: u32 = PORT_NO_LIST;
      let scan = false;
      for (let i = 0; i < count; i++) {
        const pos = unchecked(curPos[i]);
        if (pos >= unchecked(curEnd[i])) continue;
        const e = unchecked(data[pos]);
        if ((e >> 8) != flat) continue;
        unchecked(curPos[i] = pos + 1);
        const b = e & 0xff;
        if (b == PORT_SCAN) scan = true;
        else if (b < portByte) portByte = b;
      }
      if (!scan) {
        PortIndex.portAt = portByte == PORT_NO_LIST ? -1 : <i32>portByte;
        return <i32>flat;
      }
      const ports = changetype<StaticArray<StaticArray<PortMatcher>>>(<usize>unchecked(data[10]));
      const at = firstMatch(unchecked(ports[flat]), curProtocol, curPort, curDst);
      if (at >= 0) { PortIndex.portAt = at; return <i32>flat; }
    }
    return -1;
  }

  /** The fallback walk: every rule with a port that matches, as a scan would find it. */
  private static nextOfAll(): i32 {
    const all = changetype<StaticArray<StaticArray<PortMatcher>>>(<usize>unchecked(curData[10]));
    const modes = changetype<StaticArray<u8>>(<usize>unchecked(curData[11]));
    const n = all.length;
    while (curNextFlat < n) {
      const flat = curNextFlat++;
      const mode = unchecked(modes[flat]);
      if (mode == <u8>PortMode.Nothing) continue;
      const ports = unchecked(all[flat]);
      if (mode == <u8>PortMode.Every || ports.length == 0) {
        PortIndex.portAt = -1;
        return flat;
      }
      const at = firstMatch(ports, curProtocol, curPort, curDst);
      if (at >= 0) { PortIndex.portAt = at; return flat; }
    }
    return -1;
  }
}

function push(start: u32, end: u32): void {
  if (start >= end) return;
  unchecked(curPos[curCount] = <i32>start);
  unchecked(curEnd[curCount] = <i32>end);
  curCount++;
}

function firstMatch(ports: StaticArray<PortMatcher>, protocol: u8, port: u16, dst: PodInfo | null): i32 {
  for (let i = 0, n = ports.length; i < n; i++) if (unchecked(ports[i]).matches(protocol, port, dst)) return i;
  return -1;
}
