// docs/flows.md's console sessions are real: each `$ node bin/kwp.js …` line
// is run by a shell from the repository root (so `2>&1` works as shown) and
// what it prints must equal what the document shows. `kwp diff` exits 1 when
// flows flip, so the exit status is not taken as a failure here; the unit
// tests hold the exit statuses.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Session { command: string; expected: string }

function sessions(markdown: string): Session[] {
  const out: Session[] = [];
  for (const block of markdown.matchAll(/```console\n([\s\S]*?)```/g)) {
    let current: Session | undefined;
    for (const line of block[1].split('\n')) {
      if (line.startsWith('$ ')) out.push((current = { command: line.slice(2).trim(), expected: '' }));
      else if (current) current.expected += `${line}\n`;
    }
  }
  for (const s of out) s.expected = s.expected.replace(/\n+$/, '\n');
  return out;
}

const cases = sessions(readFileSync(join(root, 'docs', 'flows.md'), 'utf8')).filter((s) => s.command.startsWith('node bin/kwp.js '));

describe('docs/flows.md', () => {
  it('walks through kwp diff and kwp recommend', () => {
    expect(cases.map((c) => c.command.split(' ')[2])).toEqual(expect.arrayContaining(['diff', 'recommend']));
  });

  it.each(cases.map((c) => [c.command, c] as const))('prints what it shows for `%s`', (_name, c) => {
    const run = spawnSync('sh', ['-c', c.command], { cwd: root, encoding: 'utf8' });
    expect(run.error).toBeUndefined();
    expect(run.stdout).toBe(c.expected);
  });
});
