// Profiling aid: builds the built-in evaluators with a name section (asc
// --debug, same -O3) into <out>, and fills <out>/.instrumented with their
// fuel-instrumented forms emitted with debug info, so a --cpu-prof of the bench
// shows evaluator function names instead of wasm-function[N].
//   node bench/tools/named-wasm.mjs /tmp/named network-policy cluster-network-policy ...
//   KWP_BENCH_WASM_DIR=/tmp/named node --cpu-prof dist/bench/profile.js default
// Needs `npm run build` first (it uses dist/host/runtime/fuel-rewrite.js).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import asc from 'assemblyscript/asc';
import binaryen from 'binaryen';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
// The rewrite runs on this script's binaryen, whose debug-info switch (set
// below) keeps the names; the host's instrumentFuel would use a fresh binaryen.
const { rewriteForFuel, instrumentedFileName } = await import(join(root, 'dist', 'host', 'runtime', 'fuel-rewrite.js'));
const { DEFAULT_LIMITS } = await import(join(root, 'dist', 'host', 'runtime', 'limits.js'));
const [out, ...names] = process.argv.slice(2);
if (!out || names.length === 0) {
  console.error('usage: node bench/tools/named-wasm.mjs <out-dir> <evaluator> [<evaluator> ...]');
  process.exit(2);
}
mkdirSync(join(out, '.instrumented'), { recursive: true });
binaryen.setDebugInfo(true);
for (const name of names) {
  const target = join(out, `${name}.wasm`);
  let stderr = '';
  // The memory flags are scripts/build-wasm.mjs's EVALUATOR_FLAGS: a module that defines its own memory
  // keeps a fixed cap and the call fuel of that cap, too little to feed the default scale.
  const args = [join(root, 'evaluators', name, 'index.ts'), '--config', join(root, 'asconfig.json'), '--transform', join(root, 'sdk', 'transform.mjs'), '-o', target, '--debug', '-O3', '--importMemory', '--maximumMemory', '65536'];
  const { error } = await asc.main(args, { stderr: { write: (s) => { stderr += s; } } });
  if (error) { console.error(`${name}: ${stderr}`); process.exit(1); }
  const bytes = readFileSync(target);
  const sha = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(out, '.instrumented', instrumentedFileName(sha, DEFAULT_LIMITS.fuelPerCall)), rewriteForFuel(binaryen, bytes, DEFAULT_LIMITS.fuelPerCall));
  console.log(`${target} (${bytes.length} bytes, named)`);
}
