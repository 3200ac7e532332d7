// The README's and the guides' shell sessions, run as a reader pastes them
// (test/docs/sessions.ts says how a document is read) and compared line by
// line with the output they show. Each document runs in one bash, in a
// directory of its own and in a network namespace of its own (`unshare -rn`,
// no root needed), so an agent the session starts on the documented
// 127.0.0.1:9443 meets no other. The compiled CLI is used: npm run build first.
// One document: npx vitest run test/docs-sessions.test.ts -t plugin-guide
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { outputMatches, parseSessions, sessionScript, type ConsoleStep } from './docs/sessions.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));

interface Doc {
  file: string;
  /** `checkout`: the session runs in a copy of the checkout (links to its files); `beside-checkout`: next to it, as ./kube-wasm-policies. */
  where: 'checkout' | 'beside-checkout';
  timeoutMs: number;
}

const DOCS: Doc[] = [
  { file: 'README.md', where: 'checkout', timeoutMs: 300_000 },
  { file: 'docs/admin-api.md', where: 'checkout', timeoutMs: 300_000 },
  { file: 'docs/flows.md', where: 'checkout', timeoutMs: 300_000 },
  { file: 'docs/plugin-guide.md', where: 'beside-checkout', timeoutMs: 1_200_000 },
];

function workdir(where: Doc['where']): string {
  const dir = mkdtempSync(join(tmpdir(), 'kwp-docs-'));
  if (where === 'beside-checkout') symlinkSync(REPO, join(dir, 'kube-wasm-policies'));
  else for (const entry of readdirSync(REPO)) if (entry !== '.git') symlinkSync(join(REPO, entry), join(dir, entry));
  return dir;
}

/** The environment of a reader's terminal, minus this vitest's own variables (the guide runs vitest too). */
function readerEnv(out: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'NODE_ENV' && k !== 'TEST' && !k.startsWith('KWP_')) env[k] = v;
  // No colour, so outputs compare as text; the namespace has no network, so npm works from its cache.
  return { ...env, NO_COLOR: '1', npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', KWP_DOC_OUT: out };
}

interface Ran { steps: ConsoleStep[]; outputs: Map<ConsoleStep, { output?: string; rc?: string }>; log: string; code: number | null }

async function runDoc(doc: Doc): Promise<Ran> {
  const steps = parseSessions(readFileSync(join(REPO, doc.file), 'utf8'));
  const dir = workdir(doc.where);
  const out = mkdtempSync(join(tmpdir(), 'kwp-docs-out-'));
  const script = join(out, 'session.sh');
  writeFileSync(script, sessionScript(steps));
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      // A process group of its own: what a session starts in the background (the
      // plugin guide's `kwp agent … &`) outlives its shell, so the whole group goes when it ends.
      const child = spawn('unshare', ['-rn', 'bash', '-c', 'ip link set lo up && exec bash "$0"', script], { cwd: dir, env: readerEnv(out), stdio: ['ignore', 'ignore', 'pipe'], detached: true });
      const killGroup = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // The group is already gone.
        }
      };
      let stderr = '';
      child.stderr!.on('data', (d) => { stderr += d; });
      const timer = setTimeout(killGroup, doc.timeoutMs - 10_000);
      child.on('error', reject);
      child.on('exit', (c) => {
        clearTimeout(timer);
        killGroup();
        if (stderr) writeFileSync(join(out, 'shell.log'), `\n@@ stderr of the session's shell\n${stderr}`, { flag: 'a' });
        resolve(c);
      });
    });
    const outputs = new Map<ConsoleStep, { output?: string; rc?: string }>();
    const consoleSteps = steps.filter((s): s is ConsoleStep => s.kind === 'console');
    steps.forEach((s, n) => {
      if (s.kind !== 'console') return;
      const read = (ext: string) => (existsSync(join(out, `${n}.${ext}`)) ? readFileSync(join(out, `${n}.${ext}`), 'utf8') : undefined);
      outputs.set(s, { output: read('out'), rc: read('rc')?.trim() });
    });
    const log = existsSync(join(out, 'shell.log')) ? readFileSync(join(out, 'shell.log'), 'utf8') : '';
    return { steps: consoleSteps, outputs, log, code };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  }
}

function mismatches(doc: Doc, ran: Ran, steps = ran.steps): string[] {
  return steps.flatMap((s, i) => {
    const got = ran.outputs.get(ran.steps[i]);
    if (got?.output === undefined) return [`${doc.file}:${s.line}: $ ${s.command}\n  never ran; the session's log:\n${ran.log.slice(-4000)}`];
    if (outputMatches(s.expected, got.output)) return [];
    return [`${doc.file}:${s.line}: $ ${s.command}   (exit status ${got.rc})\n--- shown\n${s.expected.join('\n')}\n--- printed\n${got.output}`];
  });
}

describe.each(DOCS.map((d) => [d.file, d] as const))('the sessions of %s', (_file, doc) => {
  it('print what the document shows, command by command', async () => {
    const ran = await runDoc(doc);
    expect(ran.steps.length, 'a document in this list shows at least one session').toBeGreaterThan(0);
    expect(mismatches(doc, ran).join('\n\n')).toBe('');

    // The comparison can fail: one changed character in one shown line is a drift.
    const shown = ran.steps.findIndex((s) => s.expected.some((l) => /[a-z]/.test(l) && !l.includes('<') && l !== '…'));
    const drifted = ran.steps.map((s, i) => (i !== shown ? s : {
      ...s, expected: s.expected.map((l, j) => (j === s.expected.findIndex((x) => /[a-z]/.test(x) && !x.includes('<') && x !== '…') ? l.replace(/[a-z]/, (c) => (c === 'x' ? 'y' : 'x')) : l)),
    }));
    expect(mismatches(doc, ran, drifted)).toHaveLength(1);
  }, doc.timeoutMs);
});

describe('the docs test', () => {
  it('runs every document that shows a console session', () => {
    const files = ['README.md', ...readdirSync(join(REPO, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`),
      ...readdirSync(join(REPO, 'sdk')).filter((f) => f.endsWith('.md')).map((f) => `sdk/${f}`)];
    const withSessions = files.filter((f) => /^```console$/m.test(readFileSync(join(REPO, f), 'utf8')));
    expect(withSessions.sort()).toEqual(DOCS.map((d) => d.file).sort());
  });
});
