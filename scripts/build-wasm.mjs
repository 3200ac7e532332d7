// Builds every WebAssembly module the project ships or tests with:
//   evaluators/<name>/index.ts      -> dist/wasm/<name>.wasm   (built-in evaluators)
//   sdk/examples/<name>/assembly/index.ts -> dist/wasm/examples/<name>.wasm
//   test/fixtures/wasm/*.wat        -> dist/wasm/fixtures/<name>.wasm (sandbox fixtures)
//   test/fixtures/wasm/<name>/index.ts -> dist/wasm/fixtures/<name>.wasm
// A module is rebuilt only when a source it may depend on is newer than it.
import { readdirSync, statSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { join, dirname, relative, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import asc from 'assemblyscript/asc';
import binaryen from 'binaryen';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'wasm');
const transform = join(root, 'sdk', 'transform.mjs');
const force = process.argv.includes('--force');

function newest(dir) {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) { if (e.name !== 'node_modules' && e.name !== 'build') t = Math.max(t, newest(p)); }
    else if (/\.(ts|json|mjs)$/.test(e.name) && !e.name.endsWith('.test.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

const sdkTime = Math.max(newest(join(root, 'sdk')), statSync(join(root, 'asconfig.json')).mtimeMs);
// Evaluators share code (evaluators/cluster-common) and test fixtures re-export
// evaluators, so any change under evaluators/ rebuilds every module built from it.
const evaluatorsTime = newest(join(root, 'evaluators'));

function upToDate(target, srcDir) {
  if (force || !existsSync(target)) return false;
  return statSync(target).mtimeMs >= Math.max(sdkTime, newest(srcDir));
}

async function compileAS(entry, target, extra = []) {
  mkdirSync(dirname(target), { recursive: true });
  // Write beside the target and rename, so a concurrent reader (another build,
  // a test) never sees a half-written module.
  const tmp = `${target}.${process.pid}.tmp`;
  const args = [entry, '--config', join(root, 'asconfig.json'), '--transform', transform, '-o', tmp, ...extra];
  let stderr = '';
  const { error } = await asc.main(args, { stderr: { write: (s) => { stderr += s; } } });
  if (error) throw new Error(`building ${entry} failed:\n${stderr}`);
  renameSync(tmp, target);
}

const jobs = [];
/** A build step with the path it writes, for the progress lines. */
function addJob(target, run) {
  run.label = target.slice(root.length + 1);
  jobs.push(run);
}
// The built-in evaluators import their memory, so the host sizes each stage's
// cap to the state it delivers (host/runtime/memory-cap.ts) instead of the
// fixed maximum a defined memory would carry in the binary.
const EVALUATOR_FLAGS = ['--importMemory', '--maximumMemory', '65536'];
const evalDir = join(root, 'evaluators');
for (const name of readdirSync(evalDir)) {
  const entry = join(evalDir, name, 'index.ts');
  if (!existsSync(entry)) continue;
  const target = join(out, `${name}.wasm`);
  if (!upToDate(target, evalDir)) addJob(target, () => compileAS(entry, target, EVALUATOR_FLAGS));
}
const exDir = join(root, 'sdk', 'examples');
if (existsSync(exDir)) for (const name of readdirSync(exDir)) {
  const entry = join(exDir, name, 'assembly', 'index.ts');
  if (!existsSync(entry)) continue;
  const target = join(out, 'examples', `${name}.wasm`);
  if (!upToDate(target, join(exDir, name))) addJob(target, () => compileAS(entry, target));
}
const fixDir = join(root, 'test', 'fixtures', 'wasm');
if (existsSync(fixDir)) for (const e of readdirSync(fixDir, { withFileTypes: true })) {
  if (e.isFile() && e.name.endsWith('.wat')) {
    const src = join(fixDir, e.name);
    const target = join(out, 'fixtures', e.name.replace(/\.wat$/, '.wasm'));
    if (!force && existsSync(target) && statSync(target).mtimeMs >= statSync(src).mtimeMs) continue;
    addJob(target, async () => {
      const mod = binaryen.parseText(readFileSync(src, 'utf8'));
      mod.setFeatures(binaryen.Features.All);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(`${target}.${process.pid}.tmp`, mod.emitBinary());
      renameSync(`${target}.${process.pid}.tmp`, target);
      mod.dispose();
    });
  } else if (e.isDirectory() && existsSync(join(fixDir, e.name, 'index.ts'))) {
    const target = join(out, 'fixtures', `${e.name}.wasm`);
    const flags = existsSync(join(fixDir, e.name, 'asc-flags.json'))
      ? JSON.parse(readFileSync(join(fixDir, e.name, 'asc-flags.json'), 'utf8')) : [];
    const stale = !upToDate(target, join(fixDir, e.name)) || (existsSync(target) && statSync(target).mtimeMs < evaluatorsTime);
    if (stale) addJob(target, () => compileAS(join(fixDir, e.name, 'index.ts'), target, flags));
  }
}

// asc is CPU-bound and single-threaded; running two at once keeps both cores busy.
// Each module prints a line when it is done: a full build takes about a minute.
let failed = false;
let done = 0;
async function worker() {
  while (jobs.length) {
    const job = jobs.shift();
    const t0 = Date.now();
    try {
      await job();
      console.log(`build:wasm: [${++done}/${count}] ${job.label} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (err) { failed = true; done++; console.error(err.message); }
  }
}
const started = Date.now();
const count = jobs.length;
if (count) console.log(`build:wasm: building ${count} module(s) into ${out}, two at a time`);
await Promise.all([worker(), worker()]);
if (failed) process.exit(1);
console.log(`build:wasm: ${count} module(s) built in ${Date.now() - started} ms`);

// The built-in evaluators' fuel-instrumented forms, written into the cache the
// loader reads (BuiltinModules: dist/wasm/.instrumented), so an agent running
// only built-ins never loads binaryen. Cache entries are named by content hash,
// start fuel and rewrite version, so an existing entry is never stale. The
// rewrite and the default limits are the host's own TypeScript, transpiled
// here before tsc has run into a scratch directory (the rewrite imports its
// fuel-charges and bulk-metering siblings, and the limits host/abi/record.ts,
// so each sits at its place under host/ as a .js file); none of them imports
// anything else.
async function importTs(...files) {
  const { default: ts } = await import('typescript');
  const dir = mkdtempSync(join(tmpdir(), 'kwp-build-wasm-'));
  try {
    for (const file of files) {
      const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
        fileName: file,
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      });
      // Each file keeps its place under host/, so relative imports between them resolve.
      const target = join(dir, relative(join(root, 'host'), file).replace(/\.ts$/, '.js'));
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, outputText);
    }
    return await import(pathToFileURL(join(dir, relative(join(root, 'host'), files[0]).replace(/\.ts$/, '.js'))).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const cacheDir = join(out, '.instrumented');
const builtins = existsSync(out) ? readdirSync(out).filter((f) => f.endsWith('.wasm')) : [];
if (builtins.length) {
  const { rewriteForFuel, instrumentedFileName } = await importTs(join(root, 'host', 'runtime', 'fuel-rewrite.ts'), join(root, 'host', 'runtime', 'bulk-metering.ts'), join(root, 'host', 'runtime', 'fuel-charges.ts'));
  const { DEFAULT_LIMITS } = await importTs(join(root, 'host', 'runtime', 'limits.ts'), join(root, 'host', 'abi', 'record.ts'));
  let written = 0;
  for (const f of builtins) {
    const bytes = readFileSync(join(out, f));
    const sha = createHash('sha256').update(bytes).digest('hex');
    const target = join(cacheDir, instrumentedFileName(sha, DEFAULT_LIMITS.fuelPerCall));
    if (existsSync(target)) continue;
    try {
      mkdirSync(cacheDir, { recursive: true });
      writeFileSync(`${target}.${process.pid}.tmp`, rewriteForFuel(binaryen, bytes, DEFAULT_LIMITS.fuelPerCall));
      renameSync(`${target}.${process.pid}.tmp`, target);
      written++;
    } catch (err) {
      console.error(`instrumenting ${f} failed: ${err.message}`);
      process.exit(1);
    }
  }
  if (written) console.log(`build:wasm: ${written} built-in module(s) fuel-instrumented into ${cacheDir}`);
}
