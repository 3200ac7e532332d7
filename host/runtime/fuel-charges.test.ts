// Fuel in proportion to the work: a loop whose body is a long run of
// straight-line code pays for every instruction of it, under the default
// limits, in every place a module runs. Each hostile call runs on an
// instance thread of its own (IsolatedInstance) with a wall-clock deadline
// behind it, so a call fuel does not stop ends as KWP_ERR_DEADLINE_EXCEEDED
// (and the test fails) instead of hanging the test run for hours.
import { describe, it, expect, afterEach } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { IsolatedInstance } from './isolated-instance.js';
import { DEFAULT_LIMITS, callFuelForCap, memoryCapForState, resolveLimits, type SandboxLimits } from './limits.js';
import { INSTRUCTIONS_PER_UNIT, unitsFor } from './fuel-charges.js';
import { ObjectOp } from '../abi/objects.js';
import { RECORD_SIZE } from '../abi/record.js';
import { sandboxModule } from '../../test/fixtures/sandbox-modules.js';
import { codeOf } from '../../test/fixtures/error-code.js';
import { STRAIGHT_LINE_RUNS, straightLineRunIn, straightLineRuns, STRAIGHT_LINE_RUN_PORTS, type StraightLineRun } from '../../test/sandbox/hostile-modules.js';

/**
 * The default limits, with the longest decision deadline the limits allow
 * and a feed deadline far beyond what the call tank lasts (docs/sandbox.md:
 * tens of ms, a few hundred under load): only fuel ends these calls in time.
 */
const LIMITS: Partial<SandboxLimits> = { decisionDeadlineMs: 999, feedDeadlineMs: 20_000 };
const RUNS = Object.keys(STRAIGHT_LINE_RUNS) as StraightLineRun[];
/** Instrumenting a module of 50,000 instructions and starting a thread, on a loaded 2-core machine. */
const TEST_MS = 90_000;

const open: IsolatedInstance[] = [];
afterEach(() => { for (const i of open.splice(0)) i.close(); });

async function started(bytes: Uint8Array): Promise<IsolatedInstance> {
  const inst = await IsolatedInstance.startAsync(compileEvaluator(bytes, { source: 'straight-line.wasm', limits: LIMITS }));
  open.push(inst);
  return inst;
}

/** The code of the call's failure, fed as a build feeds it (the feed deadline applies). */
async function fedCode(inst: IsolatedInstance, call: () => void): Promise<string | undefined> {
  inst.feeding = true;
  try {
    call();
    await inst.settle();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  } finally {
    inst.feeding = false;
  }
}

function portRecord(port: number): Uint8Array {
  const rec = new Uint8Array(RECORD_SIZE);
  new DataView(rec.buffer).setUint16(6, port, true);
  return rec;
}

describe('a loop whose body is 50,000 instructions of straight-line code runs out of fuel under the default limits', () => {
  it.each(RUNS)('in kwp_decide (%s), before the decision deadline', async (run) => {
    const inst = await started(straightLineRuns('straight-line', run));
    expect(inst.decideOne(portRecord(80))).toBe(1);
    expect(codeOf(() => inst.decideOne(portRecord(STRAIGHT_LINE_RUN_PORTS[run])))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  }, TEST_MS);

  it.each(RUNS)('in kwp_configure (%s)', async (run) => {
    const inst = await started(straightLineRuns('straight-line', run));
    expect(await fedCode(inst, () => inst.configure({ hang: true }))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  }, TEST_MS);

  it.each(RUNS)('in kwp_object (%s)', async (run) => {
    const inst = await started(straightLineRunIn('straight-line', 'object', run));
    expect(await fedCode(inst, () => inst.object(0, ObjectOp.Upsert, new TextEncoder().encode('{}')))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  }, TEST_MS);

  it.each(RUNS)('in the start function (%s): instantiation fails, before the feed deadline', async (run) => {
    let code: string | undefined;
    try {
      await started(straightLineRunIn('straight-line', 'start', run));
    } catch (err) {
      code = (err as { code?: string }).code;
    }
    expect(code).toBe('KWP_ERR_INSTANTIATE');
  }, TEST_MS);
});

describe('each charge point pays for the code it guards', () => {
  const costOf = (loopBody: string, calls = 1) => {
    // One decision running `loopBody` in a loop `calls` times: the units the loop's iterations spend.
    const decide = `(local $i i32) (loop $l ${loopBody} (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const ${calls})))) (i32.const 0)`;
    return (fuel: number) => codeOf(() => new EvaluatorInstance(compileEvaluator(sandboxModule({ decideBody: decide }), { source: 'cost.wasm', limits: { fuelPerDecision: fuel } })).decideOne(new Uint8Array(RECORD_SIZE)));
  };

  it('a loop iteration of 4,000 additions costs its 16,000 instructions: 1,000 iterations need about a million units', () => {
    const run = costOf('(global.set $sink (i32.add (global.get $sink) (i32.const 7)))'.repeat(4000), 1000);
    // 16,000 instructions and the counter's 8, a unit per INSTRUCTIONS_PER_UNIT.
    const perIteration = unitsFor(16_008);
    expect(perIteration).toBeGreaterThanOrEqual(16_000 / INSTRUCTIONS_PER_UNIT);
    expect(run(perIteration * 999)).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(run(perIteration * 1000 + 100)).toBeUndefined();
  });
});

describe('a function entry pays for the locals V8 zeroes on each call', () => {
  // 4,000 v128 locals (a function may declare 50,000 in four bytes): 4,000
  // weighted instructions at each entry. Before, a call paid two units
  // whatever it declared, and a loop of calls to a function of 50,000 v128
  // locals (8.9 µs a call before tier-up) ran a decision's tank for seconds.
  const LOCALS = 4000;
  const CALLS = 100;
  const decide = `(local $i i32) (loop $l (drop (call $fat (local.get $i))) (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const ${CALLS})))) (i32.const 0)`;
  const bytes = sandboxModule({ fields: [`(func $fat (param $n i32) (result i32) (local ${'v128 '.repeat(LOCALS)}) (local.get $n))`], decideBody: decide, features: 'node20' });
  const run = (fuel: number) => codeOf(() => new EvaluatorInstance(compileEvaluator(bytes, { source: 'locals.wasm', limits: { fuelPerDecision: fuel } })).decideOne(new Uint8Array(RECORD_SIZE)));

  it('a loop of 100 calls to a function declaring 4,000 locals needs 100 times their 4,000 instructions', () => {
    const perCall = LOCALS / INSTRUCTIONS_PER_UNIT;
    expect(run(Math.floor(perCall * CALLS * 0.9))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(run(Math.ceil((perCall + 4) * CALLS) + 100)).toBeUndefined();
  });
});

describe('a call gets fuel for the state its stage holds', () => {
  // A kwp_object that counts to 30 million: 30 million units, more than fuelPerCall's 8 million, less than what 1 MiB of state adds.
  const counting = sandboxModule({
    memory: '(import "env" "memory" (memory 1))',
    objectBody: '(local $i i32) (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const 30000000)))) (i32.const 0)',
  });
  const compiled = compileEvaluator(counting, { source: 'counting.wasm' });

  it('a stage without state beyond the base memory cap gets fuelPerCall: a Synced step counting to 30 million runs out', () => {
    expect(DEFAULT_LIMITS.fuelPerCall).toBeLessThan(30_000_000);
    const inst = new EvaluatorInstance(compiled, undefined, { memoryPages: memoryCapForState(DEFAULT_LIMITS, 0) });
    expect(codeOf(() => inst.object(0, ObjectOp.Synced))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });

  it('a stage holding 1 MiB of state gets fuelPerStateByte for each byte of it: the same Synced step finishes', () => {
    const inst = new EvaluatorInstance(compiled, undefined, { memoryPages: memoryCapForState(resolveLimits({}), 1 << 20) });
    expect(codeOf(() => inst.object(0, ObjectOp.Synced))).toBeUndefined();
  });

  it('the tank stays within the 31-bit counter at the largest memory cap', () => {
    expect(callFuelForCap(DEFAULT_LIMITS, DEFAULT_LIMITS.maxStageMemoryPages)).toBeLessThanOrEqual(0x7fffffff);
    expect(callFuelForCap(DEFAULT_LIMITS, DEFAULT_LIMITS.maxMemoryPages)).toBe(DEFAULT_LIMITS.fuelPerCall);
  });
});
