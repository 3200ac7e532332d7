// The packet path's half of flow recording: a preallocated ring of compact
// records, one 32-byte slot per decided connection, in one typed array. A
// claim copies six words of the decision record the pipeline encoded anyway
// (family, protocol, ports, pod ids, addresses) and the walk writes one
// outcome word per direction, or (a pipeline whose stages' answers follow
// from the record and their state) nothing but the verdict, the walk being
// the drain's to work out: no strings, no objects, nothing allocated.
// What most connections share is kept beside the ring, not in each slot:
// the revision and the clock once per run of claims (`runs`), the reason
// and rule codes only where a walk copies them (`codes`). Everything that costs more (pod lookups, workload names,
// attribution text, aggregation, JSON) happens when the recorder drains the
// ring, off the packet path (host/flow-records/flow-recorder.ts). When the
// drain falls behind and the ring is full, a connection is not recorded and
// `dropped` counts it: the decision never waits for the recorder.
import { OFF_DST_PORT, OFF_DST_POD, OFF_FAMILY, OFF_ICMP_TYPE, OFF_PROTOCOL, OFF_SRC_ADDR, OFF_DST_ADDR, OFF_SRC_POD, OFF_SRC_PORT, RECORD_SIZE } from '../abi/record.js';

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
  /**
   * Egress only, until the drain: the pair walk denied ingress at the
   * slot's stage while egress was undecided, and left the rest of the
   * egress walk to the drain (Pipeline.finishEgress), which writes the
   * outcome in its place.
   */
  Pending: 6,
  /**
   * The walk was left to the drain (SlotFlag.WalkDeferred) and could not be
   * worked out as the packet was decided: a stage's instance failed between
   * the packet and the drain, or a stage answered the drain otherwise than
   * the packet (the verdict stays the packet's). Counted in `unattributed`.
   */
  Unknown: 7,
} as const;

/** Audit stages whose would-be verdicts a record keeps (per direction); more are not recorded. */
export const MAX_AUDIT_STAGES = 4;

// A slot is 8 words (32 bytes, two to a cache line: the memory a claim
// writes is most of its cost, and a 16,384-slot ring of 56-byte slots was
// 900 KiB written per ring, about a core's L2, which pushed the modules'
// decision caches out). Words 0..5 are copied from the decision record: 0
// family, protocol and flags (its byte 0, the record's direction, holds the
// slot's own flags), 1 both ports, 2 and 3 the pod ids, 4 and 5 the first
// word of each address; an IPv6 connection's full addresses go to `v6`.
/** Slot words per direction (egress, then ingress): outcome | (stage index + 1) << 8. */
export const W_DIRECTIONS = 6;
export const SLOT_WORDS = 8;
/** Words per slot in `codes`: per direction (egress, then ingress) the reason code and the rule code. */
export const CODE_WORDS = 4;
/** Byte 0 of a slot: its flags. */
export const SlotFlag = {
  Allowed: 1,
  Audited: 2,
  /**
   * An Accept's or a Deny's reason and rule codes are not in the slot yet:
   * the one-packet walk left them to the drain (Pipeline.attributeDeferred),
   * which asks the deciding stage once per key and interval, under the
   * state the packet was decided with (`settle`).
   */
  CodesDeferred: 4,
  /**
   * The whole walk is the drain's: the packet path wrote the record's words
   * and the verdict only (recordWalkDeferred, recordChunkWalkDeferred), and
   * the drain walks the slot's record through the stages once per key
   * (Pipeline.attributeDeferred), writing each direction's outcome and
   * codes; set with CodesDeferred. Until then the outcome words are stale.
   */
  WalkDeferred: 8,
} as const;
/** Words per slot in `v6`: both addresses. */
export const V6_WORDS = 8;
/** Words per slot in `audits`: per direction and audit stage, verdict + 1 (0: not decided), reason, rule. */
export const AUDIT_WORDS = 2 * MAX_AUDIT_STAGES * 3;
/** No run is open: the next claim opens one (no revision is NaN). */
const NO_RUN = NaN;

const SRC_POD_WORD = OFF_SRC_POD >> 2;
/** The record's word with the ICMP type and code. */
const ICMP_WORD = OFF_ICMP_TYPE >> 2;
const DST_POD_WORD = OFF_DST_POD >> 2;
const SRC_ADDR_WORD = OFF_SRC_ADDR >> 2;
const DST_ADDR_WORD = OFF_DST_ADDR >> 2;
const SLOT_BYTES = SLOT_WORDS * 4;
/** Words of an encoded decision record. */
const RECORD_WORDS = RECORD_SIZE >> 2;
/**
 * The literals recordWalkDeferred and recordChunkWalkDeferred use for the
 * record's layout, by name (flow-buffer.test.ts pins them to abi/record.ts):
 * the record's words copied into slot words 0..5, its stride in words, and
 * word 0's family and protocol bytes (little-endian shifts).
 */
export const LEAN_WORDS = { copied: [0, 1, 3, 4, 5, 9], stride: 16, familyShift: 8, protocolShift: 16 } as const;

/** The lean writers' test of a record's word 0 (literals, as LEAN_WORDS): IPv6 (family 6), ICMP or ICMPv6, whose slots need the side arrays. */
function leanNeedsSideArrays(head: number): boolean {
  const protocol = (head >>> 16) & 0xff;
  return (head & 0xff00) === 0x0600 || protocol === 1 || protocol === 58;
}
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** Where byte 0 (the flags) and the family byte sit in word 0, read as a host-order word. */
const FLAGS_SHIFT = LITTLE_ENDIAN ? 0 : 24;
const FLAGS_MASK = 0xff << FLAGS_SHIFT;
const FAMILY_SHIFT = LITTLE_ENDIAN ? OFF_FAMILY * 8 : 24 - OFF_FAMILY * 8;
const PROTOCOL_SHIFT = LITTLE_ENDIAN ? OFF_PROTOCOL * 8 : 24 - OFF_PROTOCOL * 8;
const ICMP = 1;
const ICMPV6 = 58;

/** One direction's outcome read back from the buffer. */
export interface StoredDirection { outcome: number; stage: number; reason: number; rule: number }

export class FlowBuffer {
  readonly capacity: number;
  /** Connections not recorded because the ring was full. */
  dropped = 0;
  private head = 0;
  private count = 0;
  /** SLOT_WORDS per slot (layout above); `bytes` is the same memory. */
  readonly words: Uint32Array;
  readonly bytes: Uint8Array;
  /** V6_WORDS per slot, written only for IPv6 connections. */
  readonly v6: Uint32Array;
  readonly audits: Uint32Array;
  /** One word per slot, written only for ICMP and ICMPv6 connections: the record's ICMP type and code word (the drain asks with it). */
  readonly icmp: Uint32Array;
  /**
   * CODE_WORDS per slot: each direction's reason and rule codes, written
   * only by the walks that copy them (and by the drain when it asks for the
   * codes left to it), read only where the direction's outcome names a
   * policy (`direction`, the drain's key): a slot whose codes are the
   * drain's, the recorded walks' usual case, writes nothing here.
   */
  readonly codes: Uint32Array;
  /**
   * Runs of consecutive claims that share a revision and a clock reading:
   * the sequence number of each run's first claim (claims are numbered
   * from the buffer's first, `drained` counts those gone), its revision
   * and its clock, in a ring of `capacity` (a run holds at least one
   * pending claim, so it never overflows). A claim opens a run only when
   * its revision differs from the open run's or the clock was read since
   * (`tick` closes the run): about one per 64 claims, instead of two words
   * in every slot.
   */
  private readonly runStart: Float64Array;
  private readonly runRevision: Uint32Array;
  private readonly runClock: Float64Array;
  private runHead = 0;
  private runCount = 0;
  /** The open run's revision (NO_RUN after a tick or when nothing is pending). */
  private openRevision = NO_RUN;
  /** Claims drained since the buffer was made: the sequence number of the slot at `head`. */
  private drained = 0;
  /** The run `runOf` found last (its ring index, and the claims it spans): the drain reads slots in order. */
  private foundRun = 0;
  private foundFrom = 0;
  private foundTo = -1;
  /**
   * The time claims stamp: Date.now() costs as much as the rest of a claim,
   * so it is read once per CLOCK_EVERY claims and at every drain
   * (`tick`), which bounds a record's time error by the drain period.
   */
  private clock = Date.now();
  private sinceTick = 0;
  /** The first slot the last `reserve` took. */
  private reserved = 0;
  /**
   * The pipeline of each revision with slots pending (`register`), so the
   * drain names the stages and asks their modules for attribution. Kept by
   * revision rather than per slot: storing an object per claim costs a write barrier.
   */
  private readonly pipelines = new Map<number, unknown>();
  private lastPipeline: unknown;
  /**
   * What `settle` runs: the recorder's drain, before a stage's module
   * changes (FlowRecorder). Set by whoever drains this buffer.
   */
  beforeChange: (() => void) | undefined;
  private settling = false;
  private draining = false;
  /** Deferred codes the drain could not ask for (the deciding stage's instance was gone or answered otherwise): recorded without a policy. */
  unattributed = 0;

  constructor(capacity = 16384) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`flow buffer capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.words = new Uint32Array(capacity * SLOT_WORDS);
    this.bytes = new Uint8Array(this.words.buffer);
    this.v6 = new Uint32Array(capacity * V6_WORDS);
    this.audits = new Uint32Array(capacity * AUDIT_WORDS);
    this.icmp = new Uint32Array(capacity);
    this.codes = new Uint32Array(capacity * CODE_WORDS);
    this.runStart = new Float64Array(capacity);
    this.runRevision = new Uint32Array(capacity);
    this.runClock = new Float64Array(capacity);
  }

  /** Records waiting for the drain. */
  get pending(): number { return this.count; }

  /**
   * Claims the next slot for the connection whose encoded decision record
   * starts at word `at` of `record` (the pipeline's own encoding: pod ids
   * and addresses in place); -1 when the ring is full (the connection is
   * counted in `dropped`). The caller then writes each direction with
   * `setDirection` (and audits with `setAudit`) and the verdict with `setAllowed`.
   */
  claim(record: Uint32Array, at: number, revision: number, audited: boolean): number {
    if (this.count === this.capacity) {
      this.dropped++;
      return -1;
    }
    let slot = this.head + this.count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.count++;
    if (++this.sinceTick >= CLOCK_EVERY) this.tick();
    if (revision !== this.openRevision) this.openRun(revision, this.count - 1);
    this.fill(slot, record, at, audited, audited ? SlotFlag.Audited : 0);
    return slot;
  }

  /**
   * Starts a run of claims with `revision` and the clock as it reads now,
   * its first claim `k` slots after `head` (sequence drained + k).
   */
  private openRun(revision: number, k: number): void {
    let r = this.runHead + this.runCount;
    if (r >= this.capacity) r -= this.capacity;
    this.runStart[r] = this.drained + k;
    this.runRevision[r] = revision;
    this.runClock[r] = this.clock;
    this.runCount++;
    this.openRevision = revision;
    // The run found last may have ended where this one starts.
    this.foundTo = -1;
  }

  /** Writes a claimed slot: the record's words and the slot's `flags` (SlotFlag). */
  private fill(slot: number, record: Uint32Array, at: number, audited: boolean, flags: number): void {
    const w = this.words;
    const o = slot * SLOT_WORDS;
    // Word 0 with the slot's flags in byte 0 (the record's direction), one store.
    const head = record[at];
    w[o] = (head & ~FLAGS_MASK) | (flags << FLAGS_SHIFT);
    w[o + 1] = record[at + 1];
    w[o + 2] = record[at + SRC_POD_WORD];
    w[o + 3] = record[at + DST_POD_WORD];
    w[o + 4] = record[at + SRC_ADDR_WORD];
    w[o + 5] = record[at + DST_ADDR_WORD];
    // The rare cases are out of line, so the fill stays small enough to inline.
    const protocol = (head >>> PROTOCOL_SHIFT) & 0xff;
    if (audited || ((head >>> FAMILY_SHIFT) & 0xff) === 6 || protocol === ICMP || protocol === ICMPV6) this.claimMore(record, at, slot, audited);
  }

  /**
   * `claim` for the `count` encoded records of a batch (`stride` words
   * apart, from word 0 of `records`): their slots go to `slots[0..count)`,
   * -1 for each the full ring could not take (counted in `dropped`). One
   * capacity check and one clock check for the batch instead of one each per
   * record.
   */
  claimBatch(records: Uint32Array, stride: number, count: number, revision: number, audited: boolean, slots: Int32Array): void {
    const capacity = this.capacity;
    const n = this.reserve(count, revision);
    if (n < count) slots.fill(-1, n, count);
    let slot = this.reserved;
    for (let i = 0, at = 0; i < n; i++, at += stride) {
      this.fill(slot, records, at, audited, audited ? SlotFlag.Audited : 0);
      slots[i] = slot;
      if (++slot === capacity) slot = 0;
    }
  }

  /**
   * The whole record of each of a walked chunk's `count` connections in one
   * pass, claimed after the walk (Pipeline.decideChunkRecordedInPlace): the
   * encoded record's words as `claimBatch` copies them (`stride` words
   * apart, from word 0 of `records`), the verdict (`allowed[allowedAt + i]`
   * 1 or 0) in the same store as word 0, and per direction `d` the outcome
   * word `outcomes[2 i + d]` as `setOutcome` writes it (0: Default). An
   * Accept's or a Deny's reason and rule codes are copied from where its
   * stage's module left them: words `codeAt[2 i + d]` and the next of
   * `answers[stage]`, the stage being the outcome word's. No audit stages
   * (their verdicts need the slot before the walk: claimBatch). Connections
   * the full ring cannot take are counted in `dropped`. With `deferred`
   * the codes are left to the drain (SlotFlag.CodesDeferred; `codeAt` and
   * `answers` are not read), as `recordOne` leaves them.
   */
  recordChunk(records: Uint32Array, stride: number, count: number, revision: number, allowed: Uint8Array, allowedAt: number, outcomes: Uint32Array, codeAt: Int32Array, answers: ReadonlyArray<Uint32Array | undefined>, deferred = false): void {
    const capacity = this.capacity;
    const n = this.reserve(count, revision);
    let slot = this.reserved;
    const w = this.words;
    const codes = this.codes;
    const flags = deferred ? SlotFlag.CodesDeferred : 0;
    for (let i = 0, at = 0; i < n; i++, at += stride) {
      // The verdict is known: it goes in with word 0 (no setAllowed).
      this.fill(slot, records, at, false, (allowed[allowedAt + i] === 1 ? SlotFlag.Allowed : 0) | flags);
      const p = slot * SLOT_WORDS + W_DIRECTIONS;
      w[p] = outcomes[2 * i];
      w[p + 1] = outcomes[2 * i + 1];
      if (!deferred) {
        for (let d = 0, k = 2 * i, c = slot * CODE_WORDS; d < 2; d++, k++, c += 2) {
          const word = outcomes[k];
          const outcome = word & 0xff;
          if (outcome !== Outcome.Accept && outcome !== Outcome.Deny) continue;
          const from = answers[(word >>> 8) - 1]!;
          const at = codeAt[k];
          codes[c] = from[at];
          codes[c + 1] = from[at + 1];
        }
      }
      if (++slot === capacity) slot = 0;
    }
  }

  /**
   * The record of one connection whose walk is left to the drain
   * (SlotFlag.WalkDeferred): the encoded record's words from word 0 of
   * `record` (RECORD_SIZE, the pipeline's own encoding) and the verdict,
   * nothing else; what decided each direction is worked out by the drain
   * (Pipeline.attributeDeferred). The packet path's whole cost of
   * recording, so it is written out by hand: the word offsets are literals
   * (LEAN_WORDS, pinned to the record's layout by flow-buffer.test.ts),
   * since V8 reads module constants derived at load time on every pass,
   * which measured as half of this function's cost. A full ring counts the
   * connection in `dropped`.
   */
  recordWalkDeferred(record: Uint32Array, revision: number, allowed: boolean): void {
    const count = this.count;
    if (count === this.capacity) {
      this.dropped++;
      return;
    }
    if (!LITTLE_ENDIAN) {
      this.recordOne(record, 0, revision, allowed, 0, 0, true);
      this.bytes[this.lastSlot() * SLOT_BYTES] |= SlotFlag.WalkDeferred;
      return;
    }
    let slot = this.head + count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.count = count + 1;
    if (++this.sinceTick >= CLOCK_EVERY) this.tick();
    if (revision !== this.openRevision) this.openRun(revision, count);
    const w = this.words;
    const o = slot << 3;
    const head = record[0];
    // Flags in byte 0: Allowed (1) | CodesDeferred (4) | WalkDeferred (8).
    w[o] = (head & 0xffffff00) | (allowed ? 13 : 12);
    w[o + 1] = record[1];
    w[o + 2] = record[3];
    w[o + 3] = record[4];
    w[o + 4] = record[5];
    w[o + 5] = record[9];
    // IPv6 (family byte 6) and ICMP (protocol 1, 58): the side arrays.
    if (leanNeedsSideArrays(head)) this.claimMore(record, 0, slot, false);
  }

  /**
   * recordWalkDeferred for the `count` records of an encoded chunk (16
   * words apart from word 0 of `records`), verdict `allowed[allowedAt + i]`
   * (1 or 0): one capacity, clock and run check for the chunk, and the
   * side arrays in a second pass only when a record needs them.
   */
  recordChunkWalkDeferred(records: Uint32Array, count: number, revision: number, allowed: Uint8Array, allowedAt: number): void {
    const n = this.reserve(count, revision);
    if (n === 0) return;
    const first = this.reserved;
    if (!LITTLE_ENDIAN) {
      for (let i = 0, slot = first; i < n; i++) {
        this.fill(slot, records, i * RECORD_WORDS, false, (allowed[allowedAt + i] === 1 ? SlotFlag.Allowed : 0) | SlotFlag.CodesDeferred | SlotFlag.WalkDeferred);
        if (++slot === this.capacity) slot = 0;
      }
      return;
    }
    const w = this.words;
    const end = this.capacity << 3;
    let o = first << 3;
    let rare = false;
    for (let i = 0, at = 0; i < n; i++, at += 16) {
      const head = records[at];
      w[o] = (head & 0xffffff00) | (allowed[allowedAt + i] | 12);
      w[o + 1] = records[at + 1];
      w[o + 2] = records[at + 3];
      w[o + 3] = records[at + 4];
      w[o + 4] = records[at + 5];
      w[o + 5] = records[at + 9];
      if (leanNeedsSideArrays(head)) rare = true;
      o += 8;
      if (o === end) o = 0;
    }
    if (!rare) return;
    for (let i = 0, at = 0, slot = first; i < n; i++, at += 16) {
      if (leanNeedsSideArrays(records[at])) this.claimMore(records, at, slot, false);
      if (++slot === this.capacity) slot = 0;
    }
  }

  /** The slot the last claim took. */
  private lastSlot(): number {
    let slot = this.head + this.count - 1;
    if (slot >= this.capacity) slot -= this.capacity;
    return slot;
  }

  /**
   * The whole record of one connection in one call, after its walk
   * (a walk that works the outcomes out): the encoded record's words from word
   * `at` of `record` as `claim` copies them, the verdict, and each
   * direction's outcome word (`egress`, `ingress`, as `setOutcome` writes
   * them). With `deferred` the codes of an Accept or a Deny are left to the
   * drain (SlotFlag.CodesDeferred): nothing but the words the walk knows is
   * written. A full ring counts the connection in `dropped`.
   */
  recordOne(record: Uint32Array, at: number, revision: number, allowed: boolean, egress: number, ingress: number, deferred: boolean): void {
    if (this.count === this.capacity) {
      this.dropped++;
      return;
    }
    let slot = this.head + this.count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.count++;
    if (++this.sinceTick >= CLOCK_EVERY) this.tick();
    if (revision !== this.openRevision) this.openRun(revision, this.count - 1);
    this.fill(slot, record, at, false, (allowed ? SlotFlag.Allowed : 0) | (deferred ? SlotFlag.CodesDeferred : 0));
    const p = slot * SLOT_WORDS + W_DIRECTIONS;
    this.words[p] = egress;
    this.words[p + 1] = ingress;
  }

  /**
   * Runs `beforeChange` (the recorder's drain) unless it is running already:
   * what a stage calls before its module's state or instance changes
   * (Stage.guardFlows), so every record whose codes were left to the drain
   * is attributed by the module state that decided it.
   */
  settle(): void {
    if (this.settling || this.draining || this.beforeChange === undefined) return;
    this.settling = true;
    try {
      this.beforeChange();
    } finally {
      this.settling = false;
    }
  }

  /**
   * Takes up to `count` slots for a batch's claims, the first at `reserved`
   * (the ring wraps after the last); returns how many (the rest are counted
   * in `dropped`), all of them with `revision`. One capacity, one clock and
   * one run check for the batch.
   */
  private reserve(count: number, revision: number): number {
    const free = this.capacity - this.count;
    const n = count <= free ? count : free;
    if (n < count) this.dropped += count - n;
    if (n === 0) return 0;
    this.sinceTick += n;
    if (this.sinceTick >= CLOCK_EVERY) this.tick();
    if (revision !== this.openRevision) this.openRun(revision, this.count);
    let slot = this.head + this.count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.reserved = slot;
    this.count += n;
    return n;
  }

  private claimMore(record: Uint32Array, at: number, slot: number, audited: boolean): void {
    if (this.family(slot) === 6) {
      const v = slot * V6_WORDS;
      for (let i = 0; i < 4; i++) {
        this.v6[v + i] = record[at + SRC_ADDR_WORD + i];
        this.v6[v + 4 + i] = record[at + DST_ADDR_WORD + i];
      }
    }
    if (audited) this.audits.fill(0, slot * AUDIT_WORDS, (slot + 1) * AUDIT_WORDS);
    if (this.isIcmp(slot)) this.icmp[slot] = record[at + ICMP_WORD];
  }

  /** Whether the slot's connection is ICMP or ICMPv6: then `icmp` holds its type and code. */
  isIcmp(slot: number): boolean {
    const protocol = this.protocol(slot);
    return protocol === ICMP || protocol === ICMPV6;
  }

  /**
   * Names the pipeline that decides with `revision`, so the drain can name
   * its stages and ask its modules for attribution: a pipeline registers
   * when recording is switched on for it (Pipeline.flowBuffer), not per claim.
   */
  register(revision: number, pipeline: unknown): void {
    this.pipelines.set(revision, pipeline);
    this.lastPipeline = pipeline;
  }

  /** Reads the clock for the claims that follow. */
  tick(): void {
    this.clock = Date.now();
    this.sinceTick = 0;
    // The claims that follow stamp the new reading: a run of their own.
    this.openRevision = NO_RUN;
  }

  /** Direction `dir` was accepted or denied (`outcome`) by `stage` (its position in the pipeline) with these codes. */
  setDirection(slot: number, dir: number, outcome: number, stage: number, reason: number, rule: number): void {
    this.words[slot * SLOT_WORDS + W_DIRECTIONS + dir] = outcome | ((stage + 1) << 8);
    const c = slot * CODE_WORDS + 2 * dir;
    this.codes[c] = reason;
    this.codes[c + 1] = rule;
  }

  /**
   * Direction `dir` ended with an `outcome` that names no policy (Default,
   * Skipped, Failure, Remote, Pending) at `stage` (-1 for none): its codes
   * are not written, one store instead of three, and every reader sees
   * them as 0 (`direction`, and the drain's key, slot-keys.ts).
   */
  setOutcome(slot: number, dir: number, outcome: number, stage: number): void {
    this.words[slot * SLOT_WORDS + W_DIRECTIONS + dir] = outcome | ((stage + 1) << 8);
  }

  /**
   * Direction `dir` was decided by `stage` (its position `stageIndex` in
   * the pipeline) with `outcome`: the stage writes the reason and rule codes
   * of its last decision in place, one call for both.
   */
  setDecided(slot: number, dir: number, outcome: number, stageIndex: number, stage: { lastCodesInto(out: Uint32Array, at: number): void }): void {
    this.words[slot * SLOT_WORDS + W_DIRECTIONS + dir] = outcome | ((stageIndex + 1) << 8);
    stage.lastCodesInto(this.codes, slot * CODE_WORDS + 2 * dir);
  }

  /** The connection's verdict (after both directions). */
  setAllowed(slot: number, allowed: boolean): void {
    const p = slot * SLOT_BYTES;
    this.bytes[p] = allowed ? this.bytes[p] | SlotFlag.Allowed : this.bytes[p] & ~SlotFlag.Allowed;
  }

  /** Audit stage number `k` (0-based among the audit stages) said `verdict` in direction `dir`. */
  setAudit(slot: number, dir: number, k: number, verdict: number, reason: number, rule: number): void {
    if (k >= MAX_AUDIT_STAGES) return;
    const i = slot * AUDIT_WORDS + (dir * MAX_AUDIT_STAGES + k) * 3;
    const a = this.audits;
    a[i] = verdict + 1;
    a[i + 1] = reason;
    a[i + 2] = rule;
  }

  // Reading a slot back (the drain's side).

  family(slot: number): number { return this.bytes[slot * SLOT_BYTES + OFF_FAMILY]; }
  protocol(slot: number): number { return this.bytes[slot * SLOT_BYTES + OFF_PROTOCOL]; }
  srcPort(slot: number): number { return this.u16(slot * SLOT_BYTES + OFF_SRC_PORT); }
  dstPort(slot: number): number { return this.u16(slot * SLOT_BYTES + OFF_DST_PORT); }
  srcPod(slot: number): number { return this.words[slot * SLOT_WORDS + 2]; }
  dstPod(slot: number): number { return this.words[slot * SLOT_WORDS + 3]; }
  /** The pipeline revision that decided the slot's connection (its run's), while the slot is pending. */
  revision(slot: number): number { return this.runRevision[this.runOf(slot)]; }
  allowed(slot: number): boolean { return (this.bytes[slot * SLOT_BYTES] & SlotFlag.Allowed) !== 0; }
  /** Whether the slot's Accept and Deny codes are still the drain's to ask for (SlotFlag.CodesDeferred). */
  codesDeferred(slot: number): boolean { return (this.bytes[slot * SLOT_BYTES] & SlotFlag.CodesDeferred) !== 0; }

  /** Whether the slot's whole walk is still the drain's (SlotFlag.WalkDeferred): its outcome words are stale until then. */
  walkDeferred(slot: number): boolean { return (this.bytes[slot * SLOT_BYTES] & SlotFlag.WalkDeferred) !== 0; }

  /**
   * The drain walked the slot (Pipeline.attributeDeferred): each direction's
   * outcome word (as setOutcome writes it); an Accept's or a Deny's codes
   * are in `codes` already. The slot reads as any other from now on.
   */
  walkFinished(slot: number, egress: number, ingress: number): void {
    const p = slot * SLOT_WORDS + W_DIRECTIONS;
    this.words[p] = egress;
    this.words[p + 1] = ingress;
    this.bytes[slot * SLOT_BYTES] &= ~(SlotFlag.WalkDeferred | SlotFlag.CodesDeferred);
  }

  /** The slot's walk could not be worked out (Outcome.Unknown): both directions counted in `unattributed`. */
  walkLost(slot: number): void {
    this.walkFinished(slot, Outcome.Unknown, Outcome.Unknown);
    this.unattributed += 2;
  }

  /**
   * A stage recording to this buffer lost its instance (Stage.failed): the
   * drain cannot ask it what it answered the connections claimed until now
   * (their sequence numbers are below `failedBefore`), so a walk it finishes
   * for one of them through a stage without an instance is Unknown, not
   * Failure; the connections claimed after were answered by the failure
   * policy, as the drain's walk finds.
   */
  noteFailure(): void {
    this.failedBefore = this.drained + this.count;
  }

  /** Sequence number below which a slot was claimed before the last noteFailure. */
  failedBefore = 0;

  /** Whether a pending slot was claimed before the last noteFailure. */
  claimedBeforeFailure(slot: number): boolean {
    return this.sequenceOf(slot) < this.failedBefore;
  }

  /** A pending slot's sequence number: claims are numbered from the buffer's first, `drained` counts those gone. */
  private sequenceOf(slot: number): number {
    let k = slot - this.head;
    if (k < 0) k += this.capacity;
    return this.drained + k;
  }

  /** The drain asked for the deferred codes: they are in the slot now (setDirection). */
  codesAsked(slot: number): void {
    this.bytes[slot * SLOT_BYTES] &= ~SlotFlag.CodesDeferred;
  }

  /** Where in `codes` direction `dir`'s reason code sits (its rule code follows). */
  codesWord(slot: number, dir: number): number {
    return slot * CODE_WORDS + 2 * dir;
  }

  /** Direction `dir`'s deferred codes could not be asked for: 0, counted in `unattributed` (the outcome and stage stay). */
  codesLost(slot: number, dir: number): void {
    const c = slot * CODE_WORDS + 2 * dir;
    this.codes[c] = 0;
    this.codes[c + 1] = 0;
    this.unattributed++;
  }
  audited(slot: number): boolean { return (this.bytes[slot * SLOT_BYTES] & SlotFlag.Audited) !== 0; }

  /** When the slot was claimed (ms since the epoch): the clock reading its run stamped, while the slot is pending. */
  timeOf(slot: number): number {
    return this.runClock[this.runOf(slot)];
  }

  /**
   * The ring index of the run a pending slot's claim belongs to: the last
   * run that started at or before the claim's sequence number. The drain
   * reads its slots in order, so the run found last usually answers.
   */
  private runOf(slot: number): number {
    const seq = this.sequenceOf(slot);
    if (seq >= this.foundFrom && seq < this.foundTo) return this.foundRun;
    // Binary search over the pending runs, oldest first: the last whose start is <= seq.
    const capacity = this.capacity;
    let lo = 0;
    let hi = this.runCount - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      let r = this.runHead + mid;
      if (r >= capacity) r -= capacity;
      if (this.runStart[r] <= seq) lo = mid;
      else hi = mid - 1;
    }
    let r = this.runHead + lo;
    if (r >= capacity) r -= capacity;
    let next = r + 1;
    if (next >= capacity) next -= capacity;
    this.foundRun = r;
    this.foundFrom = this.runStart[r];
    this.foundTo = lo + 1 < this.runCount ? this.runStart[next] : Infinity;
    return r;
  }

  /** The slot's address as bytes (4 for IPv4, 16 for IPv6). */
  address(which: 'src' | 'dst', slot: number): Uint8Array {
    if (this.family(slot) === 6) {
      const v = slot * V6_WORDS + (which === 'src' ? 0 : 4);
      return new Uint8Array(this.v6.buffer.slice(v * 4, v * 4 + 16));
    }
    const p = slot * SLOT_BYTES + (which === 'src' ? 16 : 20);
    return this.bytes.slice(p, p + 4);
  }

  /**
   * The slot's connection as a decision record (16 words, direction egress,
   * no results) in `out`: what the drain decides again with
   * (Pipeline.finishEgress, attributeDeferred).
   */
  recordOf(slot: number, out: Uint32Array): void {
    const w = this.words;
    const o = slot * SLOT_WORDS;
    out.fill(0);
    // Byte 0 holds the slot's flags, and in a record the direction (0, egress).
    out[0] = w[o] & ~0xff;
    out[1] = w[o + 1];
    out[SRC_POD_WORD] = w[o + 2];
    out[DST_POD_WORD] = w[o + 3];
    if (this.isIcmp(slot)) out[ICMP_WORD] = this.icmp[slot];
    if (this.family(slot) === 6) {
      const v = slot * V6_WORDS;
      for (let i = 0; i < 4; i++) {
        out[SRC_ADDR_WORD + i] = this.v6[v + i];
        out[DST_ADDR_WORD + i] = this.v6[v + 4 + i];
      }
    } else {
      out[SRC_ADDR_WORD] = w[o + 4];
      out[DST_ADDR_WORD] = w[o + 5];
    }
  }

  direction(slot: number, dir: number): StoredDirection {
    const word = this.words[slot * SLOT_WORDS + W_DIRECTIONS + dir];
    const outcome = word & 0xff;
    const coded = namesPolicy(outcome) && !this.codesDeferred(slot);
    const c = slot * CODE_WORDS + 2 * dir;
    return { outcome, stage: (word >>> 8) - 1, reason: coded ? this.codes[c] : 0, rule: coded ? this.codes[c + 1] : 0 };
  }

  /** Audit stage `k`'s would-be verdict in direction `dir`: verdict + 1 (0: not decided), reason, rule. */
  audit(slot: number, dir: number, k: number): { verdict: number; reason: number; rule: number } {
    const i = slot * AUDIT_WORDS + (dir * MAX_AUDIT_STAGES + k) * 3;
    const a = this.audits;
    return { verdict: a[i], reason: a[i + 1], rule: a[i + 2] };
  }

  /** The pipeline that decided the slot's connection (by its revision), while the slot is pending. */
  pipelineOf(slot: number): unknown {
    return this.pipelines.get(this.revision(slot));
  }

  /**
   * Hands the oldest pending slots to `visit`, at most `max`, and frees them;
   * returns how many it visited. The recorder drains in slices of `max` so a
   * burst never holds the event loop (and the packets behind it) for long.
   */
  drain(visit: (slot: number) => void, max = Infinity): number {
    // A drain inside a drain (a module call of the drain's that changes a stage) would visit its slots twice.
    if (this.draining) return 0;
    this.tick();
    const n = Math.min(this.count, max);
    this.draining = true;
    try {
      for (let k = 0; k < n; k++) {
        let slot = this.head + k;
        if (slot >= this.capacity) slot -= this.capacity;
        visit(slot);
      }
    } finally {
      this.draining = false;
    }
    this.head = (this.head + n) % this.capacity;
    this.count -= n;
    this.drained += n;
    this.dropRuns();
    // Only the pipeline claims still use may be needed by the next drain, once nothing older is pending.
    if (this.count === 0) for (const revision of [...this.pipelines.keys()]) if (this.pipelines.get(revision) !== this.lastPipeline) this.pipelines.delete(revision);
    return n;
  }

  /** Forgets the runs whose claims are all drained (every run once nothing is pending). */
  private dropRuns(): void {
    const capacity = this.capacity;
    if (this.count === 0) {
      this.runHead = 0;
      this.runCount = 0;
      this.openRevision = NO_RUN;
    } else {
      while (this.runCount > 1) {
        let next = this.runHead + 1;
        if (next >= capacity) next -= capacity;
        if (this.runStart[next] > this.drained) break;
        this.runHead = next;
        this.runCount--;
      }
    }
    this.foundTo = -1;
  }

  private u16(p: number): number {
    return this.bytes[p] | (this.bytes[p + 1] << 8);
  }
}

/** Whether a direction's `outcome` (its word's low byte) keeps its reason and rule codes: only an Accept's and a Deny's are written (setDirection). */
export function namesPolicy(outcome: number): boolean {
  return outcome === Outcome.Accept || outcome === Outcome.Deny;
}

/** Claims between two reads of the clock. */
const CLOCK_EVERY = 64;
