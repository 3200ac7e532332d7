// A real etcd for tests: Debian's etcd-server on loopback, a fresh data
// directory and free ports, stoppable and restartable on the same ports (the
// data survives a restart, as it would for a real member coming back).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url: string, timeoutMs: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`etcd exited with ${child.exitCode}:\n${log()}`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.ok && ((await res.json()) as { health?: string }).health === 'true') return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`etcd at ${url} did not become healthy within ${timeoutMs} ms:\n${log()}`);
}

export class EtcdServer {
  private child: ChildProcess | undefined;
  private output = '';

  private constructor(
    readonly dataDir: string,
    readonly clientPort: number,
    readonly peerPort: number,
  ) {}

  /** The client URL, e.g. `http://127.0.0.1:23791`. */
  get url(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  static async start(): Promise<EtcdServer> {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'kwp-etcd-'));
    const server = new EtcdServer(dataDir, await freePort(), await freePort());
    await server.resume();
    return server;
  }

  /** Starts etcd again on the same ports and data directory. */
  async resume(): Promise<void> {
    if (this.running) return;
    this.output = '';
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const child = spawn('etcd', [
      '--name', 'kwp-test',
      '--data-dir', this.dataDir,
      '--listen-client-urls', this.url,
      '--advertise-client-urls', this.url,
      '--listen-peer-urls', peer,
      '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `kwp-test=${peer}`,
      '--log-level', 'warn',
      '--logger', 'zap',
    ], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ETCD_UNSUPPORTED_ARCH: process.env.ETCD_UNSUPPORTED_ARCH ?? '' } });
    child.stdout!.on('data', (d) => { this.output = (this.output + d).slice(-8000); });
    child.stderr!.on('data', (d) => { this.output = (this.output + d).slice(-8000); });
    this.child = child;
    await waitForHealth(this.url, 20_000, child, () => this.output);
  }

  /** Stops the process (SIGTERM, then SIGKILL); the data directory stays. */
  async pause(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  async stop(): Promise<void> {
    await this.pause();
    await rm(this.dataDir, { recursive: true, force: true });
  }

  /** The last lines etcd printed, for failure messages. */
  log(): string {
    return this.output;
  }
}
