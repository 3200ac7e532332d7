// PodInfo: what a module knows about a pod, decoded from the record layout in
// ABI.md. The host sends a record when anything in it changes, so a PodInfo
// object is immutable and caches keyed by its id stay valid until the next
// upsert or delete of that id (PodCache does the invalidation).

import { Labels, NO_LABELS } from "./labels";
import { internIn } from "./intern";

export const PROTO_ICMP: u8 = 1;
export const PROTO_TCP: u8 = 6;
export const PROTO_UDP: u8 = 17;
export const PROTO_ICMPV6: u8 = 58;
export const PROTO_SCTP: u8 = 132;

export class ContainerPort {
  constructor(public name: string, public port: u16, public protocol: u8) {}
}

export class PodAddress {
  constructor(public family: u8, public bytes: StaticArray<u8>) {}
}

// What a PodInfo starts with and what a pod without container ports shares:
// port lists are shared between pods (sharedPortList), so none is written to.
const NO_PORTS: ContainerPort[] = [];

export class PodInfo {
  id: u32 = 0;
  hostNetwork: bool = false;
  name: string = "";
  namespace: string = "";
  nodeName: string = "";
  clusterId: string = "";
  labels: Labels = NO_LABELS;
  namespaceLabels: Labels = NO_LABELS;
  nodeLabels: Labels = NO_LABELS;
  ports: ContainerPort[] = NO_PORTS;
  /** How many addresses the host sent (ABI.md's u8 count, so at most 255). */
  addressCount: i32 = 0;
  // Nearly every pod has one address (two for dual-stack), and every stage
  // holds every pod: the first address sits in the PodInfo itself (its family
  // and its 16 bytes as two words), and only a pod with more than one has a
  // list, of the addresses after the first. A PodAddress object and its bytes
  // per pod were two allocations and 60 bytes of a module's heap each.
  private firstLow: u64 = 0;
  private firstHigh: u64 = 0;
  private moreAddresses: PodAddress[] | null = null;
  private firstFamily: u8 = 0;

  /** The family (4 or 6) of address `i` (0 ≤ i < addressCount). */
  addressFamily(i: i32): u8 {
    return i == 0 ? this.firstFamily : this.moreAddresses![i - 1].family;
  }

  /** Address `i` (0 ≤ i < addressCount) as a new PodAddress: allocates, the decision path does not use it. */
  address(i: i32): PodAddress {
    if (i != 0) return this.moreAddresses![i - 1];
    const bytes = new StaticArray<u8>(16);
    store<u64>(changetype<usize>(bytes), this.firstLow);
    store<u64>(changetype<usize>(bytes), this.firstHigh, 8);
    return new PodAddress(this.firstFamily, bytes);
  }

  /** Every address, in the order the host sent them, as a new list (allocates; see address). */
  get addresses(): PodAddress[] {
    const n = this.addressCount;
    const out = new Array<PodAddress>(n);
    for (let i = 0; i < n; i++) unchecked(out[i] = this.address(i));
    return out;
  }

  /** Takes `n` address slots (ABI.md: family, then 16 bytes) from module memory at `at`, the first inline (decodePodInfo's step). */
  setAddresses(at: usize, n: i32): void {
    this.addressCount = n;
    if (n == 0) return;
    this.firstFamily = load<u8>(at);
    this.firstLow = load<u64>(at + 1);
    this.firstHigh = load<u64>(at + 9);
    if (n == 1) return;
    const more = new Array<PodAddress>(n - 1);
    for (let i = 1; i < n; i++) {
      const slot = at + <usize>i * 17;
      const bytes = new StaticArray<u8>(16);
      memory.copy(changetype<usize>(bytes), slot + 1, 16);
      unchecked(more[i - 1] = new PodAddress(load<u8>(slot), bytes));
    }
    this.moreAddresses = more;
  }

  /** The container port named `name` with protocol `protocol`, or -1. */
  namedPort(name: string, protocol: u8): i32 {
    const ports = this.ports;
    for (let i = 0, n = ports.length; i < n; i++) {
      const p = unchecked(ports[i]);
      if (p.name == name && p.protocol == protocol) return <i32>p.port;
    }
    return -1;
  }

  /** The first container port named `name`, any protocol, or null. */
  namedPortAny(name: string): ContainerPort | null {
    const ports = this.ports;
    for (let i = 0, n = ports.length; i < n; i++) {
      if (unchecked(ports[i]).name == name) return unchecked(ports[i]);
    }
    return null;
  }
}

class RecordReader {
  constructor(public pos: usize, public end: usize) {}
  ok: bool = true;
  u8(): u8 {
    if (this.pos + 1 > this.end) { this.ok = false; return 0; }
    const v = load<u8>(this.pos); this.pos += 1; return v;
  }
  u16(): u16 {
    if (this.pos + 2 > this.end) { this.ok = false; return 0; }
    const v = load<u16>(this.pos); this.pos += 2; return v;
  }
  u32(): u32 {
    if (this.pos + 4 > this.end) { this.ok = false; return 0; }
    const v = load<u32>(this.pos); this.pos += 4; return v;
  }
  str(): string {
    const n = <usize>this.u16();
    if (!this.ok || this.pos + n > this.end) { this.ok = false; return ""; }
    const s = n == 0 ? "" : String.UTF8.decodeUnsafe(this.pos, n);
    this.pos += n;
    return s;
  }
  labels(): Labels {
    const n = <i32>this.u16();
    if (n == 0) return NO_LABELS;
    const p = new StaticArray<string>(n << 1);
    for (let i = 0; i < n && this.ok; i++) {
      p[i << 1] = internIn(labelKeys, this.str());
      p[(i << 1) + 1] = this.str();
    }
    return new Labels(p);
  }
  /** Moves past `n` strings without decoding them. */
  skipStrings(n: i32): void {
    for (let i = 0; i < n && this.ok; i++) {
      const len = <usize>this.u16();
      if (this.pos + len > this.end) { this.ok = false; return; }
      this.pos += len;
    }
  }
  /** A string shared through `table` by its bytes, decoded only the first time (internIn's result for it). */
  internedStr(table: RawShared<string>): string {
    const start = this.pos;
    this.skipStrings(1);
    if (!this.ok) return "";
    const found = table.find(start, this.pos - start);
    if (found != null) return found;
    this.pos = start;
    const s = internIn(names, this.str());
    table.add(start, this.pos - start, s);
    return s;
  }
  /** A label section shared through `table` by its bytes, decoded only the first time. */
  sharedLabels(table: RawShared<Labels>): Labels {
    const start = this.pos;
    const n = <i32>this.u16();
    if (n == 0) return NO_LABELS;
    this.skipStrings(n << 1);
    if (!this.ok) return NO_LABELS;
    const found = table.find(start, this.pos - start);
    if (found != null) return found;
    this.pos = start;
    const labels = this.labels();
    if (this.ok) table.add(start, this.pos - start, labels);
    return labels;
  }
}

/** FNV-1a over `len` bytes at `ptr`. */
function hashBytes(ptr: usize, len: usize): u32 {
  let h: u32 = 2166136261;
  for (let i: usize = 0; i < len; i++) h = (h ^ <u32>load<u8>(ptr + i)) * 16777619;
  return h;
}

class RawEntry<T> {
  constructor(public bytes: StaticArray<u8>, public value: T) {}
}

/**
 * Values decoded from a record, shared by the record's bytes: a section
 * whose bytes were seen before gets the value decoded then, without decoding
 * (and allocating) it again. Pods of one workload, namespace or node send the
 * same bytes, so most of a pod's record is looked up, not decoded: the
 * allocations it saved were most of a pod upsert's time (the allocator and
 * the collector). One entry per hash (a collision replaces it) and a bound
 * after which the table starts over, as SharedTable: sharing is an
 * optimisation, and equal bytes decode to equal values.
 */
class RawShared<T> {
  private readonly table: Map<u32, RawEntry<T>> = new Map<u32, RawEntry<T>>();
  constructor(private readonly bound: i32) {}

  find(ptr: usize, len: usize): T | null {
    const h = hashBytes(ptr, len);
    if (!this.table.has(h)) return null;
    const e = this.table.get(h);
    const bytes = e.bytes;
    if (<usize>bytes.length != len || memory.compare(changetype<usize>(bytes), ptr, len) != 0) return null;
    return e.value;
  }

  add(ptr: usize, len: usize, value: T): void {
    const table = this.table;
    if (table.size >= this.bound) table.clear();
    const bytes = new StaticArray<u8>(<i32>len);
    memory.copy(changetype<usize>(bytes), ptr, len);
    table.set(hashBytes(ptr, len), new RawEntry<T>(bytes, value));
  }
}

// Every stage holds every pod, so per-pod copies of what many pods share
// dominate a module's memory at scale (about 2 KiB per pod per stage before
// this). Pods of one namespace carry the same namespace labels and pods of
// one node the same node labels: they share one Labels object while it is
// equal to what the host sends. Label keys, namespace and node names are
// interned; these sets are bounded by the cluster's schema and topology, not
// by pod churn (label values and pod names, which churn, are not interned).
const labelKeys = new Map<string, string>();

/**
 * The module's copy of a label key or container port name. Policies' named
 * ports go through it too, so a name compare between a rule and a container
 * port is usually a pointer compare.
 */
export function internKey(s: string): string { return internIn(labelKeys, s); }
const names = new Map<string, string>();

// Pods of one workload carry equal label sets and equal port lists, pods of
// one namespace equal namespace labels and pods of one node equal node
// labels. Those are shared by the bytes the host sends for them (RawShared),
// so a pod whose sections were seen before costs no decoding; a table that
// reaches its bound starts over (a pod decoded after the reset simply gets
// its own copy), so a cluster whose pods all differ costs no unbounded memory.
const labelSets = new RawShared<Labels>(4096);
const scopeLabels = new RawShared<Labels>(16384);
const portLists = new RawShared<ContainerPort[]>(1024);
const rawNames = new RawShared<string>(16384);

function decodePorts(r: RecordReader): ContainerPort[] {
  const nPorts = <i32>r.u16();
  const ports = new Array<ContainerPort>(0);
  for (let i = 0; i < nPorts && r.ok; i++) {
    const name = internIn(labelKeys, r.str());
    const port = r.u16();
    const proto = r.u8();
    r.u8();
    ports.push(new ContainerPort(name, port, proto));
  }
  return ports;
}

/** The port list section (u16 count, then name, u16 port, u8 protocol, u8 pad each), shared by its bytes. */
function sharedPortList(r: RecordReader): ContainerPort[] {
  const start = r.pos;
  const n = <i32>r.u16();
  for (let i = 0; i < n && r.ok; i++) { r.skipStrings(1); r.u32(); }
  if (!r.ok) return [];
  const found = portLists.find(start, r.pos - start);
  if (found != null) return found;
  r.pos = start;
  const ports = decodePorts(r);
  if (r.ok) portLists.add(start, r.pos - start, ports);
  return ports;
}

// One reader for every record: decoding does not re-enter itself, and a reader
// per record was an allocation per pod upsert.
const reader = new RecordReader(0, 0);

/** Decodes a PodInfo record; null when the record is truncated. */
export function decodePodInfo(ptr: usize, len: usize): PodInfo | null {
  const r = reader;
  r.pos = ptr;
  r.end = ptr + len;
  r.ok = true;
  const pod = new PodInfo();
  pod.id = r.u32();
  const flags = r.u8();
  r.u8(); r.u8(); r.u8();
  pod.hostNetwork = (flags & 1) != 0;
  pod.name = r.str();
  pod.namespace = r.internedStr(rawNames);
  pod.nodeName = r.internedStr(rawNames);
  pod.clusterId = r.internedStr(rawNames);
  pod.labels = r.sharedLabels(labelSets);
  pod.namespaceLabels = r.sharedLabels(scopeLabels);
  pod.nodeLabels = r.sharedLabels(scopeLabels);
  pod.ports = sharedPortList(r);
  const nIPs = <i32>r.u8();
  if (!r.ok || r.pos + <usize>nIPs * 17 > r.end || pod.id == 0) return null;
  pod.setAddresses(r.pos, nIPs);
  r.pos += <usize>nIPs * 17;
  return pod;
}
