// How `kwp eval` prints its results: walkthrough lines, a table, JSON or YAML,
// and for flows with an `expect`, which came out wrong and a summary line in
// the form cyclonus prints ("N wrong, M correct").
import { stringify } from 'yaml';
import type { FlowResult } from '../eval.js';

export const EVAL_FORMATS = ['walkthrough', 'table', 'json', 'yaml'] as const;
export type EvalFormat = (typeof EVAL_FORMATS)[number];

/** A result as printed: `correct` is present when the flow says what it expects. */
export type CheckedResult = FlowResult & { correct?: boolean };

export function check(results: FlowResult[]): CheckedResult[] {
  return results.map((r) => (r.expect === undefined ? r : { ...r, correct: r.verdict === r.expect }));
}

export interface Tally { wrong: number; correct: number; unchecked: number }

export function tally(results: CheckedResult[]): Tally {
  const t = { wrong: 0, correct: 0, unchecked: 0 };
  for (const r of results) {
    if (r.correct === undefined) t.unchecked++;
    else if (r.correct) t.correct++;
    else t.wrong++;
  }
  return t;
}

export function summaryLine(t: Tally): string {
  const unchecked = t.unchecked ? `, ${t.unchecked} without expect` : '';
  return `${t.wrong} wrong, ${t.correct} correct${unchecked}\n`;
}

function mark(r: CheckedResult): string {
  return r.correct === false ? `  WRONG (expected ${r.expect!.toUpperCase()})` : '';
}

function table(results: CheckedResult[]): string {
  const checked = results.some((r) => r.correct !== undefined);
  // The ENDPOINT column only when some flow went to a Service.
  const services = results.some((r) => r.via);
  const head = ['SOURCE', 'DESTINATION', 'PORT', ...(services ? ['ENDPOINT'] : []), 'VERDICT', ...(checked ? ['EXPECTED', 'RESULT'] : [])];
  const rows = results.map((r) => [
    r.src, r.dst, `${(r.protocol ?? 'TCP').toUpperCase()}/${r.port}`,
    ...(services ? [r.via ? `${r.via.endpoint}:${r.via.port}` : '-'] : []),
    r.verdict.toUpperCase(),
    ...(checked ? [r.expect?.toUpperCase() ?? '-', r.correct === undefined ? '-' : r.correct ? 'correct' : 'WRONG'] : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

/** The body for stdout; the summary is added by the caller where the format allows it. */
export function formatResults(results: CheckedResult[], format: EvalFormat): string {
  switch (format) {
    case 'json': return JSON.stringify(results, null, 2) + '\n';
    case 'yaml': return stringify(results);
    case 'table': return table(results);
    default: return results.map((r) => r.walkthrough + mark(r)).join('\n') + '\n';
  }
}
