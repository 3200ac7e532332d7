// Drives one evaluator module directly through the ABI (sdk/ABI.md), without
// the host's sandbox or pipeline: for tests that look at a single module's
// verdicts, reasons, subjects and memory (allocation) behaviour.
import { readFileSync } from 'node:fs';
import type { KubeObject } from '../../host/contract.js';
import { parseIP } from '../../host/net/ip.js';
import { readWasmSummary } from '../../host/runtime/wasm-binary.js';

export const PROTOCOL_NUMBERS: Record<string, number> = { ICMP: 1, TCP: 6, UDP: 17, ICMPv6: 58, SCTP: 132 };
const VERDICTS = ['Next', 'Accept', 'Deny'] as const;
export type ModuleVerdict = (typeof VERDICTS)[number];

export interface HarnessPod {
  id: number;
  name: string;
  namespace: string;
  hostNetwork: boolean;
  labels: Record<string, string>;
  namespaceLabels: Record<string, string>;
  ports: { name: string; port: number; protocol: number }[];
  ips: string[];
}

export interface Probe {
  /** `ns/pod` or an address. */
  src: string;
  dst: string;
  protocol: 'TCP' | 'UDP' | 'SCTP' | 'ICMP' | 'ICMPv6';
  port: number;
  srcPort?: number;
}

export interface DirectionOutcome { verdict: ModuleVerdict; reason: number; text: string }
export interface ProbeOutcome { allowed: boolean; egress: DirectionOutcome; ingress: DirectionOutcome }

interface Exports {
  memory: WebAssembly.Memory;
  kwp_alloc(n: number): number;
  kwp_configure(p: number, n: number): number;
  kwp_pod_upsert(p: number, n: number): void;
  kwp_pod_delete(id: number): void;
  kwp_object(kind: number, op: number, p: number, n: number): number;
  kwp_batch(): number;
  kwp_batch_capacity(): number;
  kwp_decide(n: number): number;
  kwp_explain(reason: number): number;
  kwp_subjects(): number;
  kwp_result(): number;
  kwp_decision_cache_stats?: () => number;
}

function encodeStr(out: number[], s: string): void {
  const b = new TextEncoder().encode(s);
  out.push(b.length & 0xff, b.length >> 8, ...b);
}

function encodeLabels(out: number[], labels: Record<string, string>): void {
  const entries = Object.entries(labels);
  out.push(entries.length & 0xff, entries.length >> 8);
  for (const [k, v] of entries) { encodeStr(out, k); encodeStr(out, v); }
}

export function encodePodInfo(p: HarnessPod): Uint8Array {
  const out: number[] = [];
  out.push(p.id & 0xff, (p.id >>> 8) & 0xff, (p.id >>> 16) & 0xff, p.id >>> 24);
  out.push(p.hostNetwork ? 1 : 0, 0, 0, 0);
  encodeStr(out, p.name);
  encodeStr(out, p.namespace);
  encodeStr(out, 'node-1');
  encodeStr(out, '');
  encodeLabels(out, p.labels);
  encodeLabels(out, p.namespaceLabels);
  encodeLabels(out, {});
  out.push(p.ports.length & 0xff, p.ports.length >> 8);
  for (const port of p.ports) { encodeStr(out, port.name); out.push(port.port & 0xff, port.port >> 8, port.protocol, 0); }
  out.push(p.ips.length);
  for (const ip of p.ips) {
    const parsed = parseIP(ip);
    if (!parsed) throw new Error(`pod ${p.namespace}/${p.name}: bad IP ${ip}`);
    const bytes = new Uint8Array(16);
    bytes.set(parsed.bytes);
    out.push(parsed.family, ...bytes);
  }
  return Uint8Array.from(out);
}

/** PodInfo as the host derives it from Pod and Namespace objects (the parts the NetworkPolicy module reads). */
export function podsFromObjects(objects: KubeObject[]): HarnessPod[] {
  const nsLabels = new Map<string, Record<string, string>>();
  for (const o of objects) if (o.kind === 'Namespace') nsLabels.set(o.metadata.name, { ...(o.metadata.labels ?? {}) });
  const out: HarnessPod[] = [];
  for (const o of objects) {
    if (o.kind !== 'Pod') continue;
    const ns = o.metadata.namespace ?? 'default';
    const ports = (o.spec?.containers ?? []).flatMap((c: any) => (c.ports ?? []).map((p: any) => ({
      name: p.name ?? '', port: p.containerPort, protocol: PROTOCOL_NUMBERS[p.protocol ?? 'TCP'],
    })));
    const ips = (o.status?.podIPs ?? []).map((e: any) => e.ip as string);
    out.push({
      id: out.length + 1, name: o.metadata.name, namespace: ns, hostNetwork: o.spec?.hostNetwork === true,
      labels: { ...(o.metadata.labels ?? {}) }, namespaceLabels: nsLabels.get(ns) ?? { 'kubernetes.io/metadata.name': ns },
      ports, ips,
    });
  }
  return out;
}

export class ModuleHarness {
  readonly logs: { level: number; text: string }[] = [];
  private readonly e: Exports;
  private readonly pods = new Map<number, HarnessPod>();
  private readonly byKey = new Map<string, HarnessPod>();
  private readonly byIP = new Map<string, HarnessPod>();
  /** The host never names host-networked pods in records; set to test a module's defence against it. */
  sendHostNetworkIds = false;
  /** Counts rtrace allocation hooks when the module was built with rtrace. */
  allocations = 0;

  private constructor(instance: WebAssembly.Instance, logs: { level: number; text: string }[], private readonly importedMemory?: WebAssembly.Memory) {
    this.e = instance.exports as unknown as Exports;
    this.logs = logs;
  }

  static async load(wasmFile: string, config: unknown = {}): Promise<ModuleHarness> {
    return ModuleHarness.fromBytes(readFileSync(wasmFile), wasmFile, config);
  }

  /** `bytes` may be a fuel-instrumented build: its tank is then kept full (`kwp_fuel`). */
  static async fromBytes(bytes: Uint8Array<ArrayBuffer>, wasmFile: string, config: unknown = {}): Promise<ModuleHarness> {
    const module = await WebAssembly.compile(bytes);
    const logs: { level: number; text: string }[] = [];
    let harness: ModuleHarness | undefined;
    const rtrace: Record<string, WebAssembly.ImportValue> = {};
    for (const imp of WebAssembly.Module.imports(module)) {
      if (imp.module !== 'rtrace') continue;
      rtrace[imp.name] = imp.name === 'onalloc' || imp.name === 'onresize' || imp.name === 'onmove'
        ? () => { if (harness) harness.allocations++; }
        : imp.name === 'onstore' || imp.name === 'onload' ? (ptr: number) => ptr
        : imp.name === 'onvisit' ? () => 1 : () => {};
    }
    // The built-ins import their memory (the host sizes it to the state); the harness gives them all they may declare.
    const memoryImport = WebAssembly.Module.imports(module).some((i) => i.module === 'env' && i.kind === 'memory');
    const initial = memoryImport ? readWasmSummary(bytes).imports.find((i) => i.kind === 'memory')!.limits!.min : 0;
    const imported = memoryImport ? new WebAssembly.Memory({ initial, maximum: 65536 }) : undefined;
    const instance = await WebAssembly.instantiate(module, {
      env: { abort: () => { throw new Error(`${wasmFile}: the module aborted`); }, ...(imported ? { memory: imported } : {}) },
      kwp: {
        log: (level: number, ptr: number, len: number) => {
          logs.push({ level, text: new TextDecoder().decode(new Uint8Array(harness!.memory.buffer, ptr, len)) });
        },
      },
      rtrace,
    });
    harness = new ModuleHarness(instance, logs, imported);
    const fuel = instance.exports.kwp_fuel as WebAssembly.Global | undefined;
    if (fuel) fuel.value = 0x7fffffff;
    const status = harness.call((p, n) => harness!.e.kwp_configure(p, n), JSON.stringify(config));
    if (status !== 0) throw new Error(`${wasmFile} refused its config: ${harness.resultBufferText()}`);
    return harness;
  }

  get memory(): WebAssembly.Memory { return this.importedMemory ?? this.e.memory; }

  private call(fn: (p: number, n: number) => number | void, payload: string | Uint8Array): number {
    const bytes = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload;
    const p = this.e.kwp_alloc(bytes.length);
    new Uint8Array(this.memory.buffer, p, bytes.length).set(bytes);
    return (fn(p, bytes.length) as number | undefined) ?? 0;
  }

  private resultText(len: number): string {
    return new TextDecoder().decode(new Uint8Array(this.memory.buffer, this.e.kwp_result(), len));
  }

  /** The result buffer is an AssemblyScript ArrayBuffer: its byte length sits in the header word before it. */
  private resultBufferText(): string {
    const p = this.e.kwp_result();
    return this.resultText(new Uint32Array(this.memory.buffer, p - 4, 1)[0]);
  }

  upsertPod(pod: HarnessPod): void {
    this.deletePodIndexes(pod.id);
    this.pods.set(pod.id, pod);
    this.byKey.set(`${pod.namespace}/${pod.name}`, pod);
    if (!pod.hostNetwork) for (const ip of pod.ips) this.byIP.set(ip, pod);
    this.call((p, n) => this.e.kwp_pod_upsert(p, n), encodePodInfo(pod));
  }

  private deletePodIndexes(id: number): void {
    const old = this.pods.get(id);
    if (!old) return;
    this.byKey.delete(`${old.namespace}/${old.name}`);
    for (const ip of old.ips) if (this.byIP.get(ip) === old) this.byIP.delete(ip);
  }

  deletePod(id: number): void {
    this.deletePodIndexes(id);
    this.pods.delete(id);
    this.e.kwp_pod_delete(id);
  }

  upsert(obj: unknown, kind = 0): void {
    const status = this.call((p, n) => this.e.kwp_object(kind, 0, p, n), JSON.stringify(obj));
    if (status !== 0) throw new Error(`upsert refused (${status})`);
  }

  delete(obj: unknown, kind = 0): void {
    this.call((p, n) => this.e.kwp_object(kind, 1, p, n), JSON.stringify(obj));
  }

  /** RESET: a snapshot of `kind` follows. */
  reset(kind = 0): void { this.e.kwp_object(kind, 2, 0, 0); }
  /** SYNCED: the snapshot after the last reset is complete. */
  synced(kind = 0): void { this.e.kwp_object(kind, 3, 0, 0); }

  /** RESET, one UPSERT per object, SYNCED: what a new instance or a relist receives. */
  snapshot(objects: unknown[], kind = 0): void {
    this.reset(kind);
    for (const o of objects) this.upsert(o, kind);
    this.synced(kind);
  }

  /** Pods from the objects, then a snapshot of the NetworkPolicies among them. */
  loadCluster(objects: KubeObject[]): void {
    for (const p of podsFromObjects(objects)) this.upsertPod(p);
    this.snapshot(objects.filter((o) => o.kind === 'NetworkPolicy'));
  }

  podByKey(key: string): HarnessPod | undefined {
    return this.byKey.get(key);
  }

  private endpoint(text: string): { id: number; family: number; bytes: Uint8Array } {
    let ip = text;
    let pod = text.includes('/') ? this.podByKey(text) : undefined;
    if (text.includes('/') && !pod) throw new Error(`unknown pod ${text}`);
    if (pod) ip = pod.ips[0];
    else pod = this.byIP.get(ip);
    const parsed = parseIP(ip);
    if (!parsed) throw new Error(`bad address ${ip}`);
    const bytes = new Uint8Array(16);
    bytes.set(parsed.bytes);
    return { id: pod && (this.sendHostNetworkIds || !pod.hostNetwork) ? pod.id : 0, family: parsed.family, bytes };
  }

  /** Writes two records per probe (its egress, then its ingress decision) into the batch area; returns the record count. */
  writeProbes(probes: Probe[]): number {
    const cap = this.e.kwp_batch_capacity();
    if (probes.length * 2 > cap) throw new Error(`batch holds ${cap} records, ${probes.length * 2} needed`);
    const view = new DataView(this.memory.buffer, this.e.kwp_batch(), cap * 64);
    const bytes = new Uint8Array(this.memory.buffer, this.e.kwp_batch(), cap * 64);
    probes.forEach((probe, k) => {
      const src = this.endpoint(probe.src);
      const dst = this.endpoint(probe.dst);
      const hasPorts = probe.protocol === 'TCP' || probe.protocol === 'UDP' || probe.protocol === 'SCTP';
      for (let dir = 0; dir < 2; dir++) {
        const o = (k * 2 + dir) * 64;
        bytes.fill(0, o, o + 64);
        view.setUint8(o, dir);
        view.setUint8(o + 1, src.family);
        view.setUint8(o + 2, PROTOCOL_NUMBERS[probe.protocol]);
        view.setUint16(o + 4, hasPorts ? probe.srcPort ?? 40000 : 0, true);
        view.setUint16(o + 6, hasPorts ? probe.port : 0, true);
        view.setUint8(o + 8, hasPorts ? 0 : probe.protocol === 'ICMP' ? 8 : 128);
        view.setUint32(o + 12, src.id, true);
        view.setUint32(o + 16, dst.id, true);
        bytes.set(src.bytes, o + 20);
        bytes.set(dst.bytes, o + 36);
      }
    });
    return probes.length * 2;
  }

  /** Verdict and reason of record `index` after a decide. */
  verdictAt(index: number): ModuleVerdict {
    return VERDICTS[new Uint8Array(this.memory.buffer, this.e.kwp_batch() + index * 64 + 52, 1)[0]];
  }

  decideBatch(records: number): void { this.e.kwp_decide(records); }

  private outcome(index: number): DirectionOutcome {
    const view = new DataView(this.memory.buffer, this.e.kwp_batch() + index * 64, 64);
    const verdict = VERDICTS[view.getUint8(52)];
    const reason = view.getUint32(56, true);
    return { verdict, reason, text: reason === 0 ? '' : this.explain(reason) };
  }

  explain(reason: number): string {
    return this.resultText(this.e.kwp_explain(reason));
  }

  /** The module's verdicts for both directions; allowed unless either says Deny (the NetworkPolicy stage alone). */
  probe(p: Probe): ProbeOutcome {
    this.writeProbes([p]);
    this.e.kwp_decide(2);
    const egress = this.outcome(0);
    const ingress = this.outcome(1);
    return { allowed: egress.verdict !== 'Deny' && ingress.verdict !== 'Deny', egress, ingress };
  }

  /** Decision-cache hits and misses so far; undefined when the module has no cache or has it off. */
  cacheStats(): { hits: number; misses: number } | undefined {
    const ptr = this.e.kwp_decision_cache_stats?.() ?? 0;
    if (!ptr) return undefined;
    const v = new DataView(this.memory.buffer, ptr, 16);
    return { hits: Number(v.getBigUint64(0, true)), misses: Number(v.getBigUint64(8, true)) };
  }

  /** Pod ids the module asked to see traffic for; 'all' for every packet. */
  subjects(): number[] | 'all' {
    const n = this.e.kwp_subjects();
    if (n < 0) return 'all';
    return [...new Uint32Array(this.memory.buffer.slice(this.e.kwp_result(), this.e.kwp_result() + n * 4))];
  }
}
