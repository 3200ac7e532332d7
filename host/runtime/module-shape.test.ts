import { describe, it, expect } from 'vitest';
import binaryen from 'binaryen';
import { compileEvaluator } from './loader.js';
import { DEFAULT_LIMITS, TABLE_ELEMENT_BYTES, resolveLimits, type SandboxLimits } from './limits.js';
import { KwpError } from '../errors.js';
import { manyTables, sandboxModule, withDeclarations } from '../../test/fixtures/sandbox-modules.js';

const load = (bytes: Uint8Array, limits: Partial<SandboxLimits> = {}) => compileEvaluator(bytes, { source: 'hostile.wasm', limits });

function refusal(bytes: Uint8Array, limits: Partial<SandboxLimits> = {}): KwpError {
  try {
    load(bytes, limits);
  } catch (err) {
    if (err instanceof KwpError) return err;
    throw err;
  }
  throw new Error('the module was accepted');
}

describe('the loader bounds what a few bytes of declarations can make the host allocate', () => {
  it('a module of under 1 KB declaring 40 tables of 10 million elements is refused before anything is allocated (maxTables)', () => {
    const bytes = manyTables(40, 10_000_000);
    expect(bytes.length).toBeLessThan(1024);
    const err = refusal(bytes);
    expect(err.code).toBe('KWP_ERR_TABLE_TOO_LARGE');
    expect(err.message).toMatch(/hostile\.wasm: the module defines 40 tables but the host allows 4 \(sandbox limit maxTables\)/);
  });

  it('one table of 10 million elements is refused (maxTableElements), initial or maximum', () => {
    const err = refusal(manyTables(1, 10_000_000));
    expect(err.code).toBe('KWP_ERR_TABLE_TOO_LARGE');
    expect(err.message).toContain('table 0 declares 10000000 elements at start and 10000000 at most, but the host allows 65536 (sandbox limit maxTableElements)');
    const growable = withDeclarations((mod) => mod.addTable('t', 1, 1_000_000));
    expect(refusal(growable).message).toContain('table 0 declares 1 elements at start and 1000000 at most');
  });

  it('a table without a maximum is refused, since table.grow could take it to millions of elements', () => {
    const err = refusal(sandboxModule({ memory: '(memory (export "memory") 1 16) (table 1 funcref)' }));
    expect(err.code).toBe('KWP_ERR_TABLE_TOO_LARGE');
    expect(err.message).toMatch(/table 0 has no maximum/);
  });

  it('tables within the limits are accepted, and count towards what an instance reserves', () => {
    const m = load(manyTables(2, 1000));
    expect(m.reservedBytes).toBe(16 * 65536 + 2 * 1000 * TABLE_ELEMENT_BYTES);
    // The limits are what refused above: raised, the same modules load.
    expect(load(manyTables(40, 1000), { maxTables: 40 }).meta.name).toBe('sandbox-fixture');
    expect(load(manyTables(1, 100_000), { maxTableElements: 100_000 }).meta.name).toBe('sandbox-fixture');
  });

  it.each([
    ['functions', 'maxFunctions', (n: number) => withDeclarations((mod) => {
      for (let i = 0; i < n; i++) mod.addFunction(`f${i}`, binaryen.none, binaryen.none, [], mod.nop());
    })],
    ['globals', 'maxGlobals', (n: number) => withDeclarations((mod) => {
      for (let i = 0; i < n; i++) mod.addGlobal(`g${i}`, binaryen.i32, false, mod.i32.const(i));
    })],
    ['data segments', 'maxDataSegments', (n: number) => sandboxModule({
      memory: `(memory (export "memory") 1 16) ${Array.from({ length: n }, (_, i) => `(data (i32.const ${i}) "x")`).join(' ')}`,
    })],
    ['element segments', 'maxElementSegments', (n: number) => withDeclarations((mod) => {
      mod.addFunction('target', binaryen.none, binaryen.none, [], mod.nop());
      mod.addTable('t', n, n);
      for (let i = 0; i < n; i++) mod.addActiveElementSegment('t', `e${i}`, ['target'], mod.i32.const(i));
    }, )],
  ] as const)('a module with more %s than the host allows is refused (%s)', (what, limit, build) => {
    const cap = 200;
    const bytes = build(cap + 50);
    const err = refusal(bytes, { [limit]: cap });
    expect(err.code).toBe('KWP_ERR_MODULE_TOO_COMPLEX');
    expect(err.message).toMatch(new RegExp(`the module has \\d+ ${what} but the host allows ${cap} \\(sandbox limit ${limit}\\)`));
    expect(load(bytes, { [limit]: cap * 10 }).meta.name).toBe('sandbox-fixture');
  });

  it('the default counts are far above what the built-in evaluators use, and far below what an upload of the size cap could declare', () => {
    // network-policy.wasm: 163 functions, 49 globals, 467 data segments, 1 element segment.
    expect(DEFAULT_LIMITS.maxFunctions * 4).toBeLessThan(DEFAULT_LIMITS.maxModuleBytes);
    expect(DEFAULT_LIMITS.maxDataSegments).toBeGreaterThan(10 * 834);
  });
});

describe('limits that cannot be enforced are refused', () => {
  it.each([
    [{ maxTableElements: 20_000_000 }, /maxTableElements cannot exceed 10000000/],
    [{ memoryBudgetMiB: 10 }, /memoryBudgetMiB \(10\) is below one stage/],
    [{ validationHeapMiB: 4 }, /validationHeapMiB must be at least 16/],
    [{ maxStages: 0 }, /maxStages must be a positive integer/],
    [{ maxTables: 1.5 }, /maxTables must be a positive integer/],
    [{ decisionDeadlineMs: 1000 }, /decisionDeadlineMs cannot exceed 999 ms: the agent's main thread waits/],
    [{ callDeadlineMs: 5000 }, /callDeadlineMs cannot exceed 999 ms/],
    [{ decisionDeadlineMs: 0 }, /decisionDeadlineMs must be a positive integer/],
    [{ deadlineQuarantineMs: 600_000 }, /deadlineQuarantineMs cannot exceed 300000/],
    [{ noSuchLimit: 3 } as Partial<SandboxLimits>, /unknown sandbox limit\(s\) noSuchLimit/],
  ])('%j', (partial, message) => {
    expect(() => resolveLimits(partial)).toThrow(message);
  });
});
