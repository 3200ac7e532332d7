import { describe, it, expect, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { compileEvaluator } from './loader.js';
import { instrumentFuel, instrumentedFileName, prepareInstrumenter } from './fuel.js';
import { helpersStarted } from './instrument-helper.js';
import { EvaluatorInstance } from './instance.js';
import { DEFAULT_LIMITS } from './limits.js';
import { builtinWasmDir } from '../pipeline/modules.js';
import { sandboxModule, INFINITE_LOOP } from '../../test/fixtures/sandbox-modules.js';
import { codeOf } from '../../test/fixtures/error-code.js';

const scratch = mkdtempSync(join(tmpdir(), 'kwp-fuel-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(scratch, `cache-${dirs++}`);

// Loads this directory's TypeScript in a plain Node process (no vitest, whose
// own dependencies could bring binaryen in) and records every resolution of
// the specifier "binaryen", which is the module graph evidence we want.
function runProbe(script: string, env: Record<string, string>): { stdout: string; resolvedBinaryen: number } {
  const log = join(scratch, `resolve-${dirs++}.log`);
  writeFileSync(log, '');
  const tsUrl = pathToFileURL(createRequire(import.meta.url).resolve('typescript')).href;
  const hooks = `
import ts from ${JSON.stringify(tsUrl)};
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
export async function resolve(specifier, context, next) {
  if (specifier === 'binaryen') appendFileSync(${JSON.stringify(log)}, 'binaryen\\n');
  if (specifier.endsWith('.js') && context.parentURL?.endsWith('.ts')) {
    const ts = new URL(specifier.slice(0, -3) + '.ts', context.parentURL);
    if (ts.protocol === 'file:' && existsSync(fileURLToPath(ts))) return { url: ts.href, shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const file = fileURLToPath(url);
  const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { fileName: file, compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
  return { format: 'module', source: outputText, shortCircuit: true };
}`;
  const here = (f: string) => JSON.stringify(new URL(f, import.meta.url).href);
  const program = `
import { register } from 'node:module';
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});
const loader = await import(${here('./loader.ts')});
const fuel = await import(${here('./fuel.ts')});
const helper = await import(${here('./instrument-helper.ts')});
${script}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', program], { env: { ...process.env, ...env }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`probe failed (${r.status}): ${r.stderr}`);
  return { stdout: r.stdout.trim(), resolvedBinaryen: readFileSync(log, 'utf8').split('\n').filter(Boolean).length };
}

describe('binaryen is loaded only when a module must be instrumented', () => {
  it('compiling a module whose instrumented form is cached never loads binaryen', () => {
    const cache = freshDir();
    const file = join(scratch, 'module.wasm');
    const bytes = sandboxModule();
    writeFileSync(file, bytes);
    compileEvaluator(bytes, { source: 'primer', instrumentationCache: cache });

    const cached = runProbe(`
const c = loader.compileEvaluator((await import('node:fs')).readFileSync(process.env.MODULE), { source: 'probe', instrumentationCache: process.env.CACHE });
process.stdout.write(JSON.stringify({ name: c.meta.name, helpers: helper.helpersStarted() }));`, { MODULE: file, CACHE: cache });
    expect(JSON.parse(cached.stdout)).toEqual({ name: 'sandbox-fixture', helpers: 0 });
    expect(cached.resolvedBinaryen).toBe(0);

    // The same probe sees binaryen as soon as someone asks for it.
    const prepared = runProbe('await fuel.prepareInstrumenter();', {});
    expect(prepared.resolvedBinaryen).toBeGreaterThan(0);
  }, 90_000); // two plain Node processes that transpile the loader's TypeScript

  it('a cache miss still instruments the module, fills the cache and the module runs out of fuel', () => {
    const cache = freshDir();
    const bytes = sandboxModule({ decideBody: INFINITE_LOOP });
    const compiled = compileEvaluator(bytes, { source: 'spin', limits: { fuelPerDecision: 100_000 }, instrumentationCache: cache });
    expect(readdirSync(cache)).toEqual([instrumentedFileName(compiled.sha256, DEFAULT_LIMITS.fuelPerCall)]);
    const inst = new EvaluatorInstance(compiled);
    expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });

  it('without a prepared instrumenter a miss is instrumented on a helper thread, and its failures are KWP_ERR_INSTRUMENTATION', () => {
    expect(codeOf(() => instrumentFuel(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0xff, 0xff]), 1000))).toBe('KWP_ERR_INSTRUMENTATION');
    expect(helpersStarted()).toBeGreaterThan(0);
  });
});

describe('after prepareInstrumenter', () => {
  it('a cache miss is instrumented in this thread, without a helper, and still runs out of fuel', async () => {
    await prepareInstrumenter();
    const helpers = helpersStarted();
    const compiled = compileEvaluator(sandboxModule({ decideBody: INFINITE_LOOP }), { source: 'spin', limits: { fuelPerDecision: 100_000 } });
    expect(helpersStarted()).toBe(helpers);
    expect(codeOf(() => new EvaluatorInstance(compiled).decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });
});

describe('the build', () => {
  it("leaves every built-in evaluator's instrumented form in the cache the built-in resolver reads", () => {
    const dir = builtinWasmDir();
    const builtins = readdirSync(dir).filter((f) => f.endsWith('.wasm'));
    expect(builtins.length).toBeGreaterThan(0);
    for (const f of builtins) {
      const sha = createHash('sha256').update(readFileSync(join(dir, f))).digest('hex');
      const entry = join(dir, '.instrumented', instrumentedFileName(sha, DEFAULT_LIMITS.fuelPerCall));
      expect(existsSync(entry), `${f}: no cache entry; run npm run build`).toBe(true);
      const exports = WebAssembly.Module.exports(new WebAssembly.Module(readFileSync(entry)));
      expect(exports, f).toContainEqual({ name: 'kwp_fuel', kind: 'global' });
    }
  });
});
