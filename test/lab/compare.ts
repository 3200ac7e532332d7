// Predicted verdicts (from `kwp eval` / evaluateFlows) against reachability
// the lab measured: the check that the agent enforces what the evaluators say.

import type { LabFlow, ReachabilityResult } from './lab.js';

export interface PredictedFlow extends LabFlow {
  verdict: 'allow' | 'deny';
  walkthrough?: string;
}

export interface ComparedFlow extends ReachabilityResult {
  predicted: 'allow' | 'deny';
  agrees: boolean;
  walkthrough?: string;
}

const keyOf = (f: LabFlow) => `${f.src}|${f.dst}|${f.protocol}|${f.port}`;

/** Pair each measured flow with its prediction; a measured flow without one is an error in the caller. */
export function compareReachability(observed: ReachabilityResult[], predicted: PredictedFlow[]): ComparedFlow[] {
  const byKey = new Map(predicted.map((p) => [keyOf(p), p]));
  return observed.map((o) => {
    const p = byKey.get(keyOf(o));
    if (!p) throw new Error(`compare: no prediction for ${o.src} -> ${o.dst} ${o.protocol}/${o.port}`);
    return { ...o, predicted: p.verdict, agrees: (p.verdict === 'allow') === o.reachable, ...(p.walkthrough ? { walkthrough: p.walkthrough } : {}) };
  });
}

/** One line per flow: predicted, observed, and a marker where they differ. */
export function formatComparison(rows: ComparedFlow[]): string {
  const label = (r: ComparedFlow) => `${r.src} -> ${r.dst} ${r.protocol}/${r.port}`;
  const width = Math.max(...rows.map((r) => label(r).length), 4);
  const lines = [`${'flow'.padEnd(width)}  predicted  observed`];
  for (const r of rows) {
    const observed = r.reachable ? 'allow' : 'deny';
    lines.push(`${label(r).padEnd(width)}  ${r.predicted.padEnd(9)}  ${observed.padEnd(8)}${r.agrees ? '' : '  <-- MISMATCH'}`);
  }
  const mismatches = rows.filter((r) => !r.agrees).length;
  lines.push(`${rows.length} flows, ${mismatches} mismatch${mismatches === 1 ? '' : 'es'}`);
  return lines.join('\n');
}
