// The exports the host calls must have exactly the ABI's types. Before the
// check, JavaScript converted whatever a wrong type gave: a kwp_batch
// returning an f64 or two results made every decision read its verdict at
// NaN (undefined verdicts from a stage that looked healthy), one returning
// i64 threw a TypeError from BigInt arithmetic outside any module call.
import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { sandboxModule } from '../../test/fixtures/sandbox-modules.js';
import { codeOf } from '../../test/fixtures/error-code.js';

function refusal(omit: string[], fields: string[], imports: string[] = []) {
  let message = '';
  const code = codeOf(() => {
    try {
      compileEvaluator(sandboxModule({ features: 'node20', omitExports: omit, fields, imports }), { source: 'exports.wasm' });
    } catch (err) {
      message = (err as Error).message;
      throw err;
    }
  });
  return { code, message };
}

describe('every function export the host calls must have exactly the type the ABI defines', () => {
  it.each([
    ['kwp_batch', 'an f64 result', '(func (export "kwp_batch") (result f64) (f64.const 4096.5))'],
    ['kwp_batch', 'two results', '(func (export "kwp_batch") (result i32 i32) (i32.const 4096) (i32.const 1))'],
    ['kwp_batch', 'an i64 result', '(func (export "kwp_batch") (result i64) (i64.const 4096))'],
    ['kwp_batch_capacity', 'an i64 result', '(func (export "kwp_batch_capacity") (result i64) (i64.const 1))'],
    ['kwp_decide', 'an i64 parameter', '(func (export "kwp_decide") (param i64) (result i32) (i32.const 0))'],
    ['kwp_decide', 'no result', '(func (export "kwp_decide") (param i32))'],
    ['kwp_alloc', 'an i64 result', '(func (export "kwp_alloc") (param i32) (result i64) (i64.const 1024))'],
    ['kwp_configure', 'an f64 result', '(func (export "kwp_configure") (param i32 i32) (result f64) (f64.const 1e300))'],
    ['kwp_object', 'one parameter too few', '(func (export "kwp_object") (param i32 i32 i32) (result i32) (i32.const 0))'],
    ['kwp_pod_upsert', 'a result', '(func (export "kwp_pod_upsert") (param i32 i32) (result i32) (i32.const 0))'],
    ['kwp_subjects', 'an externref result', '(func (export "kwp_subjects") (result externref) (ref.null extern))'],
    ['kwp_result', 'a parameter', '(func (export "kwp_result") (param i32) (result i32) (i32.const 2048))'],
  ])('%s with %s: KWP_ERR_EXPORT_SIGNATURE naming the export and its ABI type', (name, _what, field) => {
    const { code, message } = refusal([name], [field]);
    expect(code).toBe('KWP_ERR_EXPORT_SIGNATURE');
    expect(message).toContain(`export ${name} is type`);
    expect(message).toContain('but the ABI defines it as a function (');
  });

  it('an optional export with a wrong type is refused too (kwp_attribution without its rule parameter)', () => {
    expect(refusal([], ['(func (export "kwp_attribution") (param i32) (result i32) (i32.const 0))']).code).toBe('KWP_ERR_EXPORT_SIGNATURE');
  });

  it('an optional export name used for a global is refused: the host would call it', () => {
    const { code, message } = refusal([], ['(global (export "kwp_decision_cache_stats") i32 (i32.const 0))']);
    expect(code).toBe('KWP_ERR_EXPORT_SIGNATURE');
    expect(message).toContain('is a global');
  });

  it('an import re-exported under an ABI name is checked by the import\'s type', () => {
    const { code } = refusal(['kwp_alloc'], ['(export "kwp_alloc" (func $log))'], ['(import "kwp" "log" (func $log (param i32 i32 i32)))']);
    expect(code).toBe('KWP_ERR_EXPORT_SIGNATURE');
  });

  it('a module whose exports have the ABI types, optional ones included, loads and decides', () => {
    const bytes = sandboxModule({ fields: ['(func (export "kwp_attribution") (param i32 i32) (result i32) (i32.const 0))', '(func (export "kwp_decision_cache_stats") (result i32) (i32.const 0))'] });
    const inst = new EvaluatorInstance(compileEvaluator(bytes, { source: 'exports.wasm' }));
    expect(inst.decideOne(new Uint8Array(64))).toBe(0);
  });
});
