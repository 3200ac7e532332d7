// Prints bench/results/latest.json (or the file given) as the markdown table
// docs/performance.md carries, so the doc's figures are copied, not retyped.
// The rows, targets and verdicts are bench/report.ts's (build first).
//   node bench/tools/results-markdown.mjs [bench/results/latest.json]
import { readFileSync } from 'node:fs';
import { formatMarkdown } from '../../dist/bench/report.js';

console.log(formatMarkdown(JSON.parse(readFileSync(process.argv[2] ?? 'bench/results/latest.json', 'utf8'))));
