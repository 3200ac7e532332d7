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
