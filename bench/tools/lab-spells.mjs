// The e2e lab's slow spells, looked for directly: the bench's lab and client
// (bench/e2e.ts) with nothing in the node namespace, the client run back to
// back in chunks of `chunk` connections for `seconds`, and after each chunk
// what the lab's kernel says: the client's sockets in TIME_WAIT, the node's
// conntrack entries, and the deltas of the TCP counters (/proc/net/snmp and
// /proc/net/netstat) in the client, server and node namespaces, plus the
// machine's steal time. One JSON line per chunk; a chunk whose rate fell
// shows which counters moved with it.
// Needs root and `npm run build` first.
//   node bench/tools/lab-spells.mjs [seconds=150] [chunk=1000] [--conntrack]
//   --conntrack: one nft rule that needs conntrack in the node namespace (as the agent's rules do)
//   --client-sysctl=NAME=VALUE (repeatable): set in the client's namespace first, e.g.
//     --client-sysctl=net.ipv4.tcp_tw_reuse=2 for the kernel's default there
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const { sweepStaleLabs } = await import(join(dist, 'test/lab/lab.js'));
const { createBenchLab } = await import(join(dist, 'bench/e2e.js'));

const args = process.argv.slice(2);
const positional = args.filter((a) => !a.startsWith('--'));
const seconds = Number(positional[0] ?? 150);
const chunk = Number(positional[1] ?? 1000);
const withConntrack = args.includes('--conntrack');
const clientSysctls = args.filter((a) => a.startsWith('--client-sysctl=')).map((a) => a.slice('--client-sysctl='.length));
const PORT = 80;

sweepStaleLabs();
const lab = await createBenchLab();
const client = lab.pod('bench/client');
const server = lab.pod('bench/server');

function runClient(count) {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', client.netns, process.execPath, join(dist, 'bench/e2e-client.js'), `${server.ip},${server.ipv6}`, String(PORT), String(count), '8', '2000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`client exited ${code}`))));
  });
}

const inNetns = (netns, cmd, cmdArgs) => execFileSync('ip', ['netns', 'exec', netns, cmd, ...cmdArgs], { encoding: 'utf8' });

/** Every counter of /proc/net/snmp and /proc/net/netstat as seen in `netns`, by "Tcp.RetransSegs"-style names. */
function counters(netns) {
  const out = {};
  for (const file of ['/proc/net/snmp', '/proc/net/netstat']) {
    const lines = inNetns(netns, 'cat', [file]).trim().split('\n');
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const names = lines[i].split(/\s+/);
      const values = lines[i + 1].split(/\s+/);
      const group = names[0].replace(':', '');
      for (let j = 1; j < names.length; j++) out[`${group}.${names[j]}`] = Number(values[j]);
    }
  }
  return out;
}

const WATCHED = ['Tcp.ActiveOpens', 'Tcp.PassiveOpens', 'Tcp.RetransSegs', 'Tcp.AttemptFails', 'Tcp.OutRsts', 'Tcp.InErrs', 'TcpExt.TW', 'TcpExt.TWRecycled', 'TcpExt.TWKilled', 'TcpExt.TCPTimeWaitOverflow', 'TcpExt.TCPChallengeACK', 'TcpExt.TCPSynRetrans', 'TcpExt.ListenOverflows', 'TcpExt.ListenDrops', 'TcpExt.TCPTimeouts', 'TcpExt.PAWSEstab', 'TcpExt.TCPACKSkippedTimeWait', 'TcpExt.TCPACKSkippedSynRecv', 'TcpExt.TCPReqQFullDrop', 'TcpExt.TCPBacklogDrop', 'TcpExt.TCPAbortOnData', 'IpExt.InNoRoutes', 'Ip.OutNoRoutes'];

function delta(a, b) {
  const d = {};
  for (const k of WATCHED) if (b[k] !== undefined && b[k] - (a[k] ?? 0) !== 0) d[k.replace(/^(Tcp|TcpExt|Ip|IpExt)\./, '')] = b[k] - (a[k] ?? 0);
  return d;
}

const timeWait = () => Number(inNetns(client.netns, 'sh', ['-c', 'ss -tan state time-wait | tail -n +2 | wc -l']).trim());
const conntrackCount = () => {
  try { return Number(inNetns(lab.nodeNetns, 'cat', ['/proc/sys/net/netfilter/nf_conntrack_count']).trim()); } catch { return -1; }
};
/** Steal and idle jiffies of the whole machine (/proc/stat cpu line). */
const cpuLine = () => readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number);

try {
  if (withConntrack) await lab.execInNode('nft', ['-f', '-'], 'table inet spells {\n  chain c {\n    type filter hook postrouting priority -160;\n    ct state new counter\n  }\n}\n');
  for (const setting of clientSysctls) inNetns(client.netns, 'sysctl', ['-qw', setting]);
  console.log(JSON.stringify({ portRange: inNetns(client.netns, 'cat', ['/proc/sys/net/ipv4/ip_local_port_range']).trim().replace(/\s+/, '-'), twReuse: inNetns(client.netns, 'cat', ['/proc/sys/net/ipv4/tcp_tw_reuse']).trim(), conntrack: withConntrack }));
  await runClient(200);
  const t0 = Date.now();
  let total = 0;
  while (Date.now() - t0 < seconds * 1000) {
    const before = { c: counters(client.netns), s: counters(server.netns), n: counters(lab.nodeNetns), cpu: cpuLine() };
    const r = await runClient(chunk);
    total += r.ok;
    const after = { c: counters(client.netns), s: counters(server.netns), n: counters(lab.nodeNetns), cpu: cpuLine() };
    const jiffies = after.cpu.map((v, i) => v - before.cpu[i]);
    const all = jiffies.reduce((a, b) => a + b, 0) || 1;
    console.log(JSON.stringify({
      t: Math.round((Date.now() - t0) / 100) / 10, total, connPerSec: Math.round(r.connPerSec), failed: r.failed, connectP50: Math.round(r.connectP50Micros), connectP99: Math.round(r.connectP99Micros),
      timeWait: timeWait(), conntrack: conntrackCount(), stealPct: Math.round((jiffies[7] / all) * 1000) / 10, idlePct: Math.round((jiffies[3] / all) * 1000) / 10,
      client: delta(before.c, after.c), server: delta(before.s, after.s), node: delta(before.n, after.n), load: readFileSync('/proc/loadavg', 'utf8').split(' ')[0],
    }));
  }
} finally {
  await lab.destroy();
}
