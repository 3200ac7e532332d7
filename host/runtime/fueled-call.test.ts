import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { fueledCall } from './fueled-call.js';
import { sandboxModule, INFINITE_LOOP } from '../../test/fixtures/sandbox-modules.js';
import { DIRECTION_BOTH, RECORD_SIZE } from '../abi/record.js';
import { codeOf } from '../../test/fixtures/error-code.js';

const ABI_1_4 = 0x00010004;

/** Counts the JavaScript writes of `global.value` from now on, passing them through. */
function countSets(global: WebAssembly.Global): { sets: number } {
  const seen = { sets: 0 };
  const value = Object.getOwnPropertyDescriptor(WebAssembly.Global.prototype, 'value')!;
  Object.defineProperty(global, 'value', {
    get() { return value.get!.call(global); },
    set(v: number) { seen.sets++; value.set!.call(global, v); },
  });
  return seen;
}

describe('a decide export with its fuel tank filled in the same call', () => {
  it('sets the global to the tank, then calls the export with the count and returns its result', () => {
    const fuel = new WebAssembly.Global({ value: 'i32', mutable: true }, 0);
    const calls: number[][] = [];
    const run = fueledCall(fuel, (count) => { calls.push([fuel.value as number, count]); return 7; })!;
    expect(run(1234, 3)).toBe(7);
    expect(run(99, 1)).toBe(7);
    expect(calls).toEqual([[1234, 3], [99, 1]]);
  });

  it('is not offered for a tank that is not a mutable i32, so the instance sets the global itself', () => {
    expect(fueledCall(new WebAssembly.Global({ value: 'i64', mutable: true }, 0n), () => 0)).toBeUndefined();
    expect(fueledCall(new WebAssembly.Global({ value: 'i32', mutable: false }, 0), () => 0)).toBeUndefined();
  });

  it("fills an instance's tank for kwp_decide and kwp_decide_pair without the Global's setter, and a module that never returns still runs out of fuel", () => {
    const pair = sandboxModule({
      abiVersion: ABI_1_4,
      fields: [
        '(func (export "kwp_pair_results") (result i32) (i32.const 8192))',
        '(func (export "kwp_decide_pair") (param $count i32) (result i32) (i32.store8 (i32.const 4148) (i32.const 1)) (i32.const 0))',
      ],
    });
    const inst = new EvaluatorInstance(compileEvaluator(pair, { source: 'pair.wasm', limits: {} }));
    const seen = countSets((inst as unknown as { fuel: WebAssembly.Global }).fuel);
    inst.decideOne(new Uint8Array(RECORD_SIZE));
    const rec = new Uint8Array(RECORD_SIZE);
    rec[0] = DIRECTION_BOTH;
    const egress = new Uint8Array(1);
    inst.decidePairsInto(rec, 0, 1, egress, new Uint8Array(1));
    expect(egress[0]).toBe(1);
    expect(seen.sets).toBe(0);

    const endless = new EvaluatorInstance(compileEvaluator(sandboxModule({ decideBody: INFINITE_LOOP }), { source: 'loop.wasm', limits: { fuelPerDecision: 100_000 } }));
    const endlessSets = countSets((endless as unknown as { fuel: WebAssembly.Global }).fuel);
    expect(codeOf(() => endless.decideOne(new Uint8Array(RECORD_SIZE)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(endlessSets.sets).toBe(0);
  });
});
