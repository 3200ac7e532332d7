// Every command and subcommand in the command table, as kubectl and the
// cilium CLI behave: `--help` prints to stdout and exits 0, names exactly the
// flags its parser accepts, and a mistyped flag or subcommand is a usage
// error (exit 2) that names the word meant. The commands come from the
// table, so a command added there is held to the same rules without a line
// here.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { commandTable, main } from './main.js';
import { declaredFlags } from './args.js';
import { closest } from '../suggest.js';

interface Ran { code: number; stdout: string; stderr: string }

async function kwp(...argv: string[]): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => { stdout += String(chunk); return true; });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => { stderr += String(chunk); return true; });
  try {
    const code = await main(argv);
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}
afterEach(() => vi.restoreAllMocks());

/** Every `kwp X` and `kwp X SUB` the table knows, `help` aside (it prints the others' help). */
function commandPaths(): string[][] {
  return Object.entries(commandTable()).filter(([name]) => name !== 'help').flatMap(([name, c]) =>
    c.subcommands && name !== 'completion' ? c.subcommands.map((sub) => [name, sub]) : [[name]]);
}

/** The flags a help text offers: those on its usage lines and in its indented option list. */
function flagsInHelp(help: string): Set<string> {
  const offered = help.split('\n').filter((line) => /^(usage:|\s+(-\w,\s+)?--?[a-z])/.test(line) || /^\s{4,}kwp /.test(line));
  return new Set(offered.flatMap((line) => [...line.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]*|-[a-z])(?![\w-])/g)].map((m) => m[1])));
}

/** A one-letter slip in a flag: two letters in its middle swapped, as a hurried typist does. */
function typo(flag: string): string {
  const word = flag.replace(/^--/, '');
  const i = Math.floor(word.length / 2);
  return `--${word.slice(0, i - 1)}${word[i]}${word[i - 1]}${word.slice(i + 1)}`;
}

describe.each(commandPaths().map((p) => [p.join(' '), p] as const))('kwp %s', (_name, path) => {
  it('prints its help to stdout with --help and exits 0', async () => {
    const r = await kwp(...path, '--help');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: kwp /);
    expect(r.stderr).toBe('');
  });

  it('offers in its help exactly the flags it parses', async () => {
    const r = await kwp(...path, '--help');
    const parsed = declaredFlags(path.join(' ')) ?? [];
    const offered = flagsInHelp(r.stdout);
    // -h/--help is the convention every command follows; its help need not list it.
    // A one-letter flag (`-v`) is also accepted as `--v`; its help shows `-v`.
    const meaningful = parsed.filter((f) => f !== '--help' && f !== '-h' && !(f.length === 3 && offered.has(f.slice(1))));
    expect([...offered].filter((f) => !parsed.includes(f)), `help of "kwp ${path.join(' ')}" offers flags its parser refuses`).toEqual([]);
    expect(meaningful.filter((f) => !offered.has(f)), `"kwp ${path.join(' ')}" parses flags its help does not offer`).toEqual([]);
  });

  it('answers a mistyped flag with the flag meant', async () => {
    await kwp(...path, '--help');
    const flags = (declaredFlags(path.join(' ')) ?? []).filter((f) => f.startsWith('--') && f.length >= 7 && f !== '--help');
    for (const flag of flags) {
      const slip = typo(flag);
      // A slip that lands nearer another real flag is no test of this one.
      if (closest(slip, flags) !== flag) continue;
      const r = await kwp(...path, slip, 'x');
      expect(r.code, `${slip}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`KWP_ERR_USAGE: kwp ${path.join(' ')}: unknown flag "${slip}" (did you mean "${flag}"?)`);
    }
  });
});

describe('did you mean, at every level', () => {
  it('names --manifests for kwp agent --manifest', async () => {
    const r = await kwp('agent', '--manifest', 'examples/basic/manifests');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('KWP_ERR_USAGE: kwp agent: unknown flag "--manifest" (did you mean "--manifests"?); see "kwp agent --help"\n');
  });

  it('names --manifests for kwp agent --manifest=DIR', async () => {
    const r = await kwp('agent', '--manifest=examples/basic/manifests');
    expect(r.stderr).toContain('unknown flag "--manifest" (did you mean "--manifests"?)');
  });

  it('names the command for a mistyped command', async () => {
    const r = await kwp('evla');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "evla" (did you mean "eval"?)');
  });

  it.each(Object.entries(commandTable()).filter(([, c]) => c.subcommands?.length).map(([name, c]) => [name, c.subcommands![0]]))(
    'names the subcommand of kwp %s for a slip of "%s"', async (name, sub) => {
      const slip = sub.length > 2 ? `${sub.slice(0, -2)}${sub.at(-1)}${sub.at(-2)}` : `${sub}x`;
      const r = await kwp(name, slip);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`kwp ${name}: unknown subcommand "${slip}" (did you mean "${sub}"?)`);
    });

  it('says nothing about a flag nowhere near any', async () => {
    const r = await kwp('eval', '--zzzzzzzz');
    expect(r.stderr).toBe('KWP_ERR_USAGE: kwp eval: unknown flag "--zzzzzzzz"; see "kwp eval --help"\n');
  });
});

describe('kwp completion', () => {
  it('completes every command and every subcommand of the table', async () => {
    const r = await kwp('completion', 'bash');
    expect(r.code).toBe(0);
    const words = /compgen -W "([^"]*)"/.exec(r.stdout)![1].split(' ');
    for (const [name, c] of Object.entries(commandTable())) {
      expect(words).toContain(name);
      if (c.subcommands) expect(r.stdout).toContain(`    ${name}) words="${c.subcommands.join(' ')}" ;;`);
    }
  });
});
