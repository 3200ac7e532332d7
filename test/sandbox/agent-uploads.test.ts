// Issue 14, imports and uploads: hostile uploads to a real `kwp agent
// --dataplane=off` over HTTP — every allow-listed import with every kind of
// wrong signature or kind, malformed binaries, counts of billions in a few
// bytes, modules that fail only when instantiated, many client addresses —
// each refused with its own code within the bound, while /healthz answers
// within 1 s throughout and the agent lives within its memory bound.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { sandboxModule, DEFAULT_META } from '../fixtures/sandbox-modules.js';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';

/** Refusing an upload: static checks, instrumentation and the self-test in the validation process, on a loaded machine. */
const UPLOAD_BOUND_MS = 20_000;

let agent: AgentProcess;
beforeAll(async () => { agent = await AgentProcess.start(BASIC_MANIFESTS); }, 120_000);
afterAll(() => agent?.stop());

/** Uploads under the fixtures' kwp.meta name, so that what refuses is the hostile part. */
async function refused(bytes: Uint8Array, name = DEFAULT_META.name) {
  const { result, health } = await agent.during(() => agent.uploadPatiently(bytes, name, '0.0.1'));
  expect(result.ms).toBeLessThan(UPLOAD_BOUND_MS);
  expectBounded(agent, health);
  return result;
}

const ALLOWED_FUNCTIONS = [['kwp', 'log', 3], ['env', 'abort', 4]] as const;
const i32s = (n: number) => Array(n).fill('i32').join(' ');
/** Every way a function import can differ from the ABI's (i32 × n) -> nil. */
const wrongTypes = (n: number): Array<[string, string]> => [
  ['one parameter too few', `(param ${i32s(n - 1)})`],
  ['one parameter too many', `(param ${i32s(n + 1)})`],
  ['no parameters', ''],
  ['an i64 first parameter', `(param i64 ${i32s(n - 1)})`],
  ['f32 parameters', `(param ${Array(n).fill('f32').join(' ')})`],
  ['f64 parameters', `(param ${Array(n).fill('f64').join(' ')})`],
  ['an externref parameter', `(param externref ${i32s(n - 1)})`],
  ['an i32 result', `(param ${i32s(n)}) (result i32)`],
  ['an f64 result', `(param ${i32s(n)}) (result f64)`],
  ['two results', `(param ${i32s(n)}) (result i32 i32)`],
];

describe('every allow-listed import must be declared exactly as the ABI defines it', () => {
  const cases = ALLOWED_FUNCTIONS.flatMap(([mod, name, n]) => wrongTypes(n).map(([what, type]) => [`${mod}.${name}`, what, `(import "${mod}" "${name}" (func ${type}))`] as const));
  it.each(cases)('%s with %s: 422 KWP_ERR_IMPORT_SIGNATURE naming the import', async (name, _what, line) => {
    const res = await refused(sandboxModule({ imports: [line], features: 'node20' }));
    expect(res.status).toBe(422);
    expect(res.json.code, JSON.stringify(res.json)).toBe('KWP_ERR_IMPORT_SIGNATURE');
    expect(res.json.message).toContain(`import ${name} has type`);
  }, 60_000);

  it.each([
    ['kwp.log imported as a global', '(import "kwp" "log" (global i32))'],
    ['env.abort imported as a table', '(import "env" "abort" (table 1 1 funcref))'],
    ['env.memory imported as a function', '(import "env" "memory" (func (param i32)))'],
    ['kwp.fuel, a name the host keeps for itself', '(import "kwp" "fuel" (global (mut i32)))'],
  ])('%s: 422 KWP_ERR_IMPORT_NOT_ALLOWED', async (_what, line) => {
    const res = await refused(sandboxModule({ imports: [line], features: 'node20' }));
    expect(res.status).toBe(422);
    expect(res.json.code, JSON.stringify(res.json)).toBe('KWP_ERR_IMPORT_NOT_ALLOWED');
  }, 60_000);

  it('a module whose only import is kwp.log is accepted whatever the order of its imports, and its log line reaches the agent log', async () => {
    const bytes = sandboxModule({
      imports: ['(import "kwp" "log" (func $log (param i32 i32 i32)))'],
      memory: '(memory (export "memory") 1 16) (data (i32.const 0) "imported-first")',
      meta: { ...DEFAULT_META, name: 'logs-first' },
      decideBody: '(call $log (i32.const 3) (i32.const 0) (i32.const 14)) (i32.const 0)',
    });
    const up = await agent.uploadPatiently(bytes, 'logs-first', '0.0.1');
    expect(up.status, JSON.stringify(up.json)).toBe(201);
    expect((await agent.request('PUT', '/v1/pipeline', { stages: [{ name: 'logs', module: 'logs-first' }] })).status).toBe(200);
    expect((await agent.explain('x/a', 'x/b', 80)).status).toBe(200);
    const deadline = Date.now() + 10_000;
    while (!agent.log.includes('imported-first') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(agent.log).toContain('imported-first');
  }, 60_000);
});

const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const leb = (n: number) => { const out: number[] = []; do { let b = n & 0x7f; n = Math.floor(n / 128); if (n) b |= 0x80; out.push(b); } while (n); return out; };
const section = (id: number, body: number[]) => [id, ...leb(body.length), ...body];
const SECTIONS = { type: 1, import: 2, function: 3, table: 4, memory: 5, global: 6, export: 7, element: 9, code: 10, data: 11 };

describe('malformed and self-destructing uploads are refused with a code of their own, never a 500', () => {
  const valid = sandboxModule();
  const cases: Array<[string, string, Uint8Array]> = [
    ['bytes that are not WebAssembly', 'KWP_ERR_MODULE_INVALID', new TextEncoder().encode('#!/bin/sh\nrm -rf /\n')],
    ['a valid module cut in half', 'KWP_ERR_MODULE_INVALID', valid.slice(0, valid.length >> 1)],
    ['a section declaring 256 MiB with three bytes after it', 'KWP_ERR_MODULE_INVALID', new Uint8Array([...HEADER, 1, ...leb(0xfffffff), 1, 2, 3])],
    ['an over-long LEB128 size', 'KWP_ERR_MODULE_INVALID', new Uint8Array([...HEADER, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])],
    ...Object.entries(SECTIONS).map(([name, id]) => [`a ${name} section declaring 4 billion entries in 5 bytes`, 'KWP_ERR_MODULE_INVALID', new Uint8Array([...HEADER, ...section(id, leb(0xffffffff))])] as [string, string, Uint8Array]),
    ['a custom section whose name claims 4 GiB', 'KWP_ERR_MODULE_INVALID', new Uint8Array([...HEADER, ...section(0, leb(0xffffffff))])],
    ['just the WebAssembly header', 'KWP_ERR_ABI_VERSION', new Uint8Array(HEADER)],
    ['two kwp.meta sections', 'KWP_ERR_METADATA', withCustom(valid, 'kwp.meta', JSON.stringify({ ...DEFAULT_META, name: 'second' }))],
    ['a kwp.meta that is not JSON', 'KWP_ERR_METADATA', withCustom(sandboxModule({ meta: null }), 'kwp.meta', '{"name": ')],
    ['a shared memory', 'KWP_ERR_MEMORY_UNBOUNDED', sandboxModule({ memory: '(memory (export "memory") 1 16 shared)' })],
    ['a data segment past the end of memory', 'KWP_ERR_INSTANTIATE', sandboxModule({ memory: '(memory (export "memory") 1 16) (data (i32.const 65530) "0123456789")' })],
    ['an element segment past the end of its table', 'KWP_ERR_INSTANTIATE', sandboxModule({ fields: ['(table 2 2 funcref)', '(func $f)', '(elem (i32.const 5) $f)'], features: 'node20' })],
    ['a start function that traps', 'KWP_ERR_INSTANTIATE', sandboxModule({ startBody: '(unreachable)' })],
    // Exception handling: a throw costs far more than fuel counts, and a catch_all catches env.abort's error (host/runtime/bulk-metering.ts).
    ['a loop catching env.abort\'s error', 'KWP_ERR_INSTRUMENTATION', sandboxModule({
      imports: ['(import "env" "abort" (func $abort (param i32 i32 i32 i32)))'], features: 'node20',
      decideBody: '(loop $l (try (do (call $abort (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 2))) (catch_all)) (br $l)) (i32.const 0)' })],
    ['a loop throwing and catching its own tag', 'KWP_ERR_INSTRUMENTATION', sandboxModule({ fields: ['(tag $t)'], features: 'node20', decideBody: '(loop $l (try (do (throw $t)) (catch_all)) (br $l)) (i32.const 0)' })],
    ['a kwp_batch returning an f64', 'KWP_ERR_EXPORT_SIGNATURE', sandboxModule({ omitExports: ['kwp_batch'], fields: ['(func (export "kwp_batch") (result f64) (f64.const 4096.5))'] })],
    ['a kwp_decide taking an i64', 'KWP_ERR_EXPORT_SIGNATURE', sandboxModule({ omitExports: ['kwp_decide'], fields: ['(func (export "kwp_decide") (param i64) (result i32) (i32.const 0))'] })],
    ['a kwp_batch pointing past the end of memory', 'KWP_ERR_SELF_TEST', sandboxModule({ fields: [] , omitExports: ['kwp_batch'], memory: '(memory (export "memory") 1 16) (func (export "kwp_batch") (result i32) (i32.const 0x7ffffff0))' })],
  ];
  it.each(cases)('%s: %s', async (_what, code, bytes) => {
    const res = await refused(bytes);
    // 400 for bytes that are not a module at all, 422 for a module the host will not run (docs/errors.md).
    expect([400, 422]).toContain(res.status);
    expect(res.json.code, JSON.stringify(res.json)).toBe(code);
  }, 60_000);

  it('nothing refused was stored', async () => {
    const names = (await agent.request('GET', '/v1/modules')).json.modules.map((m: { name: string }) => m.name);
    expect(names).toEqual(['logs-first']);
  });
});

describe('a client with many addresses is held to the upload bucket all clients share', () => {
  it('40 uploads at once from 40 addresses: at most the global burst is let through, the rest get 429 naming the shared bucket', async () => {
    const garbage = new TextEncoder().encode('not a module');
    const { result, health } = await agent.during(() => Promise.all(Array.from({ length: 40 }, (_, i) => agent.upload(garbage, 'many', '0.0.1', `127.1.${i >> 8}.${1 + (i & 0xff)}`))));
    const limited = result.filter((r) => r.status === 429);
    expect(result.filter((r) => r.status === 422).length).toBeLessThanOrEqual(20 + 2);
    expect(limited.length).toBeGreaterThanOrEqual(40 - 20 - 2);
    // Of those the shared bucket let through, the ones past the validation queue's bound are refused too (429, MAX_WAITING_UPLOADS).
    expect(limited.some((r) => /from all clients together/.test(r.json.message)), JSON.stringify(limited.map((r) => r.json.message))).toBe(true);
    expect(limited.every((r) => /from all clients together|waiting for it/.test(r.json.message))).toBe(true);
    expectBounded(agent, health);
  }, 60_000);
});

/** `bytes` with one more custom section. */
function withCustom(bytes: Uint8Array, name: string, text: string): Uint8Array {
  const n = new TextEncoder().encode(name);
  const body = [...leb(n.length), ...n, ...new TextEncoder().encode(text)];
  return new Uint8Array([...bytes, ...section(0, body)]);
}
