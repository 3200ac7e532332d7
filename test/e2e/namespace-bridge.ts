// Lets a process inside a lab's node namespace reach a server the test runs
// on the host's loopback (the API-server emulator), which that namespace
// cannot see: a Unix socket is a file, and files are shared between network
// namespaces. The test process forwards the Unix socket to the server's TCP
// port (`forwardUnixToTcp`); this file, run as a script inside the namespace,
// listens on that namespace's loopback and forwards to the Unix socket. When
// the server is down, connections through the bridge are reset, as a client
// of a stopped API server would see them.

import { createServer, connect, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

function splice(a: Socket, b: Socket): void {
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
  a.pipe(b);
  b.pipe(a);
}

/** In the test process: every connection to the Unix socket `path` is forwarded to `127.0.0.1:port`. */
export async function forwardUnixToTcp(path: string, port: number): Promise<Server> {
  const server = createServer((client) => splice(client, connect(port, '127.0.0.1')));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return server;
}

/** Inside the namespace: `127.0.0.1:port` forwarded to the Unix socket `path`. Prints {"ready":true}. */
function listenTcpToUnix(port: number, path: string): void {
  const server = createServer((client) => splice(client, connect(path)));
  server.listen(port, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ ready: true, port })}\n`));
  // The lab kills its processes; a test process that vanished takes stdin with it.
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  listenTcpToUnix(Number(process.argv[2]), process.argv[3]);
}
