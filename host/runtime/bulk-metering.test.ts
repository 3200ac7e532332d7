import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { ObjectOp } from '../abi/objects.js';
import type { SandboxLimits } from './limits.js';
import { sandboxModule, fillLoop, blobSegment, BIG_MEMORY } from '../../test/fixtures/sandbox-modules.js';
import { codeOf } from '../../test/fixtures/error-code.js';

// Without metering by length, each of these loops runs for hours (a 64 MiB
// fill per fuel unit); with it, the call runs out of fuel after
// fuel * BULK_BYTES_PER_FUEL bytes. The tank is small here so that the
// bounded case takes milliseconds; the generous time bound only tells a hang
// from an answer on a loaded machine.
const SMALL_TANK: Partial<SandboxLimits> = { fuelPerCall: 5_000_000, fuelPerDecision: 100_000 };
const HUGE = 64 * 1024 * 1024 - 1024;
const BOUND_MS = 10_000;

const load = (opts: Parameters<typeof sandboxModule>[0], limits = SMALL_TANK) =>
  compileEvaluator(sandboxModule({ memory: BIG_MEMORY, ...opts }), { source: 'hostile.wasm', limits });

function timed(call: () => void): { code: string | undefined; ms: number } {
  const started = performance.now();
  const code = codeOf(call);
  return { code, ms: performance.now() - started };
}

describe('bulk memory instructions pay fuel for their length', () => {
  const ops = ['fill', 'copy', 'init'] as const;
  const fields = (op: string) => (op === 'init' ? [blobSegment(64)] : []);
  const size = (op: string) => (op === 'init' ? 64 * 1024 : HUGE);

  it.each(ops)('a memory.%s loop in kwp_decide runs out of fuel at once', (op) => {
    const inst = new EvaluatorInstance(load({ decideBody: fillLoop(size(op), op), fields: fields(op) }));
    const r = timed(() => inst.decideOne(new Uint8Array(64)));
    expect(r.code).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(r.ms).toBeLessThan(BOUND_MS);
  });

  it.each(ops)('a memory.%s loop in kwp_configure runs out of fuel', (op) => {
    const inst = new EvaluatorInstance(load({ configureBody: fillLoop(size(op), op), fields: fields(op) }));
    const r = timed(() => inst.configure({}));
    expect(r.code).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(r.ms).toBeLessThan(BOUND_MS);
  });

  it('a memory.fill loop in kwp_object runs out of fuel', () => {
    const inst = new EvaluatorInstance(load({ objectBody: fillLoop(HUGE) }));
    expect(timed(() => inst.object(0, ObjectOp.Reset)).code).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });

  it('a memory.copy loop in kwp_explain runs out of fuel', () => {
    const inst = new EvaluatorInstance(load({ explainBody: fillLoop(HUGE, 'copy') }));
    expect(timed(() => inst.explain(1)).code).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });

  it('a memory.fill loop in the start function stops instantiation', () => {
    const compiled = load({ startBody: fillLoop(HUGE).replace(/\(i32\.const 0\)$/, '') });
    const r = timed(() => new EvaluatorInstance(compiled));
    expect(r.code).toBe('KWP_ERR_INSTANTIATE');
    expect(r.ms).toBeLessThan(BOUND_MS);
  });

  it('the charge comes before the instruction: a fill the tank cannot pay for writes nothing', () => {
    // 100,000 units pay for 1.6 MB; a 2 MB fill of 0x07 is refused whole.
    const inst = new EvaluatorInstance(load({ decideBody: '(memory.fill (i32.const 65536) (i32.const 7) (i32.const 2000000)) (i32.const 0)' }));
    expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    const memory = (inst as unknown as { memory: WebAssembly.Memory }).memory;
    expect(new Uint8Array(memory.buffer, 65536, 2_000_000).some((b) => b !== 0)).toBe(false);
  });

  it('bulk instructions within the budget still do their work', () => {
    // Copy the record's first 8 bytes over its verdict word, then fill 1 KiB after the batch area.
    const decide = `
      (memory.fill (i32.const 8192) (i32.const 9) (i32.const 1024))
      (memory.copy (i32.add (i32.const 4096) (i32.const 52)) (i32.const 4096) (i32.const 4))
      (i32.const 0)`;
    const inst = new EvaluatorInstance(load({ decideBody: decide }));
    const record = new Uint8Array(64);
    record[0] = 2; // Deny, copied into the verdict byte
    expect(inst.decideOne(record)).toBe(2);
    const memory = (inst as unknown as { memory: WebAssembly.Memory }).memory;
    expect([...new Uint8Array(memory.buffer, 8192, 1024)].every((b) => b === 9)).toBe(true);
    expect(new Uint8Array(memory.buffer)[8192 + 1024]).toBe(0);
  });
});

describe('growing memory and tables pays fuel too', () => {
  it('memory.grow is charged a unit per page', () => {
    const grow = (pages: number, fuelPerDecision: number) => {
      const compiled = load({ decideBody: `(drop (memory.grow (i32.const ${pages}))) (i32.const 0)`, memory: '(memory (export "memory") 1 1024)' }, { fuelPerDecision });
      return new EvaluatorInstance(compiled);
    };
    expect(codeOf(() => grow(100, 50).decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    const inst = grow(10, 50);
    inst.decideOne(new Uint8Array(64));
    expect(inst.memoryBytes).toBe(11 * 65536);
  });

  it('table.grow is charged for every element of the table it leaves, so a loop of small grows pays for the copying', () => {
    // Each grow copies the table: 1,000 one-element grows copy ~500,000 elements (~250,000 units at 8 bytes an element).
    const loop = '(local $i i32) (loop $l (drop (table.grow $t (ref.null func) (i32.const 1))) (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const 1000)))) (i32.const 0)';
    const build = (fuelPerDecision: number) => new EvaluatorInstance(load({ decideBody: loop, fields: ['(table $t 1 2000 funcref)'], features: 'node20' }, { fuelPerDecision }));
    expect(codeOf(() => build(100_000).decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(codeOf(() => build(400_000).decideOne(new Uint8Array(64)))).toBeUndefined();
  });
});

describe('table instructions whose length cannot be metered are refused', () => {
  const tableFields = ['(table $t 16 16 funcref)', '(elem $e func)'];
  it.each([
    ['table.fill', '(table.fill $t (i32.const 0) (ref.null func) (i32.const 4))'],
    ['table.copy', '(table.copy $t $t (i32.const 0) (i32.const 1) (i32.const 4))'],
    ['table.init', '(table.init $t $e (i32.const 0) (i32.const 0) (i32.const 0))'],
  ])('a module using %s is refused with a message naming it', (name, instr) => {
    let message = '';
    const code = codeOf(() => {
      try {
        load({ decideBody: `${instr} (i32.const 0)`, fields: tableFields, features: 'node20' });
      } catch (err) {
        message = (err as Error).message;
        throw err;
      }
    });
    expect(code).toBe('KWP_ERR_INSTRUMENTATION');
    expect(message).toContain(name);
  });
});

describe('exception handling is refused: a throw costs far more than fuel counts, and a catch would catch the host', () => {
  // Measured before the refusal (default tank, load average 10): a loop
  // throwing and catching ran one decision for 1.2 to 1.7 s of CPU, and one
  // catching env.abort's error for 0.7 s, where the tank should last ~12 ms.
  const refusal = (opts: Parameters<typeof sandboxModule>[0]) => {
    let message = '';
    const code = codeOf(() => {
      try {
        load({ features: 'node20', ...opts }, {});
      } catch (err) {
        message = (err as Error).message;
        throw err;
      }
    });
    return { code, message };
  };
  it.each([
    ['try', 'a loop throwing and catching its own tag', { fields: ['(tag $t)'], decideBody: '(loop $l (try (do (throw $t)) (catch_all)) (br $l)) (i32.const 0)' }],
    ['throw', 'a throw no catch sees, in a function of its own', { fields: ['(tag $t)', '(func $thrower (throw $t))'], decideBody: '(if (local.get $count) (then (call $thrower))) (i32.const 0)' }],
    ['try', 'a loop catching the error env.abort throws', {
      imports: ['(import "env" "abort" (func $abort (param i32 i32 i32 i32)))'],
      decideBody: '(loop $l (try (do (call $abort (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 2))) (catch_all)) (br $l)) (i32.const 0)',
    }],
    ['try', 'a try in the start function', { startBody: '(try (do (nop)) (catch_all))' }],
    ['try', 'a rethrow in kwp_configure', { fields: ['(tag $t)'], configureBody: '(try (do (throw $t)) (catch_all (rethrow 0))) (i32.const 0)' }],
  ] as Array<[string, string, Parameters<typeof sandboxModule>[0]]>)('a module using %s (%s) is refused at load with KWP_ERR_INSTRUMENTATION naming it', (instr, _what, opts) => {
    const { code, message } = refusal(opts);
    expect(code).toBe('KWP_ERR_INSTRUMENTATION');
    expect(message).toContain(`exception handling (${instr})`);
  });

  it('a module that only declares a tag, and never throws, still loads', () => {
    expect(refusal({ fields: ['(tag $t (param i32))'] }).code).toBeUndefined();
  });
});
