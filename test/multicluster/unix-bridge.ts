// Carries TCP across network namespaces through a Unix socket (the file
// system is shared even where the network is not), so a process in a lab's
// node namespace can reach the test's etcd on the host's loopback:
//
//   in the node netns:  node unix-bridge.js listen <port> <socket>   TCP 127.0.0.1:<port> → <socket>
//   in the test:        serveUnixToTcp(<socket>, <etcd port>)        <socket> → TCP 127.0.0.1:<etcd port>

import { connect, createServer, type Server, type Socket } from 'node:net';

function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => { a.destroy(); b.destroy(); };
  a.on('error', end);
  b.on('error', end);
  a.on('close', end);
  b.on('close', end);
}

/** The test's side: a Unix socket whose connections go to TCP `127.0.0.1:port`. */
export async function serveUnixToTcp(socketPath: string, port: number): Promise<Server> {
  const server = createServer((client) => splice(client, connect(port, '127.0.0.1')));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return server;
}

async function listenTcpToUnix(port: number, socketPath: string): Promise<void> {
  const server = createServer((client) => splice(client, connect(socketPath)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  process.stdout.write('{"ready":true}\n');
}

if (process.argv[2] === 'listen') {
  listenTcpToUnix(Number(process.argv[3]), process.argv[4]).catch((err) => {
    process.stdout.write(`${JSON.stringify({ fatal: String(err) })}\n`);
    process.exit(1);
  });
}
