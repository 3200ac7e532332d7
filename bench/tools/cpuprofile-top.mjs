// Self time by function from a .cpuprofile (node --cpu-prof), heaviest first.
//   node bench/tools/cpuprofile-top.mjs CPU.*.cpuprofile [rows] [--under=functionName]
// --under keeps only the samples whose stack passes through that function (the
// packet path of a running agent is `onPolicyPacket`), so start-up and idle
// time do not drown it; percentages are then of those samples.
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const under = args.find((a) => a.startsWith('--under='))?.slice('--under='.length);
const [file, rowsArg] = args.filter((a) => !a.startsWith('--'));
const profile = JSON.parse(readFileSync(file, 'utf8'));
const rows = Number(rowsArg ?? 30);
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const passesThrough = new Map();
const isUnder = (id) => {
  if (!under) return true;
  if (passesThrough.has(id)) return passesThrough.get(id);
  const name = nodes.get(id).callFrame.functionName;
  const p = parent.get(id);
  const result = name === under || (p !== undefined && isUnder(p));
  passesThrough.set(id, result);
  return result;
};
const self = new Map();
let total = 0;
let all = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  all += dt;
  if (!isUnder(profile.samples[i])) continue;
  const frame = nodes.get(profile.samples[i]).callFrame;
  const where = frame.url ? ` ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber}` : '';
  const key = `${frame.functionName || '(anonymous)'}${where}`;
  self.set(key, (self.get(key) ?? 0) + dt);
  total += dt;
}
if (under) console.log(`${(total / 1000).toFixed(1)} ms under ${under} (${((100 * total) / all).toFixed(1)} % of the profile)`);
for (const [key, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, rows)) {
  console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${key}`);
}
