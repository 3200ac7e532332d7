// Self time by function from a .cpuprofile (node --cpu-prof), heaviest first.
//   node bench/tools/cpuprofile-top.mjs CPU.*.cpuprofile [rows]
import { readFileSync } from 'node:fs';

const profile = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const rows = Number(process.argv[3] ?? 30);
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
let total = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const frame = nodes.get(profile.samples[i]).callFrame;
  const where = frame.url ? ` ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber}` : '';
  const key = `${frame.functionName || '(anonymous)'}${where}`;
  const dt = profile.timeDeltas[i] ?? 0;
  self.set(key, (self.get(key) ?? 0) + dt);
  total += dt;
}
for (const [key, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, rows)) {
  console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${key}`);
}
