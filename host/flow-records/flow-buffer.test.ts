// FlowBuffer.recordChunk: a walked chunk's records written in one pass after
// the walk, with the deciding stages' codes copied from where their modules
// left them; the same slot a claim and the per-direction writes make.
import { describe, it, expect, vi } from 'vitest';
import { encodeRecord, OFF_SRC_PORT, OFF_DST_ADDR, OFF_DST_POD, OFF_FAMILY, OFF_PROTOCOL, OFF_SRC_ADDR, OFF_SRC_POD, RECORD_SIZE } from '../abi/record.js';
import type { Packet } from '../contract.js';
import { CODE_WORDS, FlowBuffer, LEAN_WORDS, Outcome, SLOT_WORDS, SlotFlag, V6_WORDS } from './flow-buffer.js';
import { SlotKeys } from './slot-keys.js';

const v4 = (a: number, b: number): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, a]), dst: new Uint8Array([10, 0, 1, b]),
  srcPort: 40000 + a, dstPort: 8000 + b, icmpType: 0, icmpCode: 0, serviceHairpin: false,
});
const v6: Packet = {
  family: 6, protocol: 17, src: Uint8Array.from({ length: 16 }, (_, i) => 0x20 + i), dst: Uint8Array.from({ length: 16 }, (_, i) => 0x40 + i),
  srcPort: 5353, dstPort: 53, icmpType: 0, icmpCode: 0, serviceHairpin: false,
};

/** Three encoded records (pods 1..3 to 11..13, the last IPv6). */
function chunk(): Uint32Array {
  const bytes = new Uint8Array(3 * RECORD_SIZE);
  [v4(1, 2), v4(3, 4), v6].forEach((p, i) => encodeRecord(bytes, i * RECORD_SIZE, p, i + 1, i + 11));
  return new Uint32Array(bytes.buffer);
}

describe('FlowBuffer.recordChunk', () => {
  it('writes each record as claim, setDirection, setOutcome and setAllowed do, its codes copied from the deciding stage\'s words', () => {
    const records = chunk();
    // Stage 0's module left codes at words 4/5 and 6/7 of its memory, stage 2's at 8/9.
    const stage0 = new Uint32Array(16);
    stage0.set([101, 102, 103, 104], 4);
    const stage2 = new Uint32Array(16);
    stage2.set([301, 302], 8);
    const answers = [stage0, undefined, stage2];
    const outcomes = Uint32Array.from([
      Outcome.Accept | (1 << 8), Outcome.Deny | (3 << 8), // record 0: egress accepted by stage 0, ingress denied by stage 2
      Outcome.Deny | (1 << 8), Outcome.Skipped, // record 1: egress denied by stage 0
      Outcome.Default, Outcome.Failure | (2 << 8), // record 2: egress by no stage, ingress stage 1's failure policy
    ]);
    const codeAt = Int32Array.from([4, 8, 6, 0, 0, 0]);
    const allowed = Uint8Array.from([9, 0, 0, 1]);
    const got = new FlowBuffer(8);
    got.recordChunk(records, RECORD_SIZE >> 2, 3, 7, allowed, 1, outcomes, codeAt, answers);

    const want = new FlowBuffer(8);
    for (let i = 0; i < 3; i++) want.claim(records, i * (RECORD_SIZE >> 2), 7, false);
    want.setDirection(0, 0, Outcome.Accept, 0, 101, 102);
    want.setDirection(0, 1, Outcome.Deny, 2, 301, 302);
    want.setDirection(1, 0, Outcome.Deny, 0, 103, 104);
    want.setOutcome(1, 1, Outcome.Skipped, -1);
    want.setOutcome(2, 0, Outcome.Default, -1);
    want.setOutcome(2, 1, Outcome.Failure, 1);
    want.setAllowed(0, false);
    want.setAllowed(1, false);
    want.setAllowed(2, true);

    expect(got.pending).toBe(3);
    const slot = (b: FlowBuffer, s: number) => Array.from(b.words.subarray(s * SLOT_WORDS, (s + 1) * SLOT_WORDS));
    for (let s = 0; s < 3; s++) {
      expect(slot(got, s), `slot ${s}`).toEqual(slot(want, s));
      expect(got.revision(s)).toBe(7);
      for (let dir = 0; dir < 2; dir++) expect(got.direction(s, dir)).toEqual(want.direction(s, dir));
    }
    expect(got.allowed(2)).toBe(true);
    expect(got.address('src', 2)).toEqual(v6.src);
    expect(got.address('dst', 2)).toEqual(v6.dst);
    expect(got.direction(0, 1)).toEqual({ outcome: Outcome.Deny, stage: 2, reason: 301, rule: 302 });
  });

  it('counts in dropped what a full ring cannot take, and takes the rest', () => {
    const records = chunk();
    const buffer = new FlowBuffer(2);
    const outcomes = new Uint32Array(6);
    buffer.recordChunk(records, RECORD_SIZE >> 2, 3, 1, new Uint8Array(3), 0, outcomes, new Int32Array(6), []);
    expect(buffer.pending).toBe(2);
    expect(buffer.dropped).toBe(1);
    expect([buffer.srcPod(0), buffer.srcPod(1)]).toEqual([1, 2]);
    // The ring wraps: once drained, the next chunk's records start where the last ended.
    expect(buffer.drain(() => undefined, 1)).toBe(1);
    buffer.recordChunk(records, RECORD_SIZE >> 2, 1, 1, new Uint8Array(1), 0, outcomes, new Int32Array(6), []);
    const seen: number[] = [];
    buffer.drain((slot) => seen.push(buffer.srcPod(slot)));
    expect(seen).toEqual([2, 1]);
    expect(buffer.dropped).toBe(1);
  });
});

describe('FlowBuffer.recordOne with codes left to the drain', () => {
  it('writes the record and outcome words, reads its Accept and Deny as codeless until the drain asks, and keys it without the code words', () => {
    const records = chunk();
    const buffer = new FlowBuffer(4);
    // Leftovers of an earlier use of the slots: a deferred slot must not read them as codes.
    buffer.words.fill(0xdead);
    buffer.codes.fill(0xdead);
    const accept = Outcome.Accept | (2 << 8);
    const deny = Outcome.Deny | (4 << 8);
    buffer.recordOne(records, 0, 9, false, accept, deny, true);
    buffer.recordOne(records, 0, 9, false, accept, deny, true);
    const claimed = new FlowBuffer(4);
    const slot = claimed.claim(records, 0, 9, false);
    claimed.setOutcome(slot, 0, Outcome.Accept, 1);
    claimed.setOutcome(slot, 1, Outcome.Deny, 3);
    for (const s of [0, 1]) {
      expect(buffer.codesDeferred(s)).toBe(true);
      expect(buffer.allowed(s)).toBe(false);
      expect([buffer.srcPod(s), buffer.dstPod(s), buffer.dstPort(s), buffer.revision(s)]).toEqual([claimed.srcPod(0), claimed.dstPod(0), claimed.dstPort(0), 9]);
      expect(buffer.direction(s, 0)).toEqual({ outcome: Outcome.Accept, stage: 1, reason: 0, rule: 0 });
      expect(buffer.direction(s, 1)).toEqual({ outcome: Outcome.Deny, stage: 3, reason: 0, rule: 0 });
    }
    // Slot 1's leftovers differ from slot 0's: the two are one key while their codes are the drain's.
    buffer.codes[CODE_WORDS + 3] = 7;
    const keys = new SlotKeys();
    expect(keys.entryOf(buffer, 0)).toBe(~0);
    expect(keys.entryOf(buffer, 1)).toBe(0);
    // The drain asked: the codes are the slot's from now on.
    buffer.codes.set([11, 12], buffer.codesWord(0, 1));
    buffer.codesAsked(0);
    expect(buffer.codesDeferred(0)).toBe(false);
    expect(buffer.direction(0, 1)).toEqual({ outcome: Outcome.Deny, stage: 3, reason: 11, rule: 12 });
  });
});

describe('FlowBuffer runs of claims', () => {
  it('gives every pending slot the revision and clock reading of its claim, across revision changes, clock reads, drains and the ring\'s wrap', () => {
    const records = chunk();
    const buffer = new FlowBuffer(8);
    let now = 1_000;
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => now);
    try {
      // What each claim should read back, in claim order.
      const want: Array<[number, number]> = [];
      let pending: number[] = [];
      let next = 0;
      const one = (revision: number) => {
        buffer.recordOne(records, 0, revision, true, 0, 0, false);
        want.push([revision, now]);
        pending.push(next);
        next = (next + 1) % 8;
      };
      const chunkOf = (revision: number, n: number) => {
        buffer.recordChunk(records, RECORD_SIZE >> 2, n, revision, new Uint8Array(n), 0, new Uint32Array(2 * n), new Int32Array(2 * n), [], true);
        for (let i = 0; i < n; i++) {
          want.push([revision, now]);
          pending.push(next);
          next = (next + 1) % 8;
        }
      };
      const check = () => {
        // Read back in an order other than the drain's too: the slot, not the last slot read, finds its run.
        for (const i of [...pending.keys()].reverse()) {
          const slot = pending[i];
          expect([buffer.revision(slot), buffer.timeOf(slot)], `slot ${slot}`).toEqual(want[want.length - pending.length + i]);
        }
      };
      buffer.tick();
      one(3);
      one(3);
      one(4);
      now = 2_000;
      buffer.tick();
      one(4);
      chunkOf(4, 2);
      chunkOf(5, 1);
      check();
      now = 3_000;
      const seen: Array<[number, number]> = [];
      expect(buffer.drain((slot) => seen.push([buffer.revision(slot), buffer.timeOf(slot)]), 5)).toBe(5);
      expect(seen).toEqual(want.slice(0, 5));
      pending = pending.slice(5);
      check();
      // The drain read the clock: the claims after it stamp the new reading, in a run of their own, and wrap the ring.
      chunkOf(5, 3);
      one(5);
      now = 4_000;
      buffer.tick();
      one(6);
      check();
      seen.length = 0;
      expect(buffer.drain((slot) => seen.push([buffer.revision(slot), buffer.timeOf(slot)]))).toBe(pending.length);
      expect(seen).toEqual(want.slice(want.length - pending.length));
      // Nothing pending: the next claim opens a run, with the revision it was claimed with.
      pending = [];
      one(6);
      check();
    } finally {
      clock.mockRestore();
    }
  });
});

describe('SlotKeys over runs of claims', () => {
  it('keys two connections alike in every word but the revision that decided them apart, and alike ones of one revision together', () => {
    const records = chunk();
    const buffer = new FlowBuffer(4);
    for (const revision of [3, 3, 4]) buffer.recordOne(records, 0, revision, true, Outcome.Accept | (1 << 8), Outcome.Default, true);
    const keys = new SlotKeys();
    expect(keys.entryOf(buffer, 0)).toBe(~0);
    expect(keys.entryOf(buffer, 1)).toBe(0);
    expect(keys.entryOf(buffer, 2)).toBe(~1);
  });
});

describe('FlowBuffer with the walk left to the drain', () => {
  it("uses the record's layout as abi/record.ts defines it in its hand-written writers", () => {
    expect(LEAN_WORDS.copied).toEqual([0, OFF_SRC_PORT >> 2, OFF_SRC_POD >> 2, OFF_DST_POD >> 2, OFF_SRC_ADDR >> 2, OFF_DST_ADDR >> 2]);
    expect(LEAN_WORDS.stride).toBe(RECORD_SIZE >> 2);
    expect([LEAN_WORDS.familyShift, LEAN_WORDS.protocolShift]).toEqual([OFF_FAMILY * 8, OFF_PROTOCOL * 8]);
    expect(SlotFlag.Allowed | SlotFlag.CodesDeferred | SlotFlag.WalkDeferred).toBe(13);
  });

  it('writes the words a claim writes, the verdict and the flags, one at a time and a chunk at a time, across the ring\'s end, IPv6 and ICMP included', () => {
    const icmp: Packet = { ...v4(5, 6), protocol: 1, srcPort: 0, dstPort: 0, icmpType: 8, icmpCode: 0 };
    const packets = [v4(1, 2), v6, icmp, v4(3, 4), v6, v4(7, 8), icmp];
    const bytes = new Uint8Array(packets.length * RECORD_SIZE);
    packets.forEach((p, i) => encodeRecord(bytes, i * RECORD_SIZE, p, i + 1, i + 21));
    const records = new Uint32Array(bytes.buffer);
    const allowed = Uint8Array.from(packets, (_, i) => (i % 3 === 0 ? 0 : 1));
    // What a claim writes (with the verdict and the flags), slot by slot, in a ring of 5 that wraps.
    const want = (buffer: FlowBuffer, slot: number, i: number): number[] => {
      const ref = new FlowBuffer(1);
      ref.claim(records, i * (RECORD_SIZE >> 2), 3, false);
      ref.setAllowed(0, allowed[i] === 1);
      ref.bytes[0] |= SlotFlag.CodesDeferred | SlotFlag.WalkDeferred;
      return [...ref.words.subarray(0, 6), ...(ref.family(0) === 6 ? ref.v6.subarray(0, V6_WORDS) : []), ...(ref.isIcmp(0) ? [ref.icmp[0]] : []), buffer.revision(slot)];
    };
    const got = (buffer: FlowBuffer, slot: number): number[] => [...buffer.words.subarray(slot * SLOT_WORDS, slot * SLOT_WORDS + 6),
      ...(buffer.family(slot) === 6 ? buffer.v6.subarray(slot * V6_WORDS, (slot + 1) * V6_WORDS) : []), ...(buffer.isIcmp(slot) ? [buffer.icmp[slot]] : []), buffer.revision(slot)];
    for (const batched of [false, true]) {
      const buffer = new FlowBuffer(5);
      buffer.words.fill(0xdead);
      // Three slots taken and drained first, so the next five wrap.
      for (let i = 0; i < 3; i++) buffer.recordWalkDeferred(records.subarray(0, RECORD_SIZE >> 2), 3, true);
      buffer.drain(() => undefined);
      const slots: number[] = [];
      if (batched) {
        buffer.recordChunkWalkDeferred(records, 5, 3, allowed, 0);
        // The rest does not fit: counted as dropped.
        buffer.recordChunkWalkDeferred(records.subarray(5 * (RECORD_SIZE >> 2)), 2, 3, allowed, 5);
      } else {
        for (let i = 0; i < packets.length; i++) buffer.recordWalkDeferred(records.subarray(i * (RECORD_SIZE >> 2), (i + 1) * (RECORD_SIZE >> 2)), 3, allowed[i] === 1);
      }
      expect(buffer.dropped).toBe(2);
      buffer.drain((slot) => { slots.push(slot); });
      expect(slots).toEqual([3, 4, 0, 1, 2]);
      slots.forEach((slot, i) => {
        expect(got(buffer, slot), `${batched ? 'chunk' : 'one'}: record ${i}`).toEqual(want(buffer, slot, i));
      });
    }
  });

  it('keys slots alike whatever their stale outcome words hold, and reads a slot as any other once its walk is finished', () => {
    const records = chunk();
    const buffer = new FlowBuffer(4);
    buffer.recordWalkDeferred(records, 5, true);
    buffer.recordWalkDeferred(records, 5, true);
    buffer.words[SLOT_WORDS + 6] = Outcome.Deny | (3 << 8);
    const keys = new SlotKeys();
    expect(keys.entryOf(buffer, 0)).toBe(~0);
    expect(keys.entryOf(buffer, 1)).toBe(0);
    expect([buffer.walkDeferred(0), buffer.codesDeferred(0)]).toEqual([true, true]);
    buffer.codes.set([11, 12], buffer.codesWord(0, 0));
    buffer.walkFinished(0, Outcome.Accept | (2 << 8), Outcome.Default);
    expect([buffer.walkDeferred(0), buffer.codesDeferred(0), buffer.allowed(0)]).toEqual([false, false, true]);
    expect(buffer.direction(0, 0)).toEqual({ outcome: Outcome.Accept, stage: 1, reason: 11, rule: 12 });
    expect(buffer.direction(0, 1)).toEqual({ outcome: Outcome.Default, stage: -1, reason: 0, rule: 0 });
    buffer.walkLost(1);
    expect(buffer.direction(1, 0).outcome).toBe(Outcome.Unknown);
    expect(buffer.unattributed).toBe(2);
  });
});
