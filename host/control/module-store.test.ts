import { loggerOf } from '../logger.js';
import { describe, it, expect, beforeEach, vi } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync, readdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { ModuleStore, type ModuleStoreOptions } from './module-store.js';
import { signModule, sha256Hex } from './signature.js';
import { KwpError } from '../errors.js';
import { builtinWasmDir } from '../pipeline/modules.js';
import { sandboxModule, INFINITE_LOOP, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { codeOf, codeOfAsync } from '../../test/fixtures/error-code.js';
import { instrumentedFileName } from '../runtime/fuel.js';
import { DEFAULT_LIMITS } from '../runtime/limits.js';

// Counts the fuel rewrites of this thread (binaryen is never prepared here, so
// every instrumentation-cache miss goes through the helper), passing them on.
const rewrites = vi.hoisted(() => ({ count: 0 }));
vi.mock('../runtime/instrument-helper.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../runtime/instrument-helper.js')>();
  return { ...real, rewriteOnHelper: (bytes: Uint8Array, startFuel: number) => { rewrites.count++; return real.rewriteOnHelper(bytes, startFuel); } };
});

const scriptedBytes = () => readFileSync(join(builtinWasmDir(), 'fixtures', 'scripted.wasm'));
const named = (name: string, version: string, extra: Parameters<typeof sandboxModule>[0] = {}) =>
  sandboxModule({ meta: { ...DEFAULT_META, name, version }, ...extra });



let stateDir: string;
const open = (extra: Partial<ModuleStoreOptions> = {}) => new ModuleStore({ stateDir, validation: 'inline', ...extra });
beforeEach(() => { stateDir = mkdtempSync(join(tmpdir(), 'kwp-store-')); });

describe('uploads are validated in order and stored content-addressed', () => {
  it('a valid module is stored under its sha256 and resolves by name and by name@version', async () => {
    const store = open();
    const bytes = scriptedBytes();
    const { module, created } = await store.add(bytes, { name: 'scripted', version: '1.0.0' });
    expect(created).toBe(true);
    expect(module).toMatchObject({ name: 'scripted', version: '1.0.0', sha256: sha256Hex(bytes), size: bytes.length, abi: '1.4', usedBy: [] });
    expect(existsSync(join(stateDir, 'modules', `${module.sha256}.wasm`))).toBe(true);
    expect(store.resolve('scripted')?.sha256).toBe(module.sha256);
    expect(store.resolve('scripted@1.0.0')?.sha256).toBe(module.sha256);
    expect(store.resolve('scripted@2.0.0')).toBeUndefined();
  });

  it('uploading the same bytes twice is idempotent', async () => {
    const store = open();
    const first = await store.add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    const again = await store.add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    expect(again.created).toBe(false);
    expect(again.module.sha256).toBe(first.module.sha256);
    expect(store.list()).toHaveLength(1);
    expect(store.uploadOutcomes.get('stored')).toBe(1);
    expect(store.uploadOutcomes.get('unchanged')).toBe(1);
  });

  it('resolving a bare name picks the newest version by version order, not upload order', async () => {
    const store = open();
    for (const v of ['1.10.0', '1.9.0', '1.10.0-rc.1']) await store.add(named('multi', v), { name: 'multi', version: v });
    expect(store.resolve('multi')?.meta.version).toBe('1.10.0');
    expect(store.get('multi').map((m) => m.version)).toEqual(['1.10.0', '1.10.0-rc.1', '1.9.0']);
  });

  const slowStart = '(loop $l (global.set $sink (i32.add (global.get $sink) (i32.const 1))) (br $l))';
  const refusals: Array<[string, string, () => Uint8Array, string, Partial<ModuleStoreOptions>?]> = [
    ['bytes that are not WebAssembly', 'junk', () => new TextEncoder().encode('not wasm at all'), 'KWP_ERR_MODULE_INVALID'],
    ['a module over the size cap', 'big', () => named('big', '1.0.0'), 'KWP_ERR_MODULE_TOO_LARGE', { limits: { maxModuleBytes: 100 } }],
    ['a module speaking ABI 2', 'abi2', () => named('abi2', '1.0.0', { abiVersion: 0x00020000 }), 'KWP_ERR_ABI_VERSION'],
    ['a module importing a WASI function', 'wasi', () => named('wasi', '1.0.0', { imports: ['(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))'] }), 'KWP_ERR_IMPORT_NOT_ALLOWED'],
    ['a module whose memory has no maximum', 'nomax', () => named('nomax', '1.0.0', { memory: '(memory (export "memory") 1)' }), 'KWP_ERR_MEMORY_UNBOUNDED'],
    ['a module without kwp_decide', 'nodecide', () => named('nodecide', '1.0.0', { omitExports: ['kwp_decide'] }), 'KWP_ERR_EXPORT_MISSING'],
    ['a module whose start function traps', 'starttrap', () => named('starttrap', '1.0.0', { startBody: '(unreachable)' }), 'KWP_ERR_INSTANTIATE'],
    ['a module whose self-test decision traps', 'traps', () => named('traps', '1.0.0', { decideBody: '(unreachable)' }), 'KWP_ERR_SELF_TEST'],
    ['a module whose self-test decision never ends', 'loops', () => named('loops', '1.0.0', { decideBody: INFINITE_LOOP }), 'KWP_ERR_SELF_TEST'],
    ['a module whose start function outlasts the self-test deadline', 'slow', () => named('slow', '1.0.0', { startBody: slowStart }), 'KWP_ERR_SELF_TEST', { limits: { fuelPerCall: 0x7fffffff }, selfTestTimeoutMs: 50 }],
  ];
  it.each(refusals)('%s is refused and nothing is stored', async (_title, name, build, code, options) => {
    const store = open(options);
    const started = Date.now();
    expect(await codeOfAsync(store.add(build(), { name, version: '1.0.0' }))).toBe(code);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(store.list()).toEqual([]);
    expect(readdirSync(join(stateDir, 'modules')).filter((f) => f.endsWith('.wasm'))).toEqual([]);
    expect(store.uploadOutcomes.get(code)).toBe(1);
  });

  it('a self-test that outlasts its deadline says so', async () => {
    const store = open({ limits: { fuelPerCall: 0x7fffffff }, selfTestTimeoutMs: 50 });
    await expect(store.add(named('slow', '1.0.0', { startBody: slowStart }), { name: 'slow', version: '1.0.0' }))
      .rejects.toThrowError(/upload slow@1\.0\.0: instantiation did not finish within 50 ms/);
  });

  it('the name and version in the request must equal kwp.meta', async () => {
    const store = open();
    expect(await codeOfAsync(store.add(scriptedBytes(), { name: 'other', version: '1.0.0' }))).toBe('KWP_ERR_NAME_MISMATCH');
    await expect(store.add(scriptedBytes(), { name: 'scripted', version: '9.9.9' })).rejects.toThrowError(/kwp\.meta says scripted@1\.0\.0; upload it with name=scripted&version=1\.0\.0/);
  });

  it('different bytes under a stored name and version are a conflict', async () => {
    const store = open();
    await store.add(named('dup', '1.0.0'), { name: 'dup', version: '1.0.0' });
    const other = named('dup', '1.0.0', { decideBody: '(i32.const 1)' });
    expect(await codeOfAsync(store.add(other, { name: 'dup', version: '1.0.0' }))).toBe('KWP_ERR_MODULE_CONFLICT');
  });

  it('every built-in evaluator passes the upload gates', async () => {
    const store = open();
    const files = readdirSync(builtinWasmDir()).filter((f) => f.endsWith('.wasm'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const bytes = readFileSync(join(builtinWasmDir(), f));
      const request = { name: f.slice(0, -5), version: versionIn(bytes) };
      // Modules that need a config (a tier, a cluster id) refuse {}; the uploader names one for the self-test.
      let result;
      for (const selfTestConfig of [{}, { tier: 'Admin' }, { clusterId: 'east' }]) {
        try {
          result = await store.add(bytes, { ...request, selfTestConfig });
          break;
        } catch (err) {
          expect((err as KwpError).code, `${f} with ${JSON.stringify(selfTestConfig)}`).toBe('KWP_ERR_CONFIG_REJECTED');
          expect((err as Error).message).toMatch(/give a config it accepts for the self-test/);
        }
      }
      expect(result, `${f}: no self-test config was accepted`).toBeDefined();
      expect(result!.created).toBe(true);
    }
  });
});

function versionIn(bytes: Uint8Array): string {
  return /"version"\s*:\s*"([^"]+)"/.exec(Buffer.from(bytes).toString('latin1'))![1];
}

describe('signed uploads', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');

  it('with trusted keys configured an unsigned upload is refused', async () => {
    const store = open({ trustedKeys: [publicKey] });
    expect(await codeOfAsync(store.add(scriptedBytes(), { name: 'scripted', version: '1.0.0' }))).toBe('KWP_ERR_SIGNATURE_REQUIRED');
  });

  it('a signature by a trusted key over bytes, name and version is accepted and recorded', async () => {
    const store = open({ trustedKeys: [other.publicKey, publicKey] });
    const bytes = scriptedBytes();
    const { module } = await store.add(bytes, { name: 'scripted', version: '1.0.0', signature: signModule(privateKey, bytes, 'scripted', '1.0.0') });
    expect(module.signedBy).toMatch(/^[0-9a-f]{16}$/);
  });

  it('a signature by an untrusted key is refused', async () => {
    const store = open({ trustedKeys: [publicKey] });
    const bytes = scriptedBytes();
    const signature = signModule(other.privateKey, bytes, 'scripted', '1.0.0');
    expect(await codeOfAsync(store.add(bytes, { name: 'scripted', version: '1.0.0', signature }))).toBe('KWP_ERR_SIGNATURE_INVALID');
  });

  it('a signature that is not base64 of 64 bytes is refused', async () => {
    const store = open({ trustedKeys: [publicKey] });
    expect(await codeOfAsync(store.add(scriptedBytes(), { name: 'scripted', version: '1.0.0', signature: 'bm90IGEgc2lnbmF0dXJl' }))).toBe('KWP_ERR_SIGNATURE_INVALID');
  });

  it('a signed build replayed under another name or version is refused before any other check', async () => {
    const store = open({ trustedKeys: [publicKey] });
    const v1 = named('replay', '1.0.0');
    const signature = signModule(privateKey, v1, 'replay', '1.0.0');
    expect(await codeOfAsync(store.add(v1, { name: 'renamed', version: '1.0.0', signature }))).toBe('KWP_ERR_SIGNATURE_INVALID');
    expect(await codeOfAsync(store.add(v1, { name: 'replay', version: '2.0.0', signature }))).toBe('KWP_ERR_SIGNATURE_INVALID');
    expect((await store.add(v1, { name: 'replay', version: '1.0.0', signature })).created).toBe(true);
  });
});

describe('listing, removing and persistence', () => {
  it('a module used by the active pipeline cannot be removed, an unused version can', async () => {
    const store = open();
    const a = (await store.add(named('pair', '1.0.0'), { name: 'pair', version: '1.0.0' })).module;
    await store.add(named('pair', '2.0.0'), { name: 'pair', version: '2.0.0' });
    store.registerUsage(() => [{ stage: 'first', sha256: a.sha256 }]);
    expect(store.get('pair').find((m) => m.version === '1.0.0')?.usedBy).toEqual(['first']);
    expect(codeOf(() => store.remove('pair'))).toBe('KWP_ERR_MODULE_IN_USE');
    expect(codeOf(() => store.remove('pair', '1.0.0'))).toBe('KWP_ERR_MODULE_IN_USE');
    expect(store.remove('pair', '2.0.0').map((m) => m.version)).toEqual(['2.0.0']);
    expect(store.list().map((m) => m.version)).toEqual(['1.0.0']);
    expect(codeOf(() => store.remove('absent'))).toBe('KWP_ERR_MODULE_NOT_FOUND');
    expect(codeOf(() => store.get('absent'))).toBe('KWP_ERR_MODULE_NOT_FOUND');
  });

  it('a new store on the same directory sees the same modules', async () => {
    const first = open();
    const { module } = await first.add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    const second = open();
    expect(second.list().map((m) => `${m.name}@${m.version}:${m.sha256}`)).toEqual([`scripted@1.0.0:${module.sha256}`]);
    expect(second.resolve('scripted')?.meta.name).toBe('scripted');
  });

  it('a corrupt index is kept aside, reported with its file name, and rebuilt from the module files', async () => {
    await open().add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    writeFileSync(join(stateDir, 'modules', 'index.json'), '{"version": 1, "modu');
    const logged: string[] = [];
    const store = open({ logger: loggerOf((level, message) => logged.push(`${level} ${message}`)) });
    expect(store.list().map((m) => m.name)).toEqual(['scripted']);
    expect(logged.join('\n')).toMatch(/^error .*modules\/index\.json: .*kept it as .*index\.json\.corrupt-\d+/m);
  });

  it('a second store on the same directory compiles the stored modules from the cache the upload filled, without instrumenting them', async () => {
    const before = rewrites.count;
    const { module } = await open().add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    expect(rewrites.count).toBe(before + 1);
    const second = open();
    expect(readdirSync(second.instrumentationCache)).toEqual([instrumentedFileName(module.sha256, DEFAULT_LIMITS.fuelPerCall)]);
    expect(second.resolve('scripted')?.meta.name).toBe('scripted');
    expect(rewrites.count).toBe(before + 1);
  });

  it('removing a module drops its cached instrumented form too', async () => {
    const store = open();
    await store.add(named('pair', '1.0.0'), { name: 'pair', version: '1.0.0' });
    const kept = (await store.add(named('pair', '2.0.0'), { name: 'pair', version: '2.0.0' })).module;
    store.remove('pair', '1.0.0');
    expect(readdirSync(store.instrumentationCache)).toEqual([instrumentedFileName(kept.sha256, DEFAULT_LIMITS.fuelPerCall)]);
  });

  it('a module file changed on disk is refused when resolved', async () => {
    const { module } = await open().add(scriptedBytes(), { name: 'scripted', version: '1.0.0' });
    writeFileSync(join(stateDir, 'modules', `${module.sha256}.wasm`), named('scripted', '1.0.0'));
    expect(codeOf(() => open().resolve('scripted'))).toBe('KWP_ERR_STATE_CORRUPT');
  });
});

describe('validation in a child process', () => {
  it('uploads are validated off the main thread with the same answers, and the main thread keeps running meanwhile', async () => {
    const store = open({ validation: 'worker' });
    try {
      const np = readFileSync(join(builtinWasmDir(), 'network-policy.wasm'));
      let ticks = 0;
      const timer = setInterval(() => { ticks++; }, 2);
      const { created, module } = await store.add(np, { name: 'network-policy', version: versionIn(np) });
      clearInterval(timer);
      expect(created).toBe(true);
      expect(ticks).toBeGreaterThan(0);
      expect(store.resolve('network-policy')?.sha256).toBe(module.sha256);
      expect(store.resolve('network-policy')?.module).toBeInstanceOf(WebAssembly.Module);

      expect(await codeOfAsync(store.add(new TextEncoder().encode('nope'), { name: 'junk', version: '1.0.0' }))).toBe('KWP_ERR_MODULE_INVALID');
      expect(await codeOfAsync(store.add(named('loops', '1.0.0', { decideBody: INFINITE_LOOP }), { name: 'loops', version: '1.0.0' }))).toBe('KWP_ERR_SELF_TEST');
      expect(await codeOfAsync(store.add(scriptedBytes(), { name: 'scripted', version: '2.0.0' }))).toBe('KWP_ERR_NAME_MISMATCH');
      const [a, b] = await Promise.all([
        store.add(named('twin', '1.0.0'), { name: 'twin', version: '1.0.0' }),
        store.add(named('twin', '1.0.0'), { name: 'twin', version: '1.0.0' }),
      ]);
      expect([a.created, b.created].sort()).toEqual([false, true]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it('inline validation holds the main thread for the whole upload', async () => {
    const store = open({ validation: 'inline' });
    let ticks = 0;
    const timer = setInterval(() => { ticks++; }, 1);
    const np = readFileSync(join(builtinWasmDir(), 'network-policy.wasm'));
    const pending = store.add(np, { name: 'network-policy', version: versionIn(np) });
    const ticksWhenAddReturned = ticks;
    await pending;
    clearInterval(timer);
    expect(ticksWhenAddReturned).toBe(0);
  });
});
