// The sandbox around ABI 1.4's both-directions call (kwp_decide_pair,
// kwp_pair_results): a hostile module's pair export gets no more fuel than
// two kwp_decide calls would, cannot point the host outside its memory, and
// cannot hand back a verdict the ABI does not define; its failures take the
// stage's failure policy like every other decision.
import { describe, it, expect, vi } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import type { SandboxLimits } from './limits.js';
import { Stage } from '../pipeline/stage.js';
import { ClusterState } from '../state/cluster-state.js';
import { Verdict } from '../abi/verdict.js';
import { DIRECTION_BOTH, OFF_DIRECTION, OFF_SRC_PORT, RECORD_SIZE } from '../abi/record.js';
import { sandboxModule, INFINITE_LOOP } from '../../test/fixtures/sandbox-modules.js';

const ABI_1_4 = 0x00010004;
// sandboxModule's batch area is at 4096 with room for one record; the pair area goes at 8192.
const BATCH = 4096;
const PAIR_AREA = 8192;

/** A 1.4 module whose kwp_pair_results returns `area` and whose kwp_decide_pair runs `body` (WAT, ending in an i32). */
function pairModule(body: string, area = PAIR_AREA, abiVersion = ABI_1_4): Uint8Array {
  return sandboxModule({
    abiVersion,
    fields: [
      `(func (export "kwp_pair_results") (result i32) (i32.const ${area}))`,
      `(func (export "kwp_decide_pair") (param $count i32) (result i32) (local $i i32) (local $n i32) ${body})`,
    ],
  });
}

/** Loops as many times as the record's source port says: fuel in proportion to a number the test picks. */
const LOOP_BY_SOURCE_PORT = `
  (local.set $n (i32.load16_u (i32.const ${BATCH + OFF_SRC_PORT})))
  (block $done (loop $again
    (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (br $again)))
  (i32.const 0)`;

/** Writes `egress` into the record's verdict byte and `ingress` into the pair area's. */
const answer = (egress: number, ingress: number) =>
  `(i32.store8 (i32.const ${BATCH + 52}) (i32.const ${egress})) (i32.store8 (i32.const ${PAIR_AREA}) (i32.const ${ingress})) (i32.const 0)`;

const load = (bytes: Uint8Array, limits: Partial<SandboxLimits> = {}) => compileEvaluator(bytes, { source: 'hostile.wasm', limits });

function record(direction: number, srcPort = 0): Uint8Array {
  const r = new Uint8Array(RECORD_SIZE);
  r[OFF_DIRECTION] = direction;
  r[OFF_SRC_PORT] = srcPort & 0xff;
  r[OFF_SRC_PORT + 1] = srcPort >> 8;
  r[1] = 4;
  return r;
}

/** The largest loop count one kwp_decide_pair call of `direction` survives, found by bisection (`one`: through decidePairOne). */
function survivableLoops(limits: Partial<SandboxLimits>, direction: number, one = false): number {
  const compiled = load(pairModule(LOOP_BY_SOURCE_PORT), limits);
  let ok = 0;
  let bad = 65535;
  while (bad - ok > 1) {
    const mid = (ok + bad) >> 1;
    const inst = new EvaluatorInstance(compiled);
    try {
      const rec = record(direction, mid);
      if (one) inst.decidePairOne(new Uint32Array(rec.buffer));
      else inst.decidePairsInto(rec, 0, 1, new Uint8Array(1), new Uint8Array(1));
      ok = mid;
    } catch (err) {
      expect((err as { code?: string }).code).toBe('KWP_ERR_FUEL_EXHAUSTED');
      bad = mid;
    }
  }
  return ok;
}

describe("a module's both-directions call is sandboxed like kwp_decide", () => {
  it('is used only from a module that declares ABI 1.4 and names a pair area', () => {
    expect(new EvaluatorInstance(load(pairModule(answer(1, 1)))).decidesPairs).toBe(true);
    expect(new EvaluatorInstance(load(pairModule(answer(1, 1), 0))).decidesPairs).toBe(false);
    expect(new EvaluatorInstance(load(pairModule(answer(1, 1), PAIR_AREA, 0x00010003))).decidesPairs).toBe(false);
    expect(new EvaluatorInstance(load(sandboxModule({ abiVersion: ABI_1_4 }))).decidesPairs).toBe(false);
  });

  it('refuses a pair area that does not lie inside the module memory, naming the export and the sizes', () => {
    // One page of memory (65,536 bytes); an entry is 16 bytes.
    for (const area of [65536 - 8, 65536, -16]) {
      expect(() => new EvaluatorInstance(load(pairModule(answer(1, 1), area)))).toThrow(/kwp_pair_results returned \d+, but its 1 entries of 16 bytes \(16 bytes\) must lie inside the module's memory \(65536 bytes\)/);
    }
    expect(new EvaluatorInstance(load(pairModule(answer(1, 1), 65536 - 16))).decidesPairs).toBe(true);
  });

  it('gets fuelPerDecision for each direction a record asks for: twice for both, once for one, never more', () => {
    const limits = { fuelPerDecision: 2000 };
    const one = survivableLoops(limits, 0);
    const both = survivableLoops(limits, DIRECTION_BOTH);
    expect(one).toBeGreaterThan(100);
    expect(survivableLoops(limits, 1)).toBe(one);
    // Twice the tank, less the call's fixed cost counted once instead of twice: within a few loops of 2x.
    expect(Math.abs(both - (2 * one + 1))).toBeLessThanOrEqual(4);
    // And the tank follows the limit, so a module cannot buy itself more.
    expect(survivableLoops({ fuelPerDecision: 4000 }, 0)).toBeGreaterThan(one * 2 - 4);
  });

  it('a pair call that never ends runs out of fuel, breaks the instance, and both directions of every record get the failure policy', () => {
    const compiled = load(pairModule(INFINITE_LOOP), { fuelPerDecision: 5000 });
    const stage = new Stage({ name: 'spin', module: 'x', failurePolicy: 'fail-closed' }, compiled, new ClusterState());
    stage.start();
    expect(stage.decidesPairs).toBe(true);
    const egress = new Uint8Array([Verdict.Accept]);
    const ingress = new Uint8Array([Verdict.Accept]);
    stage.decidePairs(record(DIRECTION_BOTH), 1, egress, ingress);
    expect(egress[0]).toBe(Verdict.Deny);
    expect(stage.counters.fuelExhausted).toBe(1);
    expect(stage.lastFailure).toBe('fuel');
    // The broken instance is not asked again: the pair walk is off until a rebuilt one decides pairs.
    expect(stage.decidesPairs).toBe(false);
    const open = new Stage({ name: 'spin-open', module: 'x', failurePolicy: 'fail-open' }, compiled, new ClusterState());
    open.start();
    egress[0] = Verdict.Deny;
    ingress[0] = Verdict.Deny;
    open.decidePairs(record(DIRECTION_BOTH), 1, egress, ingress);
    expect([egress[0], ingress[0]]).toEqual([Verdict.Next, Verdict.Next]);
  });

  it('a verdict outside the ABI in either direction is a failure of the module, answered by the failure policy', () => {
    const stage = new Stage({ name: 'bogus', module: 'x', failurePolicy: 'fail-closed' }, load(pairModule(answer(Verdict.Accept, 9))), new ClusterState());
    stage.start();
    const egress = new Uint8Array(1);
    const ingress = new Uint8Array(1);
    stage.decidePairs(record(DIRECTION_BOTH), 1, egress, ingress);
    expect([egress[0], ingress[0]]).toEqual([Verdict.Accept, Verdict.Deny]);
    expect(stage.counters.traps).toBe(1);
    const early = new Stage({ name: 'bogus-egress', module: 'x', failurePolicy: 'fail-open' }, load(pairModule(answer(200, Verdict.Accept))), new ClusterState());
    early.start();
    early.decidePairs(record(DIRECTION_BOTH), 1, egress, ingress);
    expect([egress[0], ingress[0]]).toEqual([Verdict.Next, Verdict.Accept]);
  });

  it('the ingress entry of a record whose egress the module denied is not read: the packet is denied either way', () => {
    const stage = new Stage({ name: 'deny', module: 'x' }, load(pairModule(answer(Verdict.Deny, 77))), new ClusterState());
    stage.start();
    const egress = new Uint8Array(1);
    const ingress = new Uint8Array([Verdict.Accept]);
    stage.decidePairs(record(DIRECTION_BOTH), 1, egress, ingress);
    expect([egress[0], ingress[0]]).toEqual([Verdict.Deny, Verdict.Next]);
    expect(stage.counters.traps).toBe(0);
    expect(stage.counters.decisions).toBe(1);
  });
});

describe("the one-packet walk's one-record pair call is the same sandboxed call", () => {
  it('gets the same tank as the batch call for each direction asked', () => {
    const limits = { fuelPerDecision: 2000 };
    for (const direction of [0, 1, DIRECTION_BOTH]) expect(survivableLoops(limits, direction, true)).toBe(survivableLoops(limits, direction));
  });

  it("is what Stage.decidePairOne calls, with decidePairs' verdicts, failure policy and counters", () => {
    const cases: Array<[string, string, number]> = [
      ['both accepted', answer(Verdict.Accept, Verdict.Accept), DIRECTION_BOTH],
      ['egress denied: ingress not read', answer(Verdict.Deny, 77), DIRECTION_BOTH],
      ['egress only', answer(Verdict.Accept, Verdict.Deny), 0],
      ['ingress only', answer(Verdict.Deny, Verdict.Accept), 1],
      ['a bogus ingress verdict', answer(Verdict.Accept, 9), DIRECTION_BOTH],
      ['a bogus egress verdict', answer(200, Verdict.Accept), DIRECTION_BOTH],
      ['a call that never ends', INFINITE_LOOP, DIRECTION_BOTH],
    ];
    for (const [name, body, direction] of cases) {
      const got = (['batch', 'one'] as const).map((how) => {
        const compiled = load(pairModule(body), { fuelPerDecision: 5000 });
        const stage = new Stage({ name: 'paired', module: 'x', failurePolicy: 'fail-closed' }, compiled, new ClusterState());
        stage.start();
        const egress = new Uint8Array([0xee]);
        const ingress = new Uint8Array([0xee]);
        const rec = record(direction);
        const inst = (stage as unknown as { current: EvaluatorInstance }).current;
        const one = vi.spyOn(inst, 'decidePairOne');
        if (how === 'one') stage.decidePairOne(rec, new Uint32Array(rec.buffer), egress, ingress);
        else stage.decidePairs(rec, 1, egress, ingress);
        expect(one).toHaveBeenCalledTimes(how === 'one' ? 1 : 0);
        // The direction not asked keeps what it had.
        return { egress: egress[0], ingress: ingress[0], counters: { ...stage.counters }, byDirection: [...stage.verdictsByDirection], failure: stage.lastFailure };
      });
      expect(got[1], name).toEqual(got[0]);
    }
  });
});

describe("the batched pair walk's picked records are asked as the packed ones", () => {
  const CAPACITY = 64;
  /**
   * A 1.4 module taking 64 records a call, answering each from its source
   * port: egress verdict bits 0–1, ingress bits 2–3 (Pass included), bit 8 a
   * verdict outside the ABI, and bits 9–15 a loop of that many times 64
   * steps, so that a record with a high port runs the call out of fuel.
   */
  const byPort = sandboxModule({
    abiVersion: ABI_1_4,
    omitExports: ['kwp_batch_capacity'],
    fields: [
      `(func (export "kwp_batch_capacity") (result i32) (i32.const ${CAPACITY}))`,
      `(func (export "kwp_pair_results") (result i32) (i32.const ${BATCH + CAPACITY * RECORD_SIZE}))`,
      `(func (export "kwp_decide_pair") (param $count i32) (result i32) (local $i i32) (local $r i32) (local $p i32) (local $n i32)
        (block $end (loop $next
          (br_if $end (i32.ge_u (local.get $i) (local.get $count)))
          (local.set $r (i32.add (i32.const ${BATCH}) (i32.mul (local.get $i) (i32.const ${RECORD_SIZE}))))
          (local.set $p (i32.load16_u offset=${OFF_SRC_PORT} (local.get $r)))
          (local.set $n (i32.shl (i32.shr_u (local.get $p) (i32.const 9)) (i32.const 6)))
          (block $done (loop $spin
            (br_if $done (i32.eqz (local.get $n)))
            (local.set $n (i32.sub (local.get $n) (i32.const 1)))
            (br $spin)))
          (i32.store8 offset=52 (local.get $r)
            (select (i32.const 9) (i32.and (local.get $p) (i32.const 3)) (i32.and (local.get $p) (i32.const 256))))
          (i32.store8 (i32.add (i32.const ${BATCH + CAPACITY * RECORD_SIZE}) (i32.shl (local.get $i) (i32.const 4)))
            (i32.and (i32.shr_u (local.get $p) (i32.const 2)) (i32.const 3)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $next)))
        (i32.const 0))`,
    ],
  });

  /** A small deterministic generator (the mix must be the same on every run). */
  function rng(seed: number): () => number {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
      return x / 0x100000000;
    };
  }

  it('gives the same answers, failure policy and counters as packing them for decidePairs, over a generated mix with failing calls', () => {
    const compiled = load(byPort, { fuelPerDecision: 3000 });
    const random = rng(20);
    let picked = 0;
    let failed = 0;
    let denied = 0;
    for (let trial = 0; trial < 300; trial++) {
      const chunk = new Uint8Array(CAPACITY * RECORD_SIZE);
      const chunk32 = new Uint32Array(chunk.buffer);
      const failing = random() < 0.2;
      for (let i = 0; i < CAPACITY; i++) {
        const at = i * RECORD_SIZE;
        chunk[at + OFF_DIRECTION] = [0, 1, DIRECTION_BOTH][Math.floor(random() * 3)];
        chunk[at + 1] = 4;
        // Mostly valid verdicts; in a failing trial some records carry a bogus verdict or a long loop.
        let port = Math.floor(random() * 16);
        if (failing && random() < 0.1) port |= random() < 0.5 ? 256 : 0xfe00;
        chunk[at + OFF_SRC_PORT] = port & 0xff;
        chunk[at + OFF_SRC_PORT + 1] = port >> 8;
        // The rest of the record is noise the module does not read: it must arrive all the same.
        for (let b = 20; b < 52; b++) chunk[at + b] = Math.floor(random() * 256);
      }
      const m = 1 + Math.floor(random() * (CAPACITY - 1));
      // Ascending indices, as the walk selects them.
      const pool = Array.from({ length: CAPACITY }, (_, i) => i).sort(() => random() - 0.5).slice(0, m).sort((a, b) => a - b);
      const indices = Int32Array.from(pool);
      const policy = random() < 0.5 ? 'fail-closed' : 'fail-open';
      const ask = (how: 'picked' | 'packed') => {
        const stage = new Stage({ name: 'by-port', module: 'x', failurePolicy: policy }, compiled, new ClusterState());
        stage.start();
        const inst = (stage as unknown as { current: EvaluatorInstance }).current;
        const batches: number[][] = [];
        const write = vi.spyOn(inst as unknown as { runDecide: () => void }, 'runDecide');
        const egress = new Uint8Array(CAPACITY).fill(0xee);
        const ingress = new Uint8Array(CAPACITY).fill(0xee);
        let took = true;
        if (how === 'picked') took = stage.decidePairsPicked(chunk, chunk32, indices, m, egress, ingress);
        else {
          const packed = new Uint8Array(m * RECORD_SIZE);
          for (let j = 0; j < m; j++) packed.set(chunk.subarray(indices[j] * RECORD_SIZE, (indices[j] + 1) * RECORD_SIZE), j * RECORD_SIZE);
          stage.decidePairs(packed, m, egress, ingress);
        }
        // What the module saw: its batch area after the call, without the verdict bytes it wrote.
        const mem = new Uint8Array((inst as unknown as { memory: WebAssembly.Memory }).memory.buffer);
        for (let j = 0; j < m; j++) batches.push([...mem.subarray(BATCH + j * RECORD_SIZE, BATCH + j * RECORD_SIZE + 52)]);
        return { took, egress: [...egress], ingress: [...ingress], counters: { ...stage.counters }, byDirection: [...stage.verdictsByDirection], failure: stage.lastFailure, batches, usedSetter: write.mock.calls.length };
      };
      const a = ask('picked');
      const b = ask('packed');
      expect(a.took, `trial ${trial}`).toBe(true);
      // The picked call goes straight to the fueled export, not through the batch call's runDecide.
      expect(a.usedSetter, `trial ${trial}`).toBe(0);
      expect(b.usedSetter, `trial ${trial}`).toBeGreaterThan(0);
      const { usedSetter: _a, ...pickedAnswers } = a;
      const { usedSetter: _b, ...packedAnswers } = b;
      expect(pickedAnswers, `trial ${trial}`).toEqual(packedAnswers);
      picked++;
      if (a.failure !== undefined) failed++;
      if (a.failure === 'fuel') expect(a.counters.fuelExhausted).toBe(1);
      if (a.byDirection[Verdict.Deny] + a.byDirection[4 | Verdict.Deny] > 0) denied++;
    }
    // The mix covered what it is for: calls that failed (fuel and bogus verdicts) and ones that denied.
    expect(picked).toBe(300);
    expect(failed).toBeGreaterThan(10);
    expect(denied).toBeGreaterThan(100);
  });

  it('declines, having asked and counted nothing, what one call cannot take; the walk then packs the records', () => {
    const compiled = load(byPort, { fuelPerDecision: 3000 });
    const stage = new Stage({ name: 'by-port', module: 'x' }, compiled, new ClusterState());
    stage.start();
    const chunk = new Uint8Array((CAPACITY + 1) * RECORD_SIZE);
    const indices = Int32Array.from({ length: CAPACITY + 1 }, (_, i) => i);
    const egress = new Uint8Array(CAPACITY + 1);
    const ingress = new Uint8Array(CAPACITY + 1);
    expect(stage.decidePairsPicked(chunk, new Uint32Array(chunk.buffer), indices, CAPACITY + 1, egress, ingress)).toBe(false);
    // A tank over the 31-bit limit: decidePairsInto halves the call, the picked call declines.
    const greedy = new Stage({ name: 'greedy', module: 'x' }, load(byPort, { fuelPerDecision: 30_000_000 }), new ClusterState());
    greedy.start();
    for (let i = 0; i < CAPACITY; i++) chunk[i * RECORD_SIZE + OFF_DIRECTION] = DIRECTION_BOTH;
    expect(greedy.decidePairsPicked(chunk, new Uint32Array(chunk.buffer), indices, CAPACITY, egress, ingress)).toBe(false);
    expect(stage.counters.decisions + greedy.counters.decisions).toBe(0);
    expect(stage.lastFailure).toBeUndefined();
  });
});
