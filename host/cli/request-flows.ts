// Flows a CLI command sends to POST /v1/diff (`kwp pipeline set --dry-run
// --flows`, `kwp diff --server --flows`): the file is checked here, so a bad
// line is named by file and line before anything is sent, then sent as
// parsed; the agent's answer names flows by position, which is mapped back to
// the file's lines.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { parseRecordedFlows } from '../impact/recorded-flows.js';
import type { DiffAnswer } from '../impact/live-diff.js';

export interface RequestFlows { values: unknown[]; lines: number[] }

export function requestFlows(file: string): RequestFlows {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KwpError('KWP_ERR_FLOWS', `${file}: cannot read the flows file: ${(err as Error).message}`);
  }
  parseRecordedFlows(text, file);
  const body = text.replace(/^\uFEFF/, '');
  if (body.trimStart().startsWith('[')) return { values: JSON.parse(body) as unknown[], lines: [] };
  const kept = body.split(/\r?\n/).map((l, i) => ({ l: l.trim(), line: i + 1 })).filter(({ l }) => l !== '' && !l.startsWith('#'));
  return { values: kept.map(({ l }) => JSON.parse(l)), lines: kept.map(({ line }) => line) };
}

/** The agent names request flows by position: name them by the file and line they were read from. */
export function placeInFile(diff: DiffAnswer, file: string, lines: number[]): DiffAnswer {
  const place = (text: string) => text.replace(/^POST \/v1\/diff body: flows: flow (\d+)/, (_m, n: string) => (lines.length ? `${file}: line ${lines[Number(n) - 1]}` : `${file}: flow ${n}`));
  return { ...diff, changes: diff.changes.map((c) => ({ ...c, from: place(c.from) })), skipped: diff.skipped.map(place) };
}
