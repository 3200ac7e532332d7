// Fuel for bulk memory and table instructions, in proportion to their length.
// The charges at function entries and loop headers (fuel-charges.ts) pay for
// the instructions they guard, but one memory.fill of 64 MiB is one
// instruction: a loop of them pins a thread for hours on a budget of a few
// thousand units, and neither worker.terminate() nor node:vm's deadline
// interrupts a bulk instruction while it runs. So the length operand of every
// bulk instruction is passed through a charge function before the instruction
// runs: it spends length / BULK_BYTES_PER_FUEL units and traps with an empty
// tank (fuel -1, which the host reports as fuel exhaustion) when they do not
// fit, so nothing is written. The operand keeps its place, so the order of
// evaluation and the instruction's own traps are unchanged.
//
// binaryen offers no setter for the operands of table.fill, table.copy and
// table.init, so their length cannot be metered here: modules that use them
// are refused (AssemblyScript never emits them). So are the exception
// handling instructions (try, throw, rethrow, try_table, throw_ref): a throw
// is one instruction that costs V8 about a microsecond (an exception object,
// an unwind), so a loop throwing and catching paid one unit for 70 times
// the time a unit buys, and a catch_all also catches the errors the host's
// imports throw (env.abort), so a module could abort again and again inside
// one call. AssemblyScript emits none of them either. Any expression kind this
// walker does not know is refused too, rather than left unwalked, since a
// bulk instruction could hide beneath it.
import type BinaryenModule from 'binaryen';
import type { Binaryen } from './fuel-rewrite.js';

/**
 * Bytes of memory.fill/copy/init one fuel unit pays for. A unit is also the
 * price of 16 weighted instructions (fuel-charges.ts); measured on Node 20
 * (CPU time, load average 14), a 60 MiB fill took 4.3 ns per 16 bytes and a
 * 60 MB copy 2.9 ns, against up to 17 ns for a unit of the slowest
 * straight-line code, so a module cannot buy more time per unit with bulk
 * instructions than with code. Part of the instrumentation: changing it must bump
 * FUEL_INSTRUMENTATION_VERSION.
 */
export const BULK_BYTES_PER_FUEL = 16;
/**
 * memory.grow: one unit per page. 64-bit V8 reserves a memory's address space
 * up front, so growing is a permission change whatever the size, and pages
 * are zeroed lazily when the module's own (metered) code touches them; the
 * total is bounded by the memory cap anyway.
 */
const UNITS_PER_PAGE = 1;
/**
 * table.grow: V8 copies the whole table into a new array, so a grow is
 * charged for every element the table has afterwards (a loop of one-element
 * grows pays for its quadratic copying), at 8 bytes an element. A grow past
 * V8's table size limit fails without copying and is free.
 */
const TABLE_SLOT_BYTES = 8;
const V8_MAX_TABLE_ELEMENTS = 10_000_000;

type ExpressionRef = number;

/** binaryen.js's C API, for what its typed wrappers do not offer. */
type RawApi = Record<string, (...args: number[]) => number>;

/** binaryen.js names only some expression ids; the C API has them all. */
function rawId(b: Binaryen, kind: string): number {
  const get = (b as unknown as RawApi)[`_Binaryen${kind}Id`];
  if (typeof get !== 'function') throw new Error(`this binaryen has no ${kind} expression id`);
  return get();
}

/** Expression kinds whose children are all reachable through these fields of getExpressionInfo; anything else is refused. */
function childFields(b: Binaryen): Map<number, string[]> {
  const m = new Map<number, string[]>();
  const leaf: number[] = [
    b.NopId, b.LocalGetId, b.GlobalGetId, b.ConstId, b.UnreachableId, b.PopId, b.MemorySizeId, b.DataDropId,
    b.AtomicFenceId, b.RefNullId, b.RefFuncId, b.TableSizeId, rawId(b, 'ElemDrop'),
  ];
  for (const id of leaf) m.set(id, []);
  const withChildren: Array<[number, string[]]> = [
    [b.BlockId, ['children']], [b.IfId, ['condition', 'ifTrue', 'ifFalse']], [b.LoopId, ['body']],
    [b.BreakId, ['condition', 'value']], [b.SwitchId, ['condition', 'value']], [b.CallId, ['operands']],
    [b.CallIndirectId, ['target', 'operands']], [b.LocalSetId, ['value']], [b.GlobalSetId, ['value']],
    [b.LoadId, ['ptr']], [b.StoreId, ['ptr', 'value']], [b.AtomicRMWId, ['ptr', 'value']],
    [b.AtomicCmpxchgId, ['ptr', 'expected', 'replacement']], [b.AtomicWaitId, ['ptr', 'expected', 'timeout']],
    [b.AtomicNotifyId, ['ptr', 'notifyCount']], [b.SIMDExtractId, ['vec']], [b.SIMDReplaceId, ['vec', 'value']],
    [b.SIMDShuffleId, ['left', 'right']], [b.SIMDTernaryId, ['a', 'b', 'c']], [b.SIMDShiftId, ['vec', 'shift']],
    [b.SIMDLoadId, ['ptr']], [b.SIMDLoadStoreLaneId, ['ptr', 'vec']], [b.MemoryInitId, ['dest', 'offset', 'size']],
    [b.MemoryCopyId, ['dest', 'source', 'size']], [b.MemoryFillId, ['dest', 'value', 'size']],
    [b.UnaryId, ['value']], [b.BinaryId, ['left', 'right']], [b.SelectId, ['ifTrue', 'ifFalse', 'condition']],
    [b.DropId, ['value']], [b.ReturnId, ['value']], [b.MemoryGrowId, ['delta']], [b.RefIsNullId, ['value']],
    [b.RefEqId, ['left', 'right']], [b.RefAsId, ['value']], [b.TableGetId, ['index']], [b.TableSetId, ['index', 'value']],
    [b.TableGrowId, ['value', 'delta']],
    [b.TupleMakeId, ['operands']], [b.TupleExtractId, ['tuple']],
  ];
  for (const [id, fields] of withChildren) m.set(id, fields);
  return m;
}

const fieldsOf = new WeakMap<Binaryen, Map<number, string[]>>();
const UNMETERABLE: Array<[string, string]> = [['TableFill', 'table.fill'], ['TableCopy', 'table.copy'], ['TableInit', 'table.init']];
/** Exception handling: refused for what a throw costs and what a catch catches (see the top of this file). */
const EXCEPTIONS: Array<[string, string]> = [['Try', 'try'], ['Throw', 'throw'], ['Rethrow', 'rethrow'], ['TryTable', 'try_table'], ['ThrowRef', 'throw_ref']];

/**
 * The children of `expr` (an expression of function `fn`), read through
 * getExpressionInfo. Throws a plain Error for an expression kind the walk
 * does not know, rather than leaving it unwalked: a bulk instruction, or a
 * loop the fuel charges must see, could hide beneath it.
 */
export function expressionChildren(b: Binaryen, expr: ExpressionRef, fn: string): ExpressionRef[] {
  let fields = fieldsOf.get(b);
  if (!fields) fieldsOf.set(b, (fields = childFields(b)));
  const id = b.getExpressionId(expr);
  const known = fields.get(id);
  if (!known) {
    const exception = EXCEPTIONS.find(([kind]) => rawId(b, kind) === id)?.[1];
    if (exception) throw new Error(`function ${fn} uses exception handling (${exception}): a throw costs far more than fuel counts and a catch would catch the host's own errors; evaluators may not use it (AssemblyScript never emits it)`);
    const what = UNMETERABLE.find(([kind]) => rawId(b, kind) === id)?.[1] ?? `expression kind ${id}`;
    throw new Error(`function ${fn} uses ${what}, whose cost the host cannot meter; evaluators may not use it`);
  }
  const out: ExpressionRef[] = [];
  if (known.length === 0) return out;
  const e = b.getExpressionInfo(expr) as unknown as Record<string, ExpressionRef | ExpressionRef[]>;
  for (const f of known) {
    const child = e[f];
    if (Array.isArray(child)) { for (const c of child) if (c) out.push(c); }
    else if (typeof child === 'number' && child) out.push(child);
  }
  return out;
}

/**
 * Adds `name(operand: i32) -> i32`, which spends the units `cost` computes
 * from the operand (given as an i64, so nothing wraps) and returns the
 * operand, or traps with an empty tank when they do not fit.
 */
function addCharge(b: Binaryen, mod: BinaryenModule.Module, name: string, fuelGlobal: string, cost: (operand: ExpressionRef) => ExpressionRef): void {
  const fuel = () => mod.global.get(fuelGlobal, b.i32);
  mod.addFunction(name, b.createType([b.i32]), b.i32, [b.i64], mod.block(null, [
    mod.local.set(1, cost(mod.i64.extend_u(mod.local.get(0, b.i32)))),
    mod.if(mod.i64.gt_s(mod.local.get(1, b.i64), mod.i64.extend_s(fuel())), mod.block(null, [
      // -1, like the probes leave it: the host reads a negative tank as fuel exhaustion.
      mod.global.set(fuelGlobal, mod.i32.const(-1)),
      mod.unreachable(),
    ])),
    mod.global.set(fuelGlobal, mod.i32.sub(fuel(), mod.i32.wrap(mod.local.get(1, b.i64)))),
    mod.local.get(0, b.i32),
  ], b.i32));
}

/** A function name no function of `mod` has yet. */
function freshName(mod: BinaryenModule.Module, base: string): string {
  let name = base;
  for (let i = 1; mod.getFunction(name); i++) name = `${base}_${i}`;
  return name;
}

/**
 * Routes the length operand of every memory.fill, memory.copy, memory.init,
 * memory.grow and table.grow of `mod` through a charge on `fuelGlobal` (an
 * i32 global the caller has added). Throws a plain Error naming what it
 * cannot meter.
 */
export function meterBulkInstructions(b: Binaryen, mod: BinaryenModule.Module, fuelGlobal: string): void {
  const raw = b as unknown as RawApi;
  const i64 = (v: number) => mod.i64.const(v as never);
  const bytes = (n: ExpressionRef) => mod.i64.div_u(n, i64(BULK_BYTES_PER_FUEL));
  const pages = (n: ExpressionRef) => mod.i64.mul(n, i64(UNITS_PER_PAGE));
  const slots = (table: string) => (n: ExpressionRef) => {
    const after = mod.i64.add(n, mod.i64.extend_u(mod.table.size(table)));
    const cost = mod.i64.div_u(mod.i64.mul(after, i64(TABLE_SLOT_BYTES)), i64(BULK_BYTES_PER_FUEL));
    return mod.select(mod.i64.gt_u(after, i64(V8_MAX_TABLE_ELEMENTS)), i64(0), cost);
  };
  // One charge function per kind of cost (and per table for table.grow), added once the walk is done.
  const charges = new Map<string, { name: string; cost: (n: ExpressionRef) => ExpressionRef }>();
  const charge = (key: string, operand: ExpressionRef, cost: (n: ExpressionRef) => ExpressionRef): ExpressionRef => {
    let c = charges.get(key);
    if (!c) charges.set(key, (c = { name: freshName(mod, `kwp_fuel_${key}`), cost }));
    return mod.call(c.name, [operand], b.i32);
  };
  const functions: BinaryenModule.FunctionRef[] = [];
  for (let i = 0; i < mod.getNumFunctions(); i++) functions.push(mod.getFunctionByIndex(i));
  for (const fn of functions) {
    const info = b.getFunctionInfo(fn);
    if (info.module || !info.body) continue; // an import has no body
    const stack: ExpressionRef[] = [info.body];
    while (stack.length) {
      const expr = stack.pop()!;
      const id = b.getExpressionId(expr);
      // The children are read first, so an operand is walked as it was before it was wrapped.
      stack.push(...expressionChildren(b, expr, info.name));
      if (id !== b.MemoryFillId && id !== b.MemoryCopyId && id !== b.MemoryInitId && id !== b.MemoryGrowId && id !== b.TableGrowId) continue;
      const e = b.getExpressionInfo(expr) as unknown as Record<string, ExpressionRef | string>;
      const size = e.size as ExpressionRef;
      const delta = e.delta as ExpressionRef;
      if (id === b.MemoryFillId) raw._BinaryenMemoryFillSetSize(expr, charge('bytes', size, bytes));
      else if (id === b.MemoryCopyId) raw._BinaryenMemoryCopySetSize(expr, charge('bytes', size, bytes));
      else if (id === b.MemoryInitId) raw._BinaryenMemoryInitSetSize(expr, charge('bytes', size, bytes));
      else if (id === b.MemoryGrowId) raw._BinaryenMemoryGrowSetDelta(expr, charge('pages', delta, pages));
      else {
        const table = e.table as string;
        raw._BinaryenTableGrowSetDelta(expr, charge(`table_${table}`, delta, slots(table)));
      }
    }
  }
  for (const { name, cost } of charges.values()) addCharge(b, mod, name, fuelGlobal, cost);
}
