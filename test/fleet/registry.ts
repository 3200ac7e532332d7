// A real OCI registry for tests: Debian's docker-registry (Distribution 2.8)
// on a free loopback port, with its own config file and a temporary storage
// directory, so suites never share blobs. `stop()` ends the process and keeps
// the storage, so `start()` again brings the same contents back (a registry
// outage); `destroy()` removes everything.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REGISTRY_BINARY = '/usr/bin/docker-registry';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export class TestRegistry {
  private child: ChildProcess | undefined;
  private output = '';

  private constructor(readonly dir: string, readonly port: number) {}

  /** `127.0.0.1:PORT`, the registry part of an OCI reference. */
  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  static available(): boolean {
    return existsSync(REGISTRY_BINARY);
  }

  static async start(port?: number): Promise<TestRegistry> {
    if (!TestRegistry.available()) throw new Error(`${REGISTRY_BINARY} is missing: apt-get install docker-registry (.ci/run installs it)`);
    const r = new TestRegistry(mkdtempSync(join(tmpdir(), 'kwp-registry-')), port ?? await freePort());
    await r.start();
    return r;
  }

  async start(): Promise<void> {
    if (this.child) return;
    const config = join(this.dir, 'config.yml');
    writeFileSync(config, [
      'version: 0.1',
      'log:', '  level: warn', '  accesslog:', '    disabled: true',
      'storage:', '  filesystem:', `    rootdirectory: ${join(this.dir, 'storage')}`, '  delete:', '    enabled: true',
      'http:', `  addr: 127.0.0.1:${this.port}`,
      '',
    ].join('\n'));
    const child = spawn(REGISTRY_BINARY, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (this.output += d));
    child.stderr!.on('data', (d) => (this.output += d));
    this.child = child;
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${this.output.slice(-2000)}`);
      try {
        const res = await fetch(`http://${this.host}/v2/`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200) return;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`docker-registry did not answer on ${this.host} within 20 s: ${this.output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Stops the process; the storage stays for a later start(). */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
