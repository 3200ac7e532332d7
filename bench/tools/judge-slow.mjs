// Which of the e2e agent's judge decisions are slow: reads the traces
// KWP_E2E_JUDGE_TRACE wrote (bench/judge-trace.ts) and prints, per agent and
// phase (the bench's "reset" separates the enforced, nice-0 and busy-poll
// runs), the decisions' p50 / p90 / p99 by the gap since the previous
// decision ended and by family, and the first decisions of each family.
//   node bench/tools/judge-slow.mjs /tmp/trace/judge.*.json
import { readFileSync } from 'node:fs';

const GAPS = [[0, 20], [20, 100], [100, 400], [400, 2000], [2000, 20000], [20000, Infinity]];

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function line(name, values) {
  const s = [...values].sort((a, b) => a - b);
  const f = (x) => (Number.isNaN(x) ? '-' : x.toFixed(2));
  return `  ${name.padEnd(34)} n ${String(s.length).padStart(6)}  p50 ${f(quantile(s, 0.5)).padStart(7)}  p90 ${f(quantile(s, 0.9)).padStart(7)}  p99 ${f(quantile(s, 0.99)).padStart(7)} µs`;
}

for (const file of process.argv.slice(2)) {
  const { label, rows } = JSON.parse(readFileSync(file, 'utf8'));
  const phases = [[]];
  for (const r of rows) {
    if (r[2] === 0) phases.push([]);
    else phases[phases.length - 1].push(r);
  }
  console.log(`${file} (${label})`);
  phases.forEach((list, p) => {
    if (list.length === 0) return;
    console.log(` phase ${p}: ${list.length} decisions`);
    console.log(line('all', list.map((r) => r[1])));
    for (const fam of [4, 6]) console.log(line(`IPv${fam}`, list.filter((r) => r[2] === fam).map((r) => r[1])));
    // The phase's first decisions apart: code deoptimised by the first queued packets shows there.
    console.log(line('the first 100 of the phase', list.slice(0, 100).map((r) => r[1])));
    console.log(line('the rest', list.slice(100).map((r) => r[1])));
    for (const [lo, hi] of GAPS) {
      const sel = list.filter((r) => r[3] >= lo && r[3] < hi);
      console.log(line(`gap ${lo}–${hi === Infinity ? '∞' : hi} µs`, sel.map((r) => r[1])));
    }
    for (const fam of [4, 6]) {
      const firsts = list.filter((r) => r[2] === fam).slice(0, 5).map((r) => r[1].toFixed(1));
      console.log(`  first IPv${fam} decisions of the phase: ${firsts.join(' ')} µs`);
    }
  });
}
