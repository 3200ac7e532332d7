// The e2e bench's client, run inside a lab pod's network namespace: opens
// `count` short TCP connections, `concurrency` at a time; each sends one
// line, waits for its echo and closes. `hosts` may list several addresses
// (comma-separated, an IPv4 and an IPv6 one, say) and `ports` one port or a
// range (`20000-20063`): connection i goes to host i mod hosts, port
// (i div hosts) mod ports, so a run over a range opens hosts × ports distinct
// tuples before it repeats one. Prints one JSON line, with the connect times
// (connect() to the handshake's end, i.e. the SYN's trip through the node
// and back) as p50/p99 in microseconds, the CPU time this process's threads
// ran over the run (schedstat: the softirqs that run in its context, where
// much of the kernel's forwarding and netfilter work happens, included), and
// with `samples` every connect time.
//   node e2e-client.js <hosts> <ports> <count> <concurrency> <timeoutMs> [samples]
import { readdirSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';

/** Nanoseconds the threads of this process have run on a CPU (/proc/self/task/T/schedstat, first field). */
function ranNanos(): number {
  let sum = 0;
  for (const task of readdirSync('/proc/self/task')) {
    try {
      sum += Number(readFileSync(`/proc/self/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return sum;
}

const [hostsText, portsText, countText, concurrencyText, timeoutText, samplesFlag] = process.argv.slice(2);
const hosts = hostsText.split(',');
const ports = parsePorts(portsText);
const count = Number(countText);
const concurrency = Number(concurrencyText ?? 8);
const timeoutMs = Number(timeoutText ?? 1000);

function parsePorts(text: string): number[] {
  const [first, last] = text.split('-').map(Number);
  if (!Number.isInteger(first) || (last !== undefined && !(Number.isInteger(last) && last >= first))) throw new Error(`e2e client: ports "${text}" must be a port or a range low-high`);
  return Array.from({ length: (last ?? first) - first + 1 }, (_, i) => first + i);
}

const connectMicros: number[] = [];

function once(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let finished = false;
    const done = (ok: boolean) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.setNoDelay(true);
    socket.on('error', () => done(false));
    socket.on('data', () => done(true));
    const t0 = performance.now();
    socket.connect(port, host, () => {
      connectMicros.push((performance.now() - t0) * 1000);
      socket.write('ping\n');
    });
  });
}

async function main(): Promise<void> {
  let started = 0;
  let ok = 0;
  let failed = 0;
  const t0 = performance.now();
  const ran0 = ranNanos();
  const worker = async () => {
    while (started < count) {
      const i = started++;
      if (await once(hosts[i % hosts.length], ports[Math.floor(i / hosts.length) % ports.length])) ok++;
      else failed++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - t0) / 1000;
  const cpuMicros = (ranNanos() - ran0) / 1000;
  const sorted = [...connectMicros].sort((a, b) => a - b);
  const at = (q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : 0);
  const result = { ok, failed, seconds, connPerSec: ok / seconds, connectP50Micros: at(0.5), connectP99Micros: at(0.99), cpuMicros };
  process.stdout.write(JSON.stringify(samplesFlag === 'samples' ? { ...result, connectMicros: connectMicros.map((m) => Math.round(m * 10) / 10) } : result) + '\n');
}

main().then(() => process.exit(0), (err) => { process.stderr.write(String(err) + '\n'); process.exit(1); });
