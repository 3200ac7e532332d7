// The README's admin session is real: a `kwp agent` is started as the README
// starts it (on a free port, with its own token and state directory), every
// `$ kwp …` line of the session runs through the compiled CLI, and its output
// must equal what the README shows. Only what truly varies is normalised: the
// times in `pipeline history` and the state directory's path. The pipeline
// YAML that `set` and `rollback` print is shown cut, so those compare as a
// prefix.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Step { command: string; expected: string[] }

/** The console block after the heading "Changing a running agent". */
function session(): Step[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### Changing a running agent'));
  const block = /```console\n([\s\S]*?)```/.exec(section)![1];
  const steps: Step[] = [];
  for (const line of block.trimEnd().split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), expected: [] });
    else steps.at(-1)!.expected.push(line);
  }
  return steps;
}

/** Splits a shell command line as the README writes them: words and '…' quoted words. */
function words(command: string): string[] {
  return [...command.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;

let dir: string;
let agent: ChildProcess;
let server: string;
const token = randomBytes(32).toString('hex');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-readme-admin-'));
  writeFileSync(join(dir, 'token'), `${token}\n`);
  agent = spawn(process.execPath, ['bin/kwp.js', 'agent', '--manifests', 'examples/basic/manifests', '--dataplane=off',
    '--state-dir', join(dir, 'kwp'), '--admin-token-file', join(dir, 'token'), '--admin-address', '127.0.0.1:0'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  server = await new Promise<string>((resolve, reject) => {
    let seen = '';
    agent.stderr!.on('data', (d) => {
      seen += d;
      const m = /"url":"(http:\/\/[^"]+)","msg":"admin API listening"/.exec(seen);
      if (m) resolve(m[1]);
    });
    agent.on('exit', (code) => reject(new Error(`kwp agent exited with ${code}:\n${seen}`)));
  });
}, 120_000);

afterAll(async () => {
  agent?.kill('SIGTERM');
  await new Promise((r) => agent?.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
});

function kwp(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['bin/kwp.js', ...args, '--server', server], { cwd: root, env: { ...process.env, KWP_ADMIN_TOKEN: token } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`kwp ${args.join(' ')}: ${stderr}`));
      else resolve(stdout);
    });
  });
}

describe("the README's admin session", () => {
  it('prints what the README shows, command by command', async () => {
    const steps = session();
    expect(steps[0].command).toBe('export KWP_ADMIN_TOKEN=$(cat token)');
    expect(steps.length).toBeGreaterThan(8);
    for (const step of steps.slice(1)) {
      const argv = words(step.command);
      expect(argv[0], step.command).toBe('kwp');
      const normalise = (text: string) => text.replaceAll(join(dir, 'kwp'), '/tmp/kwp').replace(TIME, 'TIME');
      let actual = normalise(await kwp(argv.slice(1))).trimEnd().split('\n');
      const expected = step.expected.map(normalise);
      const cut = argv[1] === 'pipeline' && (argv[2] === 'set' || argv[2] === 'rollback');
      if (cut) actual = actual.slice(0, expected.length);
      expect(actual, `$ ${step.command}`).toEqual(expected);
    }
  }, 180_000);
});
