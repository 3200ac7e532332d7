// A real `kwp agent --dataplane=off` process for the sandbox tests: hostile
// inputs go through its admin API over HTTP, while a watcher asks /healthz
// every 100 ms (each answer must come within 1 s) and reads the process's
// RSS from /proc, so a test can show the agent stayed alive, responsive and
// within its memory bound throughout.
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';

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
  private readonly chunks: Buffer[] = [];
  /** Bytes the agent has written to stdout and stderr: what a module can make it log. */
  outputBytes = 0;
  private watcher: NodeJS.Timeout | undefined;
  health: HealthRecord = { slowestMs: 0, failures: 0, checks: 0, peakRssMiB: 0 };

  private constructor(readonly child: ChildProcess, port: number) {
    this.url = `http://127.0.0.1:${port}`;
    // Everything up to 64 MiB is kept for tests to read; past that only counted.
    const keep = (c: Buffer) => {
      this.outputBytes += c.length;
      if (this.outputBytes <= 64 * 1024 * 1024) this.chunks.push(c);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  /** Starts the agent on the basic example (or `manifests`) and waits until /healthz answers. */
  static async start(extraArgs: string[] = [], manifests = 'examples/basic/manifests'): Promise<AgentProcess> {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-sandbox-agent-'));
    writeFileSync(join(dir, 'token'), TOKEN);
    const port = await freePort();
    const child = spawn(process.execPath, ['bin/kwp.js', 'agent', '--manifests', manifests, '--dataplane=off',
      '--state-dir', join(dir, 'state'), '--admin-address', `127.0.0.1:${port}`, '--admin-token-file', join(dir, 'token'), ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] });
    const agent = new AgentProcess(child, port);
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the agent exited with ${child.exitCode}: ${agent.log.slice(-4000)}`);
      try {
        if ((await fetch(`${agent.url}/healthz`)).ok) break;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`the agent did not answer /healthz within 60 s: ${agent.log.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    return agent;
  }

  get alive(): boolean { return this.child.exitCode === null && this.child.signalCode === null; }
  /** What the agent wrote to stdout and stderr (the first 64 MiB). */
  get log(): string { return Buffer.concat(this.chunks).toString('utf8'); }

  rssMiB(): number {
    const status = readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
  }

  /** Starts asking /healthz every 100 ms, recording the slowest answer, failures and the peak RSS. */
  watch(): void {
    this.health = { slowestMs: 0, failures: 0, checks: 0, peakRssMiB: 0 };
    const tick = async () => {
      this.checking = this.check();
      await this.checking;
      if (this.watcher) this.watcher = setTimeout(tick, 100);
    };
    this.watcher = setTimeout(tick, 0);
  }

  private checking: Promise<void> | undefined;

  private async check(): Promise<void> {
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
  }

  /** Runs `attack` while watching /healthz and the RSS. */
  async during<T>(attack: () => Promise<T>): Promise<{ result: T; health: HealthRecord }> {
    this.watch();
    try {
      const result = await attack();
      return { result, health: await this.unwatch() };
    } finally {
      if (this.watcher) await this.unwatch();
    }
  }

  /** Stops watching once the check in flight is done; an attack shorter than one check still gets one, after it. */
  async unwatch(): Promise<HealthRecord> {
    clearTimeout(this.watcher);
    this.watcher = undefined;
    await this.checking;
    if (this.health.checks === 0) await this.check();
    return this.health;
  }

  /**
   * One admin API request over HTTP. `from` is the local address to send it
   * from (any of 127.0.0.0/8), which is the client address the agent's
   * per-address upload buckets see.
   */
  request(method: string, path: string, body?: Uint8Array | object, from?: string): Promise<{ status: number; json: any; text: string; ms: number; bytes: number; headers: Record<string, string | string[] | undefined> }> {
    const t = Date.now();
    const binary = body instanceof Uint8Array;
    const payload = body === undefined ? undefined : binary ? Buffer.from(body) : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
    if (payload) Object.assign(headers, { 'content-type': binary ? 'application/wasm' : 'application/json', 'content-length': String(payload.length) });
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${this.url}${path}`, { method, headers, localAddress: from }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any;
          try { json = text ? JSON.parse(text) : undefined; } catch { json = { unparsed: text.slice(0, 200) }; }
          resolve({ status: res.statusCode!, json, text, ms: Date.now() - t, bytes: text.length, headers: res.headers });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  upload(bytes: Uint8Array, name: string, version: string, from?: string) {
    return this.request('POST', `/v1/modules?name=${name}&version=${version}`, bytes, from);
  }

  /**
   * An upload as a patient client sends it: each from its own loopback
   * address (the per-address bucket allows 5 in a burst), and after a 429
   * again once the Retry-After has passed (the bucket all clients share
   * allows 20 in a burst, then 2 a second).
   */
  async uploadPatiently(bytes: Uint8Array, name: string, version: string) {
    for (;;) {
      const from = `127.0.${1 + (this.uploads >> 8) % 250}.${1 + (this.uploads++ & 0xff) % 250}`;
      const res = await this.upload(bytes, name, version, from);
      if (res.status !== 429) return res;
      await new Promise((r) => setTimeout(r, 1000 * Number(res.headers['retry-after'] ?? 1)));
    }
  }

  private uploads = 0;

  /** POST /v1/explain for a flow between two pods (namespace/name). */
  explain(src: string, dst: string, port: number) {
    return this.request('POST', '/v1/explain', { src, dst, port });
  }

  /**
   * Uploads `bytes` as `name`@0.0.1 and makes it the pipeline's one stage
   * `hostile`: the start of every real-agent attack on a single module.
   */
  async runAlone(bytes: Uint8Array, name: string): Promise<void> {
    const up = await this.uploadPatiently(bytes, name, '0.0.1');
    if (up.status !== 201) throw new Error(`upload of ${name} answered ${up.status}: ${JSON.stringify(up.json)}`);
    const put = await this.request('PUT', '/v1/pipeline', { stages: [{ name: 'hostile', module: name }] });
    if (put.status !== 200) throw new Error(`PUT /v1/pipeline answered ${put.status}: ${JSON.stringify(put.json)}`);
  }

  /** Explains x/a -> x/b on port 80 until the stage (rebuilt after an attack) accepts it again, at most 30 s. */
  async decidedAgain(): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await this.explain('x/a', 'x/b', 80);
      if (res.json.verdict === 'allow' && !res.json.egress[0].failure) return;
      if (Date.now() > deadline) throw new Error(`port 80 was not decided again within 30 s: ${JSON.stringify(res.json)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
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

/**
 * docs/sandbox.md: the agent's RSS stays below memoryBudgetMiB plus about
 * 150 MiB of base, plus up to 8 MiB for the thread of each stage instance
 * kept (active, rollback and building pipelines), which the budget does not
 * count.
 */
export const THREAD_MIB = 8;
export const rssBoundMiB = (memoryBudgetMiB = DEFAULT_LIMITS.memoryBudgetMiB, stagesKept = 0) => memoryBudgetMiB + 150 + THREAD_MIB * stagesKept;

/**
 * Issue 14's "bounded": the agent is alive, every /healthz asked during the
 * attack answered (within 1 s), and its RSS stayed below the bound.
 */
export function expectBounded(a: AgentProcess, health: HealthRecord, rssBound = rssBoundMiB()): void {
  expect(a.alive, a.log.slice(-4000)).toBe(true);
  expect(health.checks).toBeGreaterThan(0);
  expect(health.failures).toBe(0);
  expect(health.slowestMs).toBeLessThan(1000);
  expect(health.peakRssMiB).toBeGreaterThan(0);
  expect(health.peakRssMiB).toBeLessThan(rssBound);
}
