// The e2e agent's judge, decision by decision (env KWP_E2E_JUDGE_TRACE, a
// directory): when each decision started, how long it took, its family and
// the gap since the previous decision ended, so that bench/tools/judge-slow.mjs
// can say which decisions are slow — those after the agent slept, the first of
// a family, and so on — where the histogram says only how many are.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Decisions kept: a quick e2e run asks a few thousand; later ones are not traced. */
const TRACE_CAPACITY = 200_000;

export class JudgeTrace {
  /** Per decision: start (ms, performance.now()), duration (µs), family, gap since the previous decision ended (µs). */
  private readonly rows = new Float64Array(4 * TRACE_CAPACITY);
  private count = 0;
  private lastEnd = -1;

  record(startMillis: number, micros: number, family: number): void {
    const n = this.count;
    const gap = this.lastEnd < 0 ? -1 : (startMillis - this.lastEnd) * 1000;
    this.lastEnd = startMillis + micros / 1000;
    if (n >= TRACE_CAPACITY) return;
    const at = 4 * n;
    this.rows[at] = startMillis;
    this.rows[at + 1] = micros;
    this.rows[at + 2] = family;
    this.rows[at + 3] = gap;
    this.count = n + 1;
  }

  /**
   * A phase boundary (the bench's "reset", between the enforced runs, the
   * nice-0 runs and the busy-poll runs): a row of family 0, so that
   * judge-slow.mjs reports each phase apart.
   */
  phase(): void {
    if (this.count >= TRACE_CAPACITY) return;
    this.rows.fill(0, 4 * this.count, 4 * this.count + 4);
    this.count++;
  }

  /** Writes `judge.<pid>.<label>.json` into `dir`: `{ label, columns, rows }`, rows as arrays. */
  write(dir: string, label: string): string {
    const rows: number[][] = [];
    for (let i = 0; i < this.count; i++) rows.push([...this.rows.subarray(4 * i, 4 * i + 4)]);
    const path = join(dir, `judge.${process.pid}.${label}.json`);
    writeFileSync(path, JSON.stringify({ label, columns: ['startMillis', 'micros', 'family', 'gapMicros'], rows }));
    return path;
  }
}
