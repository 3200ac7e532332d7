// PodInfo: what a module knows about a pod, decoded from the record layout in
// ABI.md. The host sends a record when anything in it changes, so a PodInfo
// object is immutable and caches keyed by its id stay valid until the next
// upsert or delete of that id (PodCache does the invalidation).

import { Labels, NO_LABELS } from "./labels";
import { SharedTable, internIn } from "./intern";

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
  ports: ContainerPort[] = [];
  addresses: PodAddress[] = [];

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
const namespaceLabels = new Map<string, Labels>();
const nodeLabels = new Map<string, Labels>();

// Pods of one workload carry equal label sets and equal port lists. Those are
// shared through content-keyed tables; a table that reaches its bound starts
// over (sharing is an optimisation: a pod decoded after the reset simply gets
// its own copy), so a cluster whose pods all differ costs no unbounded memory.
const labelSets = new SharedTable<Labels>(4096);
const portLists = new SharedTable<ContainerPort[]>(1024);

function sharedLabelSet(labels: Labels): Labels {
  if (labels.size == 0) return labels;
  let key = "";
  for (let i = 0, n = labels.size; i < n; i++) key += labels.keyAt(i) + "\u0000" + labels.valueAt(i) + "\u0000";
  return labelSets.share(key, labels);
}

function sharedPortList(ports: ContainerPort[]): ContainerPort[] {
  let key = "";
  for (let i = 0, n = ports.length; i < n; i++) {
    const p = unchecked(ports[i]);
    key += p.name + "\u0000" + p.port.toString() + "/" + p.protocol.toString() + "\u0000";
  }
  return portLists.share(key, ports);
}

function shared(table: Map<string, Labels>, owner: string, labels: Labels): Labels {
  if (table.has(owner)) {
    const known = table.get(owner);
    if (known.equals(labels)) return known;
  }
  table.set(owner, labels);
  return labels;
}

/** Decodes a PodInfo record; null when the record is truncated. */
export function decodePodInfo(ptr: usize, len: usize): PodInfo | null {
  const r = new RecordReader(ptr, ptr + len);
  const pod = new PodInfo();
  pod.id = r.u32();
  const flags = r.u8();
  r.u8(); r.u8(); r.u8();
  pod.hostNetwork = (flags & 1) != 0;
  pod.name = r.str();
  pod.namespace = internIn(names, r.str());
  pod.nodeName = internIn(names, r.str());
  pod.clusterId = internIn(names, r.str());
  pod.labels = sharedLabelSet(r.labels());
  pod.namespaceLabels = shared(namespaceLabels, pod.clusterId + "/" + pod.namespace, r.labels());
  pod.nodeLabels = shared(nodeLabels, pod.clusterId + "/" + pod.nodeName, r.labels());
  const nPorts = <i32>r.u16();
  const ports = new Array<ContainerPort>(0);
  for (let i = 0; i < nPorts && r.ok; i++) {
    const name = internIn(labelKeys, r.str());
    const port = r.u16();
    const proto = r.u8();
    r.u8();
    ports.push(new ContainerPort(name, port, proto));
  }
  pod.ports = sharedPortList(ports);
  const nIPs = <i32>r.u8();
  const addrs = new Array<PodAddress>(0);
  for (let i = 0; i < nIPs && r.ok; i++) {
    const family = r.u8();
    if (r.pos + 16 > r.end) { r.ok = false; break; }
    const bytes = new StaticArray<u8>(16);
    memory.copy(changetype<usize>(bytes), r.pos, 16);
    r.pos += 16;
    addrs.push(new PodAddress(family, bytes));
  }
  pod.addresses = addrs;
  if (!r.ok || pod.id == 0) return null;
  return pod;
}
