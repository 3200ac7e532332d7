#!/usr/bin/env node
// The mutation check of the sandbox limits (docs/sandbox.md, "Each limit
// fails its test when removed"): for every limit and bound in
// test/sandbox/limit-guards.json, copy the tree, apply the mutation that
// removes the limit (each `find` must occur exactly once, so a mutation that
// no longer matches the code is reported, not skipped), run the one guarding
// test, and expect it to fail. A guard that still passes is a defect of the
// test. Not part of `npm test`: it runs one vitest per limit (about 15 to 25
// minutes on a shared 2-core machine). Needs a built tree (`npm run build`).
//
//   node scripts/limit-mutations.mjs                 every entry
//   node scripts/limit-mutations.mjs maxTables ...   these entries (proof:time for a real-agent proof)
//   node scripts/limit-mutations.mjs --record        also rewrite the result table in docs/sandbox.md
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const record = args.includes('--record');
const only = args.filter((a) => !a.startsWith('--'));
const TIMEOUT_MS = Number(process.env.KWP_MUTATION_TIMEOUT_MS ?? 300_000);

const catalogue = JSON.parse(readFileSync(join(root, 'test/sandbox/limit-guards.json'), 'utf8'));
const entries = [...Object.entries(catalogue.limits), ...Object.entries(catalogue.bounds), ...Object.entries(catalogue.proofs).map(([cls, e]) => [`proof:${cls}`, { ...e, mutation: (catalogue.limits[e.removes] ?? catalogue.bounds[e.removes]).mutation }])]
  .filter(([name]) => only.length === 0 || only.includes(name));
const unknown = only.filter((n) => !(n in catalogue.limits) && !(n in catalogue.bounds) && !(n.startsWith('proof:') && n.slice(6) in catalogue.proofs));
if (unknown.length) {
  console.error(`unknown entries: ${unknown.join(', ')}`);
  process.exit(2);
}
if (!existsSync(join(root, 'dist/wasm/network-policy.wasm'))) {
  console.error('the tree is not built: run `npm run build` first');
  process.exit(2);
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Runs a command in `cwd`; resolves with its exit code, or 'timeout' after `ms` (the process group is killed). */
function run(cmd, argv, cwd, ms) {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (c) => { out = (out + c).slice(-4000); });
    child.stderr.on('data', (c) => { out = (out + c).slice(-4000); });
    const timer = setTimeout(() => {
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
      resolve({ code: 'timeout', out });
    }, ms);
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}

/** Runs the guard in `tree`; returns the tests that ran and how they ended. */
async function runGuard(tree, guard) {
  const report = join(tree, '.mutation-report.json');
  rmSync(report, { force: true });
  const r = await run(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', guard.file, '-t', escape(guard.test),
    '--reporter=json', `--outputFile=${report}`], tree, TIMEOUT_MS);
  if (r.code === 'timeout') return { outcome: 'timeout', passed: 0, failed: 0, out: r.out };
  if (!existsSync(report)) return { outcome: 'error', passed: 0, failed: 0, out: r.out };
  const json = JSON.parse(readFileSync(report, 'utf8'));
  const results = json.testResults.flatMap((f) => f.assertionResults);
  const passed = results.filter((t) => t.status === 'passed').length;
  // A file that failed outside its tests (a hook, a crash) counts as a failure too.
  const failed = results.filter((t) => t.status === 'failed').length + json.testResults.filter((f) => f.status === 'failed' && !f.assertionResults.some((t) => t.status === 'failed')).length;
  return { outcome: failed > 0 ? 'failed' : passed > 0 ? 'passed' : 'none', passed, failed, out: r.out };
}

function freshTree() {
  const tree = mkdtempSync(join(tmpdir(), 'kwp-mutation-'));
  cpSync(root, tree, {
    recursive: true,
    filter: (src) => {
      const rel = relative(root, src);
      return !(rel === 'node_modules' || rel === '.git' || rel.startsWith('node_modules/') || rel.startsWith('.git/'));
    },
  });
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  return tree;
}

function applyMutation(tree, mutation) {
  for (const edit of mutation) {
    const path = join(tree, edit.file);
    const text = readFileSync(path, 'utf8');
    const count = text.split(edit.find).length - 1;
    if (count !== 1) throw new Error(`${edit.file}: the mutation's text occurs ${count} times (expected once): ${JSON.stringify(edit.find)}`);
    writeFileSync(path, text.replace(edit.find, () => edit.replace));
  }
}

function restore(tree, mutation) {
  for (const edit of mutation) writeFileSync(join(tree, edit.file), readFileSync(join(root, edit.file)));
}

const tree = freshTree();
const rows = [];
try {
  for (const [name, entry] of entries) {
    const started = Date.now();
    let verdict;
    let detail = '';
    // The guard must pass on the tree as it is, or its failure under the mutation proves nothing.
    const before = await runGuard(tree, entry.guard);
    if (before.outcome !== 'passed') {
      verdict = 'guard broken';
      detail = `without the mutation: ${before.outcome} (${before.passed} passed, ${before.failed} failed)`;
    } else {
      try {
        applyMutation(tree, entry.mutation);
        if (entry.build) {
          const b = await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], tree, TIMEOUT_MS);
          // A mutation may leave a type error behind (a check made unreachable); tsc still emits (status 2), and the test runs the JavaScript.
          if (b.code !== 0 && b.code !== 2) throw new Error(`the mutated tree does not build: ${b.out.slice(-500)}`);
        }
        const after = await runGuard(tree, entry.guard);
        verdict = after.outcome === 'failed' || after.outcome === 'timeout' ? 'killed' : after.outcome === 'passed' ? 'SURVIVED' : `error (${after.outcome})`;
        detail = after.outcome === 'timeout' ? `the guard did not finish within ${TIMEOUT_MS / 1000} s` : `${after.failed} of ${after.passed + after.failed} matching tests failed`;
        if (verdict.startsWith('error')) detail += `: ${after.out.slice(-300)}`;
      } catch (err) {
        verdict = 'mutation stale';
        detail = err.message;
      } finally {
        restore(tree, entry.mutation);
        if (entry.build) await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], tree, TIMEOUT_MS);
      }
    }
    const seconds = Math.round((Date.now() - started) / 1000);
    rows.push({ name, verdict, detail, guard: entry.guard, seconds });
    console.log(`${verdict.padEnd(14)} ${name} (${seconds} s): ${detail}`);
  }
} finally {
  rmSync(tree, { recursive: true, force: true });
}

const table = [
  `Last run: ${new Date().toISOString().slice(0, 10)}, ${rows.filter((r) => r.verdict === 'killed').length} of ${rows.length} mutations killed.`,
  '',
  '| limit or bound | mutation result | guard |',
  '| --- | --- | --- |',
  ...rows.map((r) => `| \`${r.name}\` | ${r.verdict} | \`${r.guard.file}\` |`),
].join('\n');
console.log(`\n${table}`);
if (record) {
  const docPath = join(root, 'docs/sandbox.md');
  const doc = readFileSync(docPath, 'utf8');
  const begin = '<!-- limit-mutations:begin -->';
  const end = '<!-- limit-mutations:end -->';
  if (!doc.includes(begin) || !doc.includes(end)) throw new Error('docs/sandbox.md has no limit-mutations markers');
  writeFileSync(docPath, doc.slice(0, doc.indexOf(begin) + begin.length) + `\n${table}\n` + doc.slice(doc.indexOf(end)));
}
process.exit(rows.every((r) => r.verdict === 'killed') ? 0 : 1);
