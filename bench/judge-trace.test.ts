import { describe, it, expect } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JudgeTrace } from './judge-trace.js';

describe('the judge trace', () => {
  it('writes each decision with its family and the gap since the previous one ended, and marks phases with a row of family 0', () => {
    const trace = new JudgeTrace();
    trace.record(10, 500, 4); // 10.0–10.5 ms
    trace.record(11, 2, 6); // 0.5 ms after the first ended
    trace.phase();
    trace.record(11.5, 3, 4); // 0.498 ms after the second ended
    const dir = mkdtempSync(join(tmpdir(), 'kwp-judge-trace-'));
    const written = JSON.parse(readFileSync(trace.write(dir, 'default'), 'utf8'));
    expect(written.label).toBe('default');
    expect(written.columns).toEqual(['startMillis', 'micros', 'family', 'gapMicros']);
    const rows = written.rows as number[][];
    expect(rows.map((r) => [r[0], r[1], r[2]])).toEqual([[10, 500, 4], [11, 2, 6], [0, 0, 0], [11.5, 3, 4]]);
    expect(rows[0][3]).toBe(-1);
    expect(rows[1][3]).toBeCloseTo(500, 6);
    expect(rows[3][3]).toBeCloseTo(498, 6);
  });
});
