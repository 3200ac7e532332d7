// Where fuel is charged and how much: one charge at every function entry and
// one at every loop header (the places a runaway module must pass), each
// spending the static cost of the straight-line code it guards, so a unit
// means a bounded amount of work whatever the code between charge points
// does. The entry charge pays for the function body outside its loops, a
// loop's charge for its body outside the loops nested in it: code that does
// not loop runs each instruction at most once, so that is an upper bound of
// any path from the charge point to the next one (a branch's arms are both
// counted). A call pays its own weight here and the callee's body at the
// callee's entry.
//
// Costs are weighted instructions (INSTRUCTION_WEIGHTS below, measured on
// Node 20), summed per charge point and divided by INSTRUCTIONS_PER_UNIT,
// rounded up: the tank is an i32 global, and at one unit an instruction a
// second's work would not fit in it. Bulk instructions add their length
// (bulk-metering.ts).
//
// This replaces binaryen's log-execution pass, which charged one unit per
// point whatever the point guarded: a loop whose body was 50,000 additions
// paid one unit an iteration, so a tank lasted minutes.
import type BinaryenModule from 'binaryen';
import type { Binaryen } from './fuel-rewrite.js';
import { expressionChildren } from './bulk-metering.js';

type ExpressionRef = number;
type RawApi = Record<string, (...args: number[]) => number>;

/**
 * Weighted instructions one fuel unit pays for. The charge itself (a global
 * read, a subtraction, a write, a compare and a branch) is in the weight of
 * every charge point, so a one-instruction loop still pays a unit.
 */
export const INSTRUCTIONS_PER_UNIT = 16;
/** What a charge point's own code costs, in weighted instructions. */
const CHARGE_WEIGHT = 5;

/**
 * Weights of the instructions that cost more than a plain one, measured on
 * Node 20 (docs/sandbox.md, "How fuel is counted"): in a loop of 50,000 of
 * them, against the same loop of i32 additions.
 */
export const INSTRUCTION_WEIGHTS = {
  /** A load or a store: a chain of them through one address is bound by the memory's latency. */
  memoryAccess: 2,
  /** A call into a function of the module: the frame, the arguments, the return. */
  call: 4,
  /** call_indirect: its target may be an import (a table can hold kwp.log), which has no entry charge. */
  callIndirect: 192,
  /** A call of an import (kwp.log): leaving wasm for JavaScript and the host's own work. */
  callImport: 192,
  /** i32 division and remainder. */
  division: 6,
  /** i64 division and remainder. */
  division64: 10,
  /** Floating-point division and square root (a chain of them is bound by their latency). */
  floatDivision: 8,
  /** memory.grow, besides its length (bulk-metering.ts). */
  memoryGrow: 50,
  /**
   * Each local a function declares (not its parameters), paid at its entry:
   * V8 zeroes every one on each call, and a function may declare 50,000 in
   * four bytes. Measured on Node 20 (load average 6): 50,000 v128 locals
   * cost 8.9 µs a call before tier-up (0.18 ns a local), 0.7 µs after, and
   * paid two units, so a loop of such calls ran a decision's tank for
   * seconds; at one weighted instruction a local (0.73 ns) the charge covers
   * the slowest of them.
   */
  local: 1,
} as const;

function opsNamed(b: Binaryen, names: string[]): Set<number> {
  const ops = b as unknown as Record<string, number>;
  return new Set(names.map((k) => {
    if (typeof ops[k] !== 'number') throw new Error(`this binaryen has no operation ${k}`);
    return ops[k];
  }));
}

/** Expression kinds by weight; structural ones (block, loop, nop) compile to no code of their own. */
interface WeightTables { structural: Set<number>; memory: Set<number>; divisions: Set<number>; divisions64: Set<number>; floatDivisions: Set<number>; squareRoots: Set<number> }

function weightTables(b: Binaryen): WeightTables {
  return {
    structural: new Set([b.BlockId, b.LoopId, b.NopId]),
    memory: new Set([b.LoadId, b.StoreId, b.SIMDLoadId, b.SIMDLoadStoreLaneId, b.AtomicRMWId, b.AtomicCmpxchgId]),
    divisions: opsNamed(b, ['DivSInt32', 'DivUInt32', 'RemSInt32', 'RemUInt32']),
    divisions64: opsNamed(b, ['DivSInt64', 'DivUInt64', 'RemSInt64', 'RemUInt64']),
    // Binary and unary operations are numbered separately, so each has its own set.
    floatDivisions: opsNamed(b, ['DivFloat32', 'DivFloat64', 'DivVecF32x4', 'DivVecF64x2']),
    squareRoots: opsNamed(b, ['SqrtFloat32', 'SqrtFloat64', 'SqrtVecF32x4', 'SqrtVecF64x2']),
  };
}

/** The weighted instructions of `expr` itself, not counting its children. */
function weightOf(b: Binaryen, expr: ExpressionRef, imports: Set<string>, t: WeightTables): number {
  const raw = b as unknown as RawApi;
  const id = b.getExpressionId(expr);
  if (t.structural.has(id)) return 0;
  if (t.memory.has(id)) return INSTRUCTION_WEIGHTS.memoryAccess;
  if (id === b.CallId) {
    const target = b.getExpressionInfo(expr) as BinaryenModule.CallInfo;
    return imports.has(target.target) ? INSTRUCTION_WEIGHTS.callImport : INSTRUCTION_WEIGHTS.call;
  }
  if (id === b.CallIndirectId) return INSTRUCTION_WEIGHTS.callIndirect;
  if (id === b.MemoryGrowId) return INSTRUCTION_WEIGHTS.memoryGrow;
  if (id === b.BinaryId) {
    const op = raw._BinaryenBinaryGetOp(expr);
    if (t.divisions.has(op)) return INSTRUCTION_WEIGHTS.division;
    if (t.divisions64.has(op)) return INSTRUCTION_WEIGHTS.division64;
    if (t.floatDivisions.has(op)) return INSTRUCTION_WEIGHTS.floatDivision;
  }
  if (id === b.UnaryId && t.squareRoots.has(raw._BinaryenUnaryGetOp(expr))) return INSTRUCTION_WEIGHTS.floatDivision;
  return 1;
}

/** Units a charge point guarding `weight` weighted instructions spends. */
export function unitsFor(weight: number): number {
  return Math.ceil((weight + CHARGE_WEIGHT) / INSTRUCTIONS_PER_UNIT);
}

/**
 * Puts a charge at every function entry and loop header of `mod`'s defined
 * functions, spending from `fuelGlobal` (an i32 global the caller added) and
 * trapping once the tank is below zero. Throws a plain Error for an
 * expression kind it cannot walk. Returns how many charge points it added.
 */
export function chargeStaticCosts(b: Binaryen, mod: BinaryenModule.Module, fuelGlobal: string): number {
  const raw = b as unknown as RawApi;
  const ctx = weightTables(b);
  const imports = new Set<string>();
  const defined: BinaryenModule.FunctionRef[] = [];
  for (let i = 0; i < mod.getNumFunctions(); i++) {
    const fn = mod.getFunctionByIndex(i);
    const info = b.getFunctionInfo(fn);
    if (info.module) imports.add(info.name);
    else if (info.body) defined.push(fn);
  }
  const charge = (units: number, body: ExpressionRef): ExpressionRef => {
    const fuel = () => mod.global.get(fuelGlobal, b.i32);
    return mod.block(null, [
      mod.global.set(fuelGlobal, mod.i32.sub(fuel(), mod.i32.const(units))),
      mod.if(mod.i32.lt_s(fuel(), mod.i32.const(0)), mod.unreachable()),
      body,
    ], b.auto);
  };
  let points = 0;
  for (const fn of defined) {
    const info = b.getFunctionInfo(fn);
    // Each region is the function body outside loops (index 0) or one loop's body outside its nested loops.
    // The entry also pays for zeroing the function's declared locals.
    const weights = [info.vars.length * INSTRUCTION_WEIGHTS.local];
    const loops: ExpressionRef[] = [];
    const stack: Array<[ExpressionRef, number]> = [[info.body!, 0]];
    while (stack.length) {
      const [expr, region] = stack.pop()!;
      weights[region] += weightOf(b, expr, imports, ctx);
      const id = b.getExpressionId(expr);
      if (id === b.LoopId) {
        loops.push(expr);
        weights.push(0);
        const body = (b.getExpressionInfo(expr) as BinaryenModule.LoopInfo).body;
        stack.push([body, weights.length - 1]);
        continue;
      }
      for (const child of expressionChildren(b, expr, info.name)) stack.push([child, region]);
    }
    loops.forEach((loop, i) => {
      const body = (b.getExpressionInfo(loop) as BinaryenModule.LoopInfo).body;
      raw._BinaryenLoopSetBody(loop, charge(unitsFor(weights[i + 1]), body));
    });
    raw._BinaryenFunctionSetBody(fn, charge(unitsFor(weights[0]), info.body!));
    points += loops.length + 1;
  }
  return points;
}
