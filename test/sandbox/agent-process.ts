// A real `kwp agent --dataplane=off` process for the sandbox tests: hostile
// inputs go through its admin API over HTTP, while a watcher asks /healthz
// every 100 ms (each answer must come within 1 s) and reads the process's
// RSS from /proc, so a test can show the agent stayed alive, responsive and
// within its memory bound throughout.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const TOKEN = 'sandbox-test-token-0123456789abcdef';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface HealthRecord { slowestMs: number; failures: number; checks: number; peakRssMiB: number }

export class AgentProcess {
  readonly url: string;
  private output = '';
  private watcher: NodeJS.Timeout | undefined;
  health: HealthRecord = { slowestMs: 0, failures: 0, checks: 0, peakRssMiB: 0 };

  private constructor(readonly child: ChildProcess, port: number) {
    this.url = `http://127.0.0.1:${port}`;
    child.stdout?.on('data', (c) => { this.output = (this.output + c).slice(-20000); });
    child.stderr?.on('data', (c) => { this.output = (this.output + c).slice(-20000); });
  }

  /** Starts the agent on the basic example and waits until /healthz answers. */
  static async start(extraArgs: string[] = []): Promise<AgentProcess> {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-sandbox-agent-'));
    writeFileSync(join(dir, 'token'), TOKEN);
    const port = await freePort();
    const child = spawn(process.execPath, ['bin/kwp.js', 'agent', '--manifests', 'examples/basic/manifests', '--dataplane=off',
      '--state-dir', join(dir, 'state'), '--admin-address', `127.0.0.1:${port}`, '--admin-token-file', join(dir, 'token'), ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] });
    const agent = new AgentProcess(child, port);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the agent exited with ${child.exitCode}: ${agent.output}`);
      try {
        if ((await fetch(`${agent.url}/healthz`)).ok) break;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`the agent did not answer /healthz within 60 s: ${agent.output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    return agent;
  }

  get alive(): boolean { return this.child.exitCode === null && this.child.signalCode === null; }
  get log(): string { return this.output; }

  rssMiB(): number {
    const status = readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
  }

  /** Starts asking /healthz every 100 ms, recording the slowest answer, failures and the peak RSS. */
  watch(): void {
    this.health = { slowestMs: 0, failures: 0, checks: 0, peakRssMiB: 0 };
    const tick = async () => {
      const t = Date.now();
      try {
        const res = await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(5000) });
        if (!res.ok) this.health.failures++;
        await res.text();
      } catch {
        this.health.failures++;
      }
      this.health.checks++;
      this.health.slowestMs = Math.max(this.health.slowestMs, Date.now() - t);
      if (this.alive) this.health.peakRssMiB = Math.max(this.health.peakRssMiB, this.rssMiB());
      if (this.watcher) this.watcher = setTimeout(tick, 100);
    };
    this.watcher = setTimeout(tick, 0);
  }

  async unwatch(): Promise<HealthRecord> {
    clearTimeout(this.watcher);
    this.watcher = undefined;
    await new Promise((r) => setTimeout(r, 150));
    return this.health;
  }

  async request(method: string, path: string, body?: Uint8Array | object): Promise<{ status: number; json: any; ms: number; headers: Headers }> {
    const t = Date.now();
    const binary = body instanceof Uint8Array;
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': binary ? 'application/wasm' : 'application/json' }) },
      body: body === undefined ? undefined : binary ? Buffer.from(body) : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined, ms: Date.now() - t, headers: res.headers };
  }

  upload(bytes: Uint8Array, name: string, version: string) {
    return this.request('POST', `/v1/modules?name=${name}&version=${version}`, bytes);
  }

  async stop(): Promise<void> {
    await this.unwatch();
    if (!this.alive) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    if (this.alive) this.child.kill('SIGKILL');
  }
}
