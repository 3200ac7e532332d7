// Encodes PodInfo into the ABI's record layout (ABI.md, "The PodInfo record").
// The bytes are only ever copied into a module's memory right away, so they
// are written into one reused buffer instead of a new one per pod: keeping a
// record per pod for the agent's lifetime (10,000 pods: ~10 MiB of small
// buffers and their wrappers) bought nothing but skipping a re-encoding of
// microseconds. The last pod's record is remembered, so one change delivered
// to every stage in turn is encoded once.
import type { PodInfo } from '../contract.js';
import { parseIP } from '../net/ip.js';

const encoder = new TextEncoder();

class RecordWriter {
  private buf = new Uint8Array(512);
  private view = new DataView(this.buf.buffer);
  len = 0;
  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void { this.ensure(1); this.buf[this.len++] = v; }
  u16(v: number): void { this.ensure(2); this.view.setUint16(this.len, v, true); this.len += 2; }
  u32(v: number): void { this.ensure(4); this.view.setUint32(this.len, v, true); this.len += 4; }
  bytes(b: Uint8Array): void { this.ensure(b.length); this.buf.set(b, this.len); this.len += b.length; }
  /**
   * A u16 length and the UTF-8 bytes, written in place: pods are encoded
   * again for every stage that is fed, and an encode() per string (a fresh
   * buffer each) made that ~16 µs a pod. Names and labels are ASCII nearly
   * always, so those bytes are copied directly.
   */
  str(s: string): void {
    const n = s.length;
    this.ensure(2 + n * 3);
    const start = this.len + 2;
    const buf = this.buf;
    let pos = start;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[pos++] = c;
    }
    if (i < n) pos += encoder.encodeInto(s.slice(i), buf.subarray(pos)).written;
    const length = pos - start;
    if (length > 0xffff) throw new RangeError(`string too long for a PodInfo record: ${s.slice(0, 40)}...`);
    this.view.setUint16(this.len, length, true);
    this.len = pos;
  }
  labels(l: Record<string, string>): void {
    const keys = Object.keys(l);
    this.u16(keys.length);
    for (const k of keys) { this.str(k); this.str(l[k]); }
  }
  /** A view of the bytes written since `reset`; valid until the next write. */
  written(): Uint8Array { return this.buf.subarray(0, this.len); }
  reset(): void { this.len = 0; }
}

const writer = new RecordWriter();
let lastPod: PodInfo | undefined;
let lastRecord: Uint8Array | undefined;

/**
 * The record of `pod`, as a view into a buffer the next call overwrites: copy
 * it (into a module's memory, say) before encoding another pod.
 */
export function encodePodInfo(pod: PodInfo): Uint8Array {
  if (pod === lastPod) return lastRecord!;
  lastPod = undefined;
  const w = writer;
  w.reset();
  w.u32(pod.id);
  w.u8(pod.hostNetwork ? 1 : 0);
  w.u8(0); w.u8(0); w.u8(0);
  w.str(pod.name);
  w.str(pod.namespace);
  w.str(pod.nodeName);
  w.str(pod.clusterId);
  w.labels(pod.podLabels);
  w.labels(pod.namespaceLabels);
  w.labels(pod.nodeLabels);
  w.u16(pod.containerPorts.length);
  for (const p of pod.containerPorts) { w.str(p.name); w.u16(p.port); w.u8(p.protocol); w.u8(0); }
  const ips = pod.ips.map((ip) => parseIP(ip)).filter((x): x is NonNullable<typeof x> => x !== undefined).slice(0, 255);
  w.u8(ips.length);
  for (const ip of ips) {
    w.u8(ip.family);
    const padded = new Uint8Array(16);
    padded.set(ip.bytes);
    w.bytes(padded);
  }
  lastPod = pod;
  lastRecord = w.written();
  return lastRecord;
}
