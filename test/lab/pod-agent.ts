// The process that lives in each lab pod's network namespace. It serves TCP
// and UDP echo on the pod's ports (and DNS on UDP 53 when given records), and
// probes other addresses on command. One resident process per pod means a
// reachability matrix costs messages, not a `node` start per probe.
//
// Protocol: argv[2] is a JSON PodAgentConfig; it prints {"ready":true} once
// listening, then reads JSON commands on stdin, one per line, and answers each
// with one JSON line carrying the same id. It exits when stdin closes, so a
// parent that dies takes its pods' agents with it.

import { createServer, Socket } from 'node:net';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createInterface } from 'node:readline';
import { buildDnsResponse, queryName } from '../../host/dataplane/dns-builder.js';
import type { PodAgentCommand, PodAgentConfig, PodAgentReply } from './pod-protocol.js';

const held = new Map<number, Socket>();
const LATE_REPLY_MS = 1500;

function reply(message: PodAgentReply | { ready: true } | { fatal: string }): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function serveTcp(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      socket.on('error', () => socket.destroy());
      socket.on('data', (chunk) => {
        socket.write(chunk);
        // "later": the server speaks again on its own, to test connections whose responder talks first.
        if (chunk.includes('later\n')) setTimeout(() => socket.writable && socket.write('late\n'), LATE_REPLY_MS);
      });
    });
    server.on('error', reject);
    // '::' is dual-stack on Linux: one listener serves IPv4 and IPv6 clients.
    server.listen(port, '::', () => resolve());
  });
}

function bindUdp(port: number, onMessage: (socket: UdpSocket, msg: Buffer, host: string, port: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createSocket({ type: 'udp6', ipv6Only: false });
    socket.on('error', reject);
    socket.on('message', (msg, rinfo) => onMessage(socket, msg, rinfo.address, rinfo.port));
    socket.bind(port, '::', () => resolve());
  });
}

function answerDns(records: Record<string, string[]>, query: Buffer): Buffer | undefined {
  const question = queryName(query);
  if (!question) return undefined;
  const addresses = records[question.name.toLowerCase()] ?? [];
  const response = buildDnsResponse({
    id: question.id,
    question: { name: question.name, type: 'A' },
    answers: question.type === 1 ? addresses.map((address) => ({ name: question.name, type: 'A' as const, address, ttl: 30 })) : [],
    rcode: addresses.length === 0 ? 3 : 0,
  });
  return Buffer.from(response);
}

function withTimeout(timeoutMs: number, body: (done: (error?: string) => void) => () => void): Promise<{ ok: boolean; ms: number; error?: string }> {
  const started = performance.now();
  return new Promise((resolve) => {
    let finished = false;
    let cleanup: () => void = () => {};
    const done = (error?: string) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      cleanup();
      resolve({ ok: error === undefined, ms: performance.now() - started, ...(error === undefined ? {} : { error }) });
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    cleanup = body(done);
  });
}

function tcpEcho(host: string, port: number, timeoutMs: number, keep?: number) {
  return withTimeout(timeoutMs, (done) => {
    const socket = new Socket();
    let received = '';
    socket.setNoDelay(true);
    socket.on('error', (err) => done((err as NodeJS.ErrnoException).code ?? err.message));
    socket.on('data', (chunk) => {
      received += chunk.toString();
      if (received.includes('ping\n')) {
        if (keep !== undefined) {
          socket.removeAllListeners('data');
          held.set(keep, socket);
        }
        done();
      }
    });
    socket.connect(port, host, () => socket.write('ping\n'));
    return () => {
      if (keep === undefined || !held.has(keep)) socket.destroy();
    };
  });
}

function sendOnHeld(conn: number, timeoutMs: number, line = 'again\n') {
  const socket = held.get(conn);
  if (!socket) return Promise.resolve({ ok: false, ms: 0, error: `no held connection ${conn}` });
  return withTimeout(timeoutMs, (done) => {
    let received = '';
    const onData = (chunk: Buffer) => {
      received += chunk.toString();
      if (received.includes(line)) done();
    };
    const onClose = () => done('closed');
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.write(line);
    return () => {
      socket.off('data', onData);
      socket.off('close', onClose);
    };
  });
}

/** Resolves true when `line` arrives on the socket within the server's delay plus a margin, else false. */
const lateReplies = new Map<number, Promise<boolean>>();
function awaitLine(socket: Socket, line: string): Promise<boolean> {
  return new Promise((resolve) => {
    let received = '';
    const finish = (arrived: boolean) => {
      clearTimeout(timer);
      socket.off('data', onData);
      resolve(arrived);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.toString();
      if (received.includes(line)) finish(true);
    };
    const timer = setTimeout(() => finish(false), LATE_REPLY_MS + 2500);
    socket.on('data', onData);
  });
}

function udpRequest(host: string, port: number, payload: Buffer, timeoutMs: number) {
  return withTimeout(timeoutMs, (done) => {
    const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    socket.on('error', (err) => done(err.message));
    socket.on('message', () => done());
    socket.send(payload, port, host);
    return () => socket.close();
  });
}

function dnsQuery(name: string): Buffer {
  const labels = name.split('.').flatMap((label) => [label.length, ...Buffer.from(label)]);
  return Buffer.from([0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, ...labels, 0, 0, 1, 0, 1]);
}

async function run(command: PodAgentCommand): Promise<void> {
  let result: { ok: boolean; ms: number; error?: string };
  switch (command.op) {
    case 'tcp':
      result = await tcpEcho(command.host, command.port, command.timeoutMs);
      break;
    case 'hold':
      result = await tcpEcho(command.host, command.port, command.timeoutMs, command.id);
      break;
    case 'send':
      result = await sendOnHeld(command.conn, command.timeoutMs);
      break;
    case 'later':
      result = await sendOnHeld(command.conn, command.timeoutMs, 'later\n');
      if (result.ok) lateReplies.set(command.conn, awaitLine(held.get(command.conn)!, 'late\n'));
      break;
    case 'late':
      result = await (lateReplies.get(command.conn) ?? Promise.resolve(false)).then((arrived) =>
        arrived ? { ok: true, ms: 0 } : { ok: false, ms: 0, error: 'no late reply' },
      );
      break;
    case 'close':
      held.get(command.conn)?.destroy();
      held.delete(command.conn);
      result = { ok: true, ms: 0 };
      break;
    case 'udp':
      result = await udpRequest(command.host, command.port, Buffer.from('ping'), command.timeoutMs);
      break;
    case 'dns':
      result = await udpRequest(command.server, 53, dnsQuery(command.name), command.timeoutMs);
      break;
  }
  reply({ id: command.id, ...result });
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as PodAgentConfig;
  for (const port of config.tcpPorts ?? []) await serveTcp(port);
  for (const port of config.udpPorts ?? []) await bindUdp(port, (socket, msg, host, from) => socket.send(msg, from, host));
  const records = config.dnsRecords;
  if (records) {
    await bindUdp(53, (socket, msg, host, from) => {
      const answer = answerDns(records, msg);
      if (answer) socket.send(answer, from, host);
    });
  }
  reply({ ready: true });
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === '') return;
    run(JSON.parse(line) as PodAgentCommand).catch((err) => reply({ fatal: String(err) }));
  });
  lines.on('close', () => process.exit(0));
}

main().catch((err) => {
  reply({ fatal: String(err) });
  process.exit(1);
});
