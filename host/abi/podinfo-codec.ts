// Encodes PodInfo into the ABI's record layout (ABI.md, "The PodInfo record").
// The bytes are only ever copied into a module's memory right away, so they
// are written into one reused buffer instead of a new one per pod: keeping a
// record per pod for the agent's lifetime (10,000 pods: ~10 MiB of small
// buffers and their wrappers) bought nothing but skipping a re-encoding of
// microseconds. The last pod's record is remembered, so one change delivered
// to every stage in turn is encoded once.
import type { PodInfo } from '../contract.js';
import { parseIP, writeIPv4 } from '../net/ip.js';

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
  /** A u16 count and the pairs; the count is written after them, so no list of the keys is made. */
  labels(l: Record<string, string>): void {
    const at = this.len;
    this.u16(0);
    let n = 0;
    for (const k in l) { this.str(k); this.str(l[k]); n++; }
    this.view.setUint16(at, n, true);
  }
  /**
   * The address slots (ABI.md: a u8 count, then per address its family and
   * 16 bytes, zero-padded): an IPv4 address, nearly always, is written in
   * place; anything else goes through parseIP; what is not an address is
   * left out. At most 255.
   */
  addresses(ips: readonly string[]): void {
    const countAt = this.len;
    this.u8(0);
    let n = 0;
    for (let i = 0; i < ips.length && n < 255; i++) {
      this.ensure(17);
      const at = this.len;
      const buf = this.buf;
      buf.fill(0, at, at + 17);
      if (writeIPv4(ips[i], buf, at + 1)) {
        buf[at] = 4;
      } else {
        const ip = parseIP(ips[i]);
        if (!ip) continue;
        buf[at] = ip.family;
        buf.set(ip.bytes, at + 1);
      }
      this.len = at + 17;
      n++;
    }
    this.buf[countAt] = n;
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
  // An index loop: a for-of here made an iterator result per port (the code runs in bursts, a
  // feed's 10,000 pods, not always optimised by then), most of an encoding's garbage.
  const ports = pod.containerPorts;
  for (let i = 0; i < ports.length; i++) { const p = ports[i]; w.str(p.name); w.u16(p.port); w.u8(p.protocol); w.u8(0); }
  w.addresses(pod.ips);
  lastPod = pod;
  lastRecord = w.written();
  return lastRecord;
}
