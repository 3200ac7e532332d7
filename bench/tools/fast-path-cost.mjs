// Where the kernel fast path's connections per second go, against no queue at
// all: the e2e bench's lab and client (bench/e2e.ts), one setup at a time,
// in turns, each keeping its best of `rounds`. Next to each rate, the CPU
// seconds the node process (the agent) used during the runs, so time the
// agent spends off the packet path shows apart from the kernel's. Setups:
//   none         nothing in the node namespace (the bench's kernelOnly)
//   conntrack    one nft rule that needs conntrack (`ct state new counter`)
//   fastpath     the real Dataplane with the fast path, the lab's objects only
//   fastpath-big the same with the default-scale synthetic cluster (the bench's fastPath mode)
// With `--perf`, `perf record -a -g` samples the whole machine during each
// setup's last run (perf.SETUP.data in the working directory; read them with
// `perf report -i FILE --no-children --sort sym`).
// Needs root and `npm run build` first.
//   node bench/tools/fast-path-cost.mjs [connections=3000] [rounds=3] [--perf] [setups=none,conntrack,fastpath,fastpath-big]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const { sweepStaleLabs } = await import(join(dist, 'test/lab/lab.js'));
const { createBenchLab, benchPolicy } = await import(join(dist, 'bench/e2e.js'));

const args = process.argv.slice(2);
const perf = args.includes('--perf');
const positional = args.filter((a) => !a.startsWith('--'));
const connections = Number(positional[0] ?? 3000);
const rounds = Number(positional[1] ?? 3);
const setups = (positional[2] ?? 'none,conntrack,fastpath,fastpath-big').split(',');
const PORT = 80;

sweepStaleLabs();
const lab = await createBenchLab();
function runClient(count, concurrency = 8) {
  const client = lab.pod('bench/client');
  const server = lab.pod('bench/server');
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', client.netns, process.execPath, join(dist, 'bench/e2e-client.js'), `${server.ip},${server.ipv6}`, String(PORT), String(count), String(concurrency), '2000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`client exited ${code}`))));
  });
}

/** utime + stime of a process and its threads, in seconds. */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The pid of the node process inside `ip netns exec` (its only child). */
function innerPid(pid) {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    return children.length ? Number(children[0]) : pid;
  } catch {
    return pid;
  }
}

async function startSetup(setup) {
  if (setup === 'none') return { stop: async () => undefined };
  if (setup === 'conntrack') {
    await lab.execInNode('nft', ['-f', '-'], 'table inet fpcost {\n  chain c {\n    type filter hook postrouting priority -160;\n    ct state new counter\n  }\n}\n');
    return { stop: async () => { await lab.execInNode('nft', ['delete', 'table', 'inet', 'fpcost']); } };
  }
  const config = {
    pipeline: 'default', synthetic: setup === 'fastpath-big', objects: [...lab.manifests(), benchPolicy],
    tableName: 'kwpfpcost', queueId: 4210, dnsQueueId: 4211, packetThreadNice: -10, fastPath: true,
  };
  const proc = lab.spawnInNode(process.execPath, [join(dist, 'bench/e2e-node.js'), JSON.stringify(config)]);
  await proc.waitForLine((l) => l.includes('"event":"started"'), 120_000);
  return {
    pid: innerPid(proc.child.pid),
    stop: async () => {
      proc.send(JSON.stringify({ op: 'stop' }));
      await Promise.race([proc.waitForLine((l) => l.includes('"event":"stopped"'), 10_000).catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
      await proc.kill();
    },
  };
}

const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const best = new Map();
try {
  await runClient(300);
  for (let round = 0; round < rounds; round++) {
    for (const setup of setups) {
      const s = await startSetup(setup);
      try {
        await runClient(300); // the tuples into the sets, the pods' stacks warm
        const cpu0 = s.pid ? cpuSeconds(s.pid) : 0;
        let recorder;
        if (perf && round === rounds - 1) recorder = spawn('perf', ['record', '-a', '-g', '-o', `perf.${setup}.data`], { stdio: 'ignore' });
        if (recorder) await new Promise((r) => setTimeout(r, 500));
        const r = await runClient(connections);
        if (recorder) {
          recorder.kill('SIGINT');
          await new Promise((res) => recorder.once('exit', res));
        }
        const agentCpu = s.pid ? cpuSeconds(s.pid) - cpu0 : 0;
        const row = { connPerSec: Math.round(r.connPerSec), failed: r.failed, connectP50Micros: Math.round(r.connectP50Micros), agentCpuSeconds: agentCpu, seconds: Number(r.seconds.toFixed(2)), load: load() };
        console.log(JSON.stringify({ round: round + 1, setup, ...row }));
        if (!best.has(setup) || row.connPerSec > best.get(setup).connPerSec) best.set(setup, row);
      } finally {
        await s.stop();
      }
    }
  }
} finally {
  await lab.destroy();
}
const base = best.get('none')?.connPerSec;
for (const [setup, row] of best) console.log(`${setup.padEnd(13)} ${String(row.connPerSec).padStart(6)} conn/s${base ? ` (${(row.connPerSec / base).toFixed(3)} x none)` : ''}  connect p50 ${row.connectP50Micros} us  agent CPU ${row.agentCpuSeconds.toFixed(2)} s over ${row.seconds} s  load ${row.load}`);
