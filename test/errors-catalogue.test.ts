import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { ErrorCatalogue } from '../host/errors.js';

interface Row { code: string; status: number; line: number }

function docRows(): Row[] {
  const text = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
  const rows: Row[] = [];
  text.split('\n').forEach((line, i) => {
    const m = /^\|\s*(KWP_ERR_[A-Z0-9_]+)\s*\|\s*(\d{3})\s*\|/.exec(line);
    if (m) rows.push({ code: m[1], status: Number(m[2]), line: i + 1 });
  });
  return rows;
}

describe('host/errors.ts and docs/errors.md list the same codes', () => {
  const rows = docRows();
  const documented = new Map(rows.map((r) => [r.code, r]));
  const catalogued = Object.keys(ErrorCatalogue);

  it('every catalogued code has a row in docs/errors.md', () => {
    expect(catalogued.filter((c) => !documented.has(c))).toEqual([]);
  });

  it('every documented code is in the catalogue', () => {
    expect(rows.map((r) => r.code).filter((c) => !(c in ErrorCatalogue))).toEqual([]);
  });

  it('each documented HTTP status equals the catalogue status', () => {
    const wrong = rows
      .filter((r) => r.code in ErrorCatalogue && ErrorCatalogue[r.code as keyof typeof ErrorCatalogue].status !== r.status)
      .map((r) => `docs/errors.md:${r.line} ${r.code} says ${r.status}`);
    expect(wrong).toEqual([]);
  });

  it('the table lists each code once, sorted by code', () => {
    const codes = rows.map((r) => r.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes).toEqual([...codes].sort());
  });
});
