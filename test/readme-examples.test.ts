// The README's console sessions are real: every `$ node bin/kwp.js …` line in
// a console block is run (from the compiled CLI, as a user would) and its
// output must equal what the README shows.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Session { command: string[]; expected: string }

function sessions(markdown: string): Session[] {
  const out: Session[] = [];
  for (const block of markdown.matchAll(/```console\n([\s\S]*?)```/g)) {
    const lines = block[1].split('\n');
    let current: Session | undefined;
    for (const line of lines) {
      if (line.startsWith('$ ')) {
        current = { command: line.slice(2).trim().split(/\s+/), expected: '' };
        out.push(current);
      } else if (current) {
        current.expected += line + '\n';
      }
    }
  }
  for (const s of out) s.expected = s.expected.replace(/\n+$/, '\n');
  return out;
}

const readme = readFileSync(join(root, 'README.md'), 'utf8');
const cases = sessions(readme).filter((s) => s.command[0] === 'node' && s.command[1] === 'bin/kwp.js');

describe('the README', () => {
  it('shows at least the eval and matrix sessions', () => {
    expect(cases.map((c) => c.command[2])).toEqual(expect.arrayContaining(['eval', 'matrix']));
  });

  it.each(cases.map((c) => [c.command.slice(1).join(' '), c] as const))('prints what it shows for `%s`', (_name, c) => {
    const stdout = execFileSync(process.execPath, c.command.slice(1), { cwd: root, encoding: 'utf8' });
    expect(stdout).toBe(c.expected);
  });
});

describe('kwp eval --module', () => {
  it('lets a pipeline name a plugin given as a file', () => {
    const pipeline = join(root, 'test', 'fixtures', 'pipelines', 'deny-81-then-np.yaml');
    const args = ['bin/kwp.js', 'eval', '--manifests', 'examples/basic/manifests', '--flows', 'examples/basic/flows.json', '--pipeline', pipeline];
    expect(() => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: 'pipe' })).toThrowError(/KWP_ERR_MODULE_NOT_FOUND/);
    const stdout = execFileSync(process.execPath, [...args, '--module', 'dist/wasm/examples/deny-ports.wasm'], { cwd: root, encoding: 'utf8' });
    expect(stdout.split('\n')[1]).toBe('x/a -> y/a TCP/81  DENY  egress: [PORTS] Deny (TCP/81 is denied cluster-wide)  ingress: [PORTS] Deny (TCP/81 is denied cluster-wide)');
  });
});
