// What one module's object feed costs, in this thread, without pods: a fresh
// instance of a built-in module, configured, then every object of its kinds at
// a scale (RESET, one UPSERT each, SYNCED), CPU time per phase; median of runs.
//   node bench/tools/object-feed-cost.mjs [module=network-policy] [scale=default] [runs=7]
// Needs `npm run build` first. Used for the SDK's JSON parsing (docs/performance.md).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dist = (p) => import(join(root, process.env.KWP_DIST ?? 'dist', p));
const { SCALES, generateCluster, clusterObjects } = await dist('bench/generator.js');
const { BuiltinModules } = await dist('host/pipeline/modules.js');
const { EvaluatorInstance } = await dist('host/runtime/instance.js');
const { ObjectOp, encodeObject } = await dist('host/abi/objects.js');

const [moduleName = 'network-policy', scaleName = 'default', runs = '7'] = process.argv.slice(2);
// KWP_BENCH_WASM_DIR: modules built with names (bench/tools/named-wasm.mjs), for a --cpu-prof.
const wasmDir = process.env.KWP_BENCH_WASM_DIR;
const compiled = (wasmDir ? new BuiltinModules(undefined, wasmDir) : new BuiltinModules()).resolve(moduleName);
const cluster = generateCluster(SCALES[scaleName]);
const byKind = new Map(clusterObjects(cluster));
const objects = compiled.meta.kinds.map((k) => (byKind.get(k) ?? []).map((o) => encodeObject(o).slice()));
const cpuMs = (since) => { const d = process.cpuUsage(since); return (d.user + d.system) / 1000; };
const times = { upserts: [], synced: [], fuel: [] };
const load = loadavg()[0];
for (let r = 0; r < Number(runs); r++) {
  const inst = new EvaluatorInstance(compiled, undefined, { memoryPages: 2048 });
  inst.configure({});
  let upserts = 0;
  let fuel = 0;
  let synced = 0;
  for (let kind = 0; kind < objects.length; kind++) {
    inst.object(kind, ObjectOp.Reset);
    // CPU time (the process's; the module runs in this thread): wall time on a loaded machine is mostly waiting.
    let t = process.cpuUsage();
    for (const json of objects[kind]) {
      inst.object(kind, ObjectOp.Upsert, json);
      // Fuel spent (the instrumentation's count of the module's work, the same on any load): the tank less what is left.
      fuel += inst.callFuel - inst.fuel.value;
    }
    upserts += cpuMs(t);
    t = process.cpuUsage();
    inst.object(kind, ObjectOp.Synced);
    synced += cpuMs(t);
  }
  times.upserts.push(upserts);
  times.fuel.push(fuel);
  times.synced.push(synced);
  inst.dispose?.();
}
const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
const count = objects.reduce((n, o) => n + o.length, 0);
const bytes = objects.reduce((n, o) => n + o.reduce((m, j) => m + j.length, 0), 0);
console.log(`${moduleName} ${scaleName}: ${count} objects (${(bytes / 2 ** 20).toFixed(2)} MiB of JSON): upserts ${median(times.upserts).toFixed(1)} ms of CPU, ${(median(times.fuel) / 1e6).toFixed(1)} M fuel units, synced ${median(times.synced).toFixed(1)} ms (medians of ${runs}; load ${load.toFixed(1)} -> ${loadavg()[0].toFixed(1)})`);
