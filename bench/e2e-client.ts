// The e2e bench's client, run inside a lab pod's network namespace: opens
// `count` short TCP connections to host:port, `concurrency` at a time; each
// sends one line, waits for its echo and closes. Prints one JSON line.
//   node e2e-client.js <host> <port> <count> <concurrency> <timeoutMs>
import { Socket } from 'node:net';

const [host, portText, countText, concurrencyText, timeoutText] = process.argv.slice(2);
const port = Number(portText);
const count = Number(countText);
const concurrency = Number(concurrencyText ?? 8);
const timeoutMs = Number(timeoutText ?? 1000);

function once(): Promise<boolean> {
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
    socket.connect(port, host, () => socket.write('ping\n'));
  });
}

async function main(): Promise<void> {
  let started = 0;
  let ok = 0;
  let failed = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (started < count) {
      started++;
      if (await once()) ok++;
      else failed++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(JSON.stringify({ ok, failed, seconds, connPerSec: ok / seconds }) + '\n');
}

main().then(() => process.exit(0), (err) => { process.stderr.write(String(err) + '\n'); process.exit(1); });
