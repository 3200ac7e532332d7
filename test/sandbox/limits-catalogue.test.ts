// Keeps the sandbox limits (host/runtime/limits.ts), their documentation
// (docs/sandbox.md) and the catalogue of what guards each of them
// (test/sandbox/limit-guards.json) in step: every limit is one field, has one
// row in the docs with its default and the test that guards it, and that test
// exists; every other bound the docs list has its row and its guard too; and
// every mutation that scripts/limit-mutations.mjs applies to remove a limit
// still matches the code exactly once, so the mutation check cannot go stale.
import { describe, it, expect } from 'vitest';
import { readFileSync, existsSync } from 'node:fs';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import guards from './limit-guards.json' with { type: 'json' };

interface Entry { guard: { file: string; test: string }; mutation: Array<{ file: string; find: string; replace: string }>; build?: boolean }
const limits = guards.limits as Record<string, Entry>;
const bounds = guards.bounds as Record<string, Entry>;
const proofs = guards.proofs as Record<string, { guard: Entry['guard']; removes: string; build: boolean }>;
const doc = readFileSync('docs/sandbox.md', 'utf8');

/** The rows of the markdown table under `heading`: cells, without the header and separator. */
function tableUnder(heading: string): string[][] {
  const start = doc.indexOf(`\n## ${heading}\n`);
  expect(start, `docs/sandbox.md has a "## ${heading}" section`).toBeGreaterThan(-1);
  const section = doc.slice(start + 1).split(/\n## /)[0];
  const rows = section.split('\n').filter((l) => l.startsWith('|')).slice(2);
  return rows.map((r) => r.slice(1, -1).split(' | ').map((c) => c.trim()));
}

const firstCode = (cell: string) => /^`([^`]+)`/.exec(cell)?.[1];

/** Does `file` have a test titled `name`, literally or through an it.each template (`%s` and friends)? */
function hasTest(source: string, name: string): boolean {
  if (source.includes(name)) return true;
  // it.each titles: quoted strings with a placeholder, each placeholder standing for one or more characters.
  const templates = [...source.matchAll(/(['"])((?:(?!\1)[^\\\n])*%[sdjio#](?:(?!\1)[^\\\n])*)\1/g)].map((m) => m[2]);
  const literal = (p: string) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return templates.some((t) => new RegExp(`^${t.split(/%[sdjio#]/).map(literal).join('.+')}$`).test(name));
}

describe('every sandbox limit is one field, documented with its default and its guarding test', () => {
  const rows = tableUnder('The limits');

  it('the docs table has exactly one row per SandboxLimits field', () => {
    const names = rows.map((r) => firstCode(r[0]));
    expect(names.filter((n, i) => names.indexOf(n) !== i), 'rows listed twice').toEqual([]);
    expect([...names].sort()).toEqual(Object.keys(DEFAULT_LIMITS).sort());
  });

  it("each row's default is the field's default", () => {
    for (const [name, value] of Object.entries(DEFAULT_LIMITS)) {
      const row = rows.find((r) => firstCode(r[0]) === name)!;
      expect(row[1].split(' ')[0], name).toBe(String(value));
    }
  });

  it('the catalogue names a guarding test for every field, and the docs row names the same test file', () => {
    expect(Object.keys(limits).sort()).toEqual(Object.keys(DEFAULT_LIMITS).sort());
    for (const [name, entry] of Object.entries(limits)) {
      const row = rows.find((r) => firstCode(r[0]) === name)!;
      expect(row.at(-1), `${name}'s "guarded by" cell`).toContain(`\`${entry.guard.file}\``);
    }
  });
});

describe('every other bound the docs list has its row and its guarding test', () => {
  const rows = tableUnder('Bounds that are not fields');

  it('the docs table and the catalogue list the same bounds, each row naming its guard file', () => {
    expect(rows.map((r) => firstCode(r[0])).sort()).toEqual(Object.keys(bounds).sort());
    for (const [name, entry] of Object.entries(bounds)) {
      const row = rows.find((r) => firstCode(r[0]) === name)!;
      expect(row.at(-1), `${name}'s "guarded by" cell`).toContain(`\`${entry.guard.file}\``);
    }
  });
});

describe('every class of issue 14 has a real-agent proof that fails with a limit removed', () => {
  const rows = tableUnder('Real-agent proofs');

  it('time, memory, output, imports, uploads and state each have one, in the catalogue and the docs', () => {
    expect(Object.keys(proofs).sort()).toEqual(['imports', 'memory', 'output', 'state', 'time', 'uploads']);
    expect(rows.map((r) => firstCode(r[0])).sort()).toEqual(Object.keys(proofs).sort());
    for (const [cls, proof] of Object.entries(proofs)) {
      const row = rows.find((r) => firstCode(r[0]) === cls)!;
      expect(row[1]).toBe(`\`${proof.guard.file}\``);
      expect(row.at(-1)).toBe(`\`${proof.removes}\``);
      expect(proof.removes in limits || proof.removes in bounds, `${cls} removes a catalogued limit`).toBe(true);
      expect(proof.build).toBe(true);
      expect(hasTest(readFileSync(proof.guard.file, 'utf8'), proof.guard.test), `${proof.guard.file} has a test "${proof.guard.test}"`).toBe(true);
      // A proof drives the agent process, not the host in-process.
      expect(readFileSync(proof.guard.file, 'utf8')).toMatch(/AgentProcess\.start/);
    }
  });
});

describe('every guard exists and every mutation still matches the code', () => {
  const all = Object.entries({ ...limits, ...bounds });

  it.each(all)('%s', (_name, entry) => {
    expect(existsSync(entry.guard.file), entry.guard.file).toBe(true);
    expect(hasTest(readFileSync(entry.guard.file, 'utf8'), entry.guard.test), `${entry.guard.file} has a test "${entry.guard.test}"`).toBe(true);
    expect(entry.mutation.length).toBeGreaterThan(0);
    for (const edit of entry.mutation) {
      const occurrences = readFileSync(edit.file, 'utf8').split(edit.find).length - 1;
      expect(occurrences, `${edit.file} contains ${JSON.stringify(edit.find)} once`).toBe(1);
    }
  });

  it('the docs say how to run the mutation check', () => {
    expect(doc).toContain('node scripts/limit-mutations.mjs');
    expect(doc).toContain('<!-- limit-mutations:begin -->');
  });
});
