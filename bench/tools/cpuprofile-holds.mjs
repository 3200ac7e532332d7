// Where a .cpuprofile (node --cpu-prof) shows the main thread held: runs of
// consecutive samples under one task (the same child of the root: one
// processImmediate turn, one timer run, one I/O callback), without an idle
// sample between, of at least a threshold. For each hold: when, how long,
// and the frames most of its samples pass through, so that a long turn of
// the event loop can be told from many short ones.
//   node bench/tools/cpuprofile-holds.mjs CPU.*.cpuprofile [minMs=200] [frames=8] [--by-samples]
// On a loaded machine the process also waits for a core inside a hold: its
// samples (one per sampling interval, 1 ms by default, of time it ran) say
// how much of the hold was its own work; --by-samples sorts by them.
import { readFileSync } from 'node:fs';

const bySamples = process.argv.includes('--by-samples');
const [file, minArg, framesArg] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const minMs = Number(minArg ?? 200);
const frames = Number(framesArg ?? 8);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const root = profile.nodes[0].id;
const label = (id) => {
  const f = nodes.get(id).callFrame;
  return `${f.functionName || '(anonymous)'}${f.url ? ` ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}` : ''}`;
};
/** The child of the root a sample's stack starts with. */
const taskOf = (id) => {
  let at = id;
  while (parent.get(at) !== undefined && parent.get(at) !== root) at = parent.get(at);
  return at;
};
const IDLE = new Set(['(idle)', '(program)']);

const holds = [];
let current;
let t = profile.startTime;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] ?? 0;
  const id = profile.samples[i];
  const name = nodes.get(id).callFrame.functionName;
  const task = IDLE.has(name) ? undefined : name === '(garbage collector)' ? current?.task : taskOf(id);
  if (current && task === current.task) {
    current.end = t;
    current.samples.push(id);
    continue;
  }
  if (current && current.end - current.start >= minMs * 1000) holds.push(current);
  current = task === undefined ? undefined : { task, start: t, end: t, samples: [id] };
}
if (current && current.end - current.start >= minMs * 1000) holds.push(current);

console.log(`${holds.length} holds of ${minMs} ms or more in ${((t - profile.startTime) / 1e6).toFixed(1)} s of profile`);
if (bySamples) holds.sort((a, b) => b.samples.length - a.samples.length);
for (const h of holds) {
  const through = new Map();
  for (const s of h.samples) {
    const seen = new Set();
    for (let at = s; at !== undefined && at !== root; at = parent.get(at)) {
      const l = label(at);
      if (seen.has(l)) continue;
      seen.add(l);
      through.set(l, (through.get(l) ?? 0) + 1);
    }
  }
  // The deepest frames still covering a good share of the hold: sorted by share, then depth.
  const top = [...through].filter(([, n]) => n >= h.samples.length * 0.1).sort((a, b) => b[1] - a[1]).slice(-frames);
  console.log(`\n+${((h.start - profile.startTime) / 1e6).toFixed(1)} s: ${((h.end - h.start) / 1000).toFixed(0)} ms (${h.samples.length} samples)`);
  for (const [l, n] of top) console.log(`  ${((100 * n) / h.samples.length).toFixed(0).padStart(3)} %  ${l}`);
}
