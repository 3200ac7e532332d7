import { loggerOf } from '../logger.js';
import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { KwpError } from '../errors.js';
import { sandboxModule } from '../../test/fixtures/sandbox-modules.js';

const LOG = '(import "kwp" "log" (func $log (param i32 i32 i32)))';
const ABORT = '(import "env" "abort" (func $abort (param i32 i32 i32 i32)))';
const MEMORY = '(import "env" "memory" (memory 1))';
/** kwp_decide logs "hi" (bytes 0..1 of memory, written by the data segment) at level 1. */
const LOGS_HI = '(call $log (i32.const 1) (i32.const 0) (i32.const 2)) (i32.const 0)';

const load = (bytes: Uint8Array) => compileEvaluator(bytes, { source: 'fixture.wasm' });

function refusal(bytes: Uint8Array): KwpError {
  try {
    load(bytes);
  } catch (err) {
    if (err instanceof KwpError) return err;
    throw err;
  }
  throw new Error('the module was accepted');
}

describe('imports are instrumented whatever their order', () => {
  it.each([
    ['kwp.log before env.abort', [LOG, ABORT]],
    ['kwp.log as the only function import (the probe once borrowed its module name)', [LOG]],
    ['env.abort first', [ABORT, LOG]],
    ['an imported memory first', [MEMORY, LOG, ABORT]],
  ])('a module with %s loads, and its log calls reach the host', (_name, imports) => {
    const data = '(data (i32.const 0) "hi")';
    const memory = imports.includes(MEMORY) ? data : `(memory (export "memory") 1 16) ${data}`;
    const lines: string[] = [];
    const inst = new EvaluatorInstance(load(sandboxModule({ imports, memory, decideBody: LOGS_HI })), loggerOf((_level, message) => lines.push(message)));
    inst.decideOne(new Uint8Array(64));
    expect(lines).toEqual(['hi']);
  });
});

describe('allow-listed imports must have exactly the ABI type', () => {
  it.each([
    ['kwp.log with an i64 parameter', '(import "kwp" "log" (func (param i32 i64 i32)))', 'kwp.log', '(i32, i64, i32) -> nil', '(i32, i32, i32) -> nil'],
    ['kwp.log with a result', '(import "kwp" "log" (func (param i32 i32 i32) (result i32)))', 'kwp.log', '(i32, i32, i32) -> i32', '(i32, i32, i32) -> nil'],
    ['kwp.log with too few parameters', '(import "kwp" "log" (func (param i32 i32)))', 'kwp.log', '(i32, i32) -> nil', '(i32, i32, i32) -> nil'],
    ['env.abort with no parameters', '(import "env" "abort" (func))', 'env.abort', '() -> nil', '(i32, i32, i32, i32) -> nil'],
    ['env.abort with f64 parameters', '(import "env" "abort" (func (param f64 f64 f64 f64)))', 'env.abort', '(f64, f64, f64, f64) -> nil', '(i32, i32, i32, i32) -> nil'],
  ])('%s is refused at upload, naming the import and the expected type', (_name, line, name, actual, expected) => {
    const err = refusal(sandboxModule({ imports: [line] }));
    expect(err.code).toBe('KWP_ERR_IMPORT_SIGNATURE');
    expect(err.message).toContain(`import ${name} has type ${actual}`);
    expect(err.message).toContain(`the ABI defines it as ${expected}`);
  });

  it('an allow-listed name imported as another kind is still not allowed', () => {
    expect(refusal(sandboxModule({ imports: ['(import "kwp" "log" (global i32))'] })).code).toBe('KWP_ERR_IMPORT_NOT_ALLOWED');
  });
});

describe('a start function may call the imports before the host can see its memory', () => {
  // The start function runs inside instantiation, before the host has the
  // module's exports: kwp.log and env.abort read a memory that was not set,
  // and every such module failed with "Cannot read properties of undefined".
  const START_LOGS = '(call $log (i32.const 1) (i32.const 0) (i32.const 2))';
  const data = '(data (i32.const 0) "hi")';

  it('a start function logging from an imported memory is instantiated, and its line reaches the log', () => {
    const lines: string[] = [];
    const inst = new EvaluatorInstance(load(sandboxModule({ imports: [MEMORY, LOG], memory: data, startBody: START_LOGS })), loggerOf((_level, message) => lines.push(message)));
    expect(inst.decideOne(new Uint8Array(64))).toBe(0);
    expect(lines).toEqual(['hi']);
  });

  it('a start function logging from a memory it defines is instantiated, and the log says why its line has no text', () => {
    const lines: string[] = [];
    const inst = new EvaluatorInstance(load(sandboxModule({ imports: [LOG], memory: `(memory (export "memory") 1 16) ${data}`, startBody: START_LOGS })), loggerOf((_level, message) => lines.push(message)));
    expect(inst.decideOne(new Uint8Array(64))).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('logged by the start function');
  });

  it('a start function that aborts fails instantiation with the abort, not a TypeError of the host', () => {
    let err: unknown;
    try {
      new EvaluatorInstance(load(sandboxModule({ imports: [ABORT], startBody: '(call $abort (i32.const 8) (i32.const 8) (i32.const 1) (i32.const 2))' })));
    } catch (e) {
      err = e;
    }
    expect((err as KwpError).code).toBe('KWP_ERR_INSTANTIATE');
    expect((err as Error).message).toContain('abort: ? at ?:1:2');
    expect((err as Error).message).not.toContain('Cannot read properties');
  });
});
