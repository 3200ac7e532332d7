// The packet path's half of flow recording: a preallocated ring of compact
// records in typed arrays, one slot per decided connection. Appending is a
// handful of stores into memory allocated once; everything that costs more
// (pod lookups, workload names, attribution text, aggregation, JSON) happens
// when the recorder drains the ring, off the packet path
// (host/flow-records/flow-recorder.ts). When the drain falls behind and the
// ring is full, a connection is not recorded and `dropped` counts it: the
// decision never waits for the recorder.
import type { Packet } from '../contract.js';

/** What ended a direction's walk, as the buffer stores it. */
export const Outcome = {
  /** Every stage answered Next or Pass: allowed by default. */
  Default: 0,
  Accept: 1,
  Deny: 2,
  /** Ingress after an egress deny: never walked. */
  Skipped: 3,
  /** The deciding verdict came from a stage's failure policy. */
  Failure: 4,
  /** The other end is a pod of another cluster: its own agent decides this direction. */
  Remote: 5,
} as const;

/** Audit stages whose would-be verdicts a record keeps (per direction); more are not recorded. */
export const MAX_AUDIT_STAGES = 4;

/** One direction's outcome read back from the buffer. */
export interface StoredDirection { outcome: number; stage: number; reason: number; rule: number }

export class FlowBuffer {
  readonly capacity: number;
  /** Connections not recorded because the ring was full. */
  dropped = 0;
  /** Records appended since the buffer was made. */
  appended = 0;
  private head = 0;
  private count = 0;
  readonly time: Float64Array;
  readonly family: Uint8Array;
  readonly protocol: Uint8Array;
  readonly srcPort: Uint16Array;
  readonly dstPort: Uint16Array;
  /** 16 bytes per slot as four little-endian words; an IPv4 address is the first word. */
  readonly srcAddr: Uint32Array;
  readonly dstAddr: Uint32Array;
  /**
   * The time claims stamp: Date.now() costs as much as the rest of a claim,
   * so it is read once per CLOCK_EVERY claims and at every drain
   * (`tick`), which bounds a record's time error by the drain period.
   */
  private clock = Date.now();
  private sinceTick = 0;
  readonly srcPod: Uint32Array;
  readonly dstPod: Uint32Array;
  readonly allowed: Uint8Array;
  readonly revision: Uint32Array;
  /** Per direction (0 egress, 1 ingress): outcome, stage index in the pipeline, reason and rule codes. */
  readonly outcome: Uint8Array;
  readonly stage: Int16Array;
  readonly reason: Uint32Array;
  readonly rule: Uint32Array;
  /** Per audit stage and direction: verdict + 1 (0: not decided), reason, rule. */
  readonly auditVerdict: Uint8Array;
  readonly auditReason: Uint32Array;
  readonly auditRule: Uint32Array;
  /**
   * The pipeline of each revision with slots pending, so the drain names the
   * stages and asks their modules for attribution. Kept by revision rather
   * than per slot: storing an object per claim costs a write barrier.
   */
  private readonly pipelines = new Map<number, unknown>();
  private lastPipeline: unknown;

  constructor(capacity = 16384) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`flow buffer capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.time = new Float64Array(capacity);
    this.family = new Uint8Array(capacity);
    this.protocol = new Uint8Array(capacity);
    this.srcPort = new Uint16Array(capacity);
    this.dstPort = new Uint16Array(capacity);
    this.srcAddr = new Uint32Array(capacity * 4);
    this.dstAddr = new Uint32Array(capacity * 4);
    this.srcPod = new Uint32Array(capacity);
    this.dstPod = new Uint32Array(capacity);
    this.allowed = new Uint8Array(capacity);
    this.revision = new Uint32Array(capacity);
    this.outcome = new Uint8Array(capacity * 2);
    this.stage = new Int16Array(capacity * 2);
    this.reason = new Uint32Array(capacity * 2);
    this.rule = new Uint32Array(capacity * 2);
    this.auditVerdict = new Uint8Array(capacity * 2 * MAX_AUDIT_STAGES);
    this.auditReason = new Uint32Array(capacity * 2 * MAX_AUDIT_STAGES);
    this.auditRule = new Uint32Array(capacity * 2 * MAX_AUDIT_STAGES);
  }

  /** Records waiting for the drain. */
  get pending(): number { return this.count; }

  /**
   * Claims the next slot and writes the connection's header into it; -1 when
   * the ring is full (the connection is counted in `dropped`). The caller then
   * writes each direction with `setDirection` (and audits with `setAudit`).
   */
  claim(packet: Packet, srcPod: number, dstPod: number, revision: number, pipeline: unknown): number {
    if (this.count === this.capacity) {
      this.dropped++;
      return -1;
    }
    let slot = this.head + this.count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.count++;
    this.appended++;
    if (++this.sinceTick >= CLOCK_EVERY) this.tick();
    this.time[slot] = this.clock;
    this.family[slot] = packet.family;
    this.protocol[slot] = packet.protocol;
    this.srcPort[slot] = packet.srcPort;
    this.dstPort[slot] = packet.dstPort;
    copyAddress(this.srcAddr, slot * 4, packet.src);
    copyAddress(this.dstAddr, slot * 4, packet.dst);
    this.srcPod[slot] = srcPod;
    this.dstPod[slot] = dstPod;
    this.revision[slot] = revision;
    if (pipeline !== this.lastPipeline) {
      this.lastPipeline = pipeline;
      this.pipelines.set(revision, pipeline);
    }
    return slot;
  }

  /** Clears the slot's audit verdicts: only pipelines with audit stages call it, before their setAudit calls. */
  clearAudits(slot: number): void {
    const a = slot * 2 * MAX_AUDIT_STAGES;
    this.auditVerdict.fill(0, a, a + 2 * MAX_AUDIT_STAGES);
  }

  /** Reads the clock for the claims that follow. */
  tick(): void {
    this.clock = Date.now();
    this.sinceTick = 0;
  }

  /** The slot's address as bytes (4 for IPv4, 16 for IPv6). */
  address(which: 'src' | 'dst', slot: number): Uint8Array {
    const words = which === 'src' ? this.srcAddr : this.dstAddr;
    const out = new Uint8Array(16);
    new Uint32Array(out.buffer).set(words.subarray(slot * 4, slot * 4 + 4));
    return this.family[slot] === 6 ? out : out.subarray(0, 4);
  }

  setDirection(slot: number, dir: number, outcome: number, stage: number, reason: number, rule: number): void {
    const i = slot * 2 + dir;
    this.outcome[i] = outcome;
    this.stage[i] = stage;
    this.reason[i] = reason;
    this.rule[i] = rule;
  }

  setAllowed(slot: number, allowed: boolean): void { this.allowed[slot] = allowed ? 1 : 0; }

  /** Audit stage number `k` (0-based among the audit stages) said `verdict` in direction `dir`. */
  setAudit(slot: number, dir: number, k: number, verdict: number, reason: number, rule: number): void {
    if (k >= MAX_AUDIT_STAGES) return;
    const i = (slot * 2 + dir) * MAX_AUDIT_STAGES + k;
    this.auditVerdict[i] = verdict + 1;
    this.auditReason[i] = reason;
    this.auditRule[i] = rule;
  }

  /** The pipeline that decided the slot's connection (by its revision), while the slot is pending. */
  pipelineOf(slot: number): unknown {
    return this.pipelines.get(this.revision[slot]);
  }

  direction(slot: number, dir: number): StoredDirection {
    const i = slot * 2 + dir;
    return { outcome: this.outcome[i], stage: this.stage[i], reason: this.reason[i], rule: this.rule[i] };
  }

  /** Hands every pending slot to `visit`, oldest first, and frees them. */
  drain(visit: (slot: number) => void): number {
    this.tick();
    const n = this.count;
    for (let k = 0; k < n; k++) {
      let slot = this.head + k;
      if (slot >= this.capacity) slot -= this.capacity;
      visit(slot);
    }
    this.head = (this.head + n) % this.capacity;
    this.count -= n;
    // Only the pipeline claims still use may be needed by the next drain.
    for (const revision of [...this.pipelines.keys()]) if (this.pipelines.get(revision) !== this.lastPipeline) this.pipelines.delete(revision);
    return n;
  }
}

/** Claims between two reads of the clock. */
const CLOCK_EVERY = 64;

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Four words at `w`, in the platform's order (read back the same way by `address`). */
function copyAddress(out: Uint32Array, w: number, a: Uint8Array): void {
  if (a.length === 4 && LITTLE_ENDIAN) {
    out[w] = a[0] | (a[1] << 8) | (a[2] << 16) | (a[3] << 24);
    out[w + 1] = 0;
    out[w + 2] = 0;
    out[w + 3] = 0;
    return;
  }
  const bytes = new Uint8Array(out.buffer, out.byteOffset + w * 4, 16);
  for (let i = 0; i < 16; i++) bytes[i] = i < a.length ? a[i] : 0;
}
