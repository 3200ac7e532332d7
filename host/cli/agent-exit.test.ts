// Fatal means exit: an agent that cannot do its job exits non-zero with its
// KWP_ERR line, promptly, instead of running half-started. The compiled CLI
// runs in a child process, as a DaemonSet would run it.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface Exit { code: number | null; signal: NodeJS.Signals | null; stderr: string; stdout: string; msAfterError?: number }

/** Runs kwp; `msAfterError` is how long the process lived after printing a KWP_ERR line. */
function kwp(args: string[], options: { nodeArgs?: string[]; uid?: number; gid?: number; onStderr?: (text: string, child: ReturnType<typeof spawn>) => void } = {}): Promise<Exit> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), 'bin/kwp.js', ...args], {
      cwd: root, uid: options.uid, gid: options.gid, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    let errorAt: number | undefined;
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stderr!.on('data', (d) => {
      stderr += d;
      if (errorAt === undefined && /KWP_ERR_[A-Z_]+: /.test(stderr)) errorAt = Date.now();
      options.onStderr?.(stderr, child);
    });
    child.stdout!.on('data', (d) => { stdout += d; });
    child.on('exit', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stderr, stdout, msAfterError: errorAt === undefined ? undefined : Date.now() - errorAt });
    });
  });
}

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'kwp-agent-exit-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const AGENT = ['agent', '--manifests', 'examples/basic/manifests', '--dataplane=off'];

describe('kwp agent exits when it cannot do its job', () => {
  it('exits 2 (a usage error) within a second when the admin token file is missing', async () => {
    const run = await kwp([...AGENT, '--state-dir', join(dir, 'state-token'), '--admin-token-file', join(dir, 'no-such-token')]);
    expect(run.stderr).toMatch(/KWP_ERR_USAGE: .*no-such-token: cannot read the admin token file/);
    expect(run.code).toBe(2);
    expect(run.msAfterError).toBeLessThan(1000);
    // Nothing started after the check: no source, no admin API.
    expect(run.stderr).not.toContain('admin API listening');
  });

  it('exits 1 within a second with KWP_ERR_NFQUEUE_UNAVAILABLE when the dataplane is on and the binding is missing', async () => {
    const run = await kwp(['agent', '--manifests', 'examples/basic/manifests', '--dataplane=on', '--admin-address', 'off', '--state-dir', join(dir, 'state-nfq')],
      { nodeArgs: ['-r', join(root, 'test', 'fixtures', 'without-nfqueue.cjs')] });
    expect(run.stderr).toMatch(/KWP_ERR_NFQUEUE_UNAVAILABLE: the nfqueue native binding could not be loaded \(Cannot find module 'nfqueue'\); install it/);
    expect(run.code).toBe(1);
    expect(run.msAfterError).toBeLessThan(1000);
  });

  it('names the state directory it cannot write and how to pick another, instead of a raw EACCES stack', async () => {
    const locked = join(dir, 'locked');
    mkdirSync(locked, { mode: 0o500 });
    chmodSync(locked, 0o500);
    // Root may write anywhere: run as nobody where the suite runs as root.
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const run = await kwp([...AGENT, '--admin-address', 'off', '--state-dir', join(locked, 'kwp')], asNobody);
    expect(run.stderr).toBe(`KWP_ERR_STATE_DIR: --state-dir ${join(locked, 'kwp')}: cannot create or write it (permission denied); run as a user who may write there (the default /var/lib/kwp needs root), or pass --state-dir with a directory you own, e.g. --state-dir ./kwp-state\n`);
    expect(run.code).toBe(1);
  });

  it('stops on SIGTERM and exits 0', async () => {
    let sent = false;
    const run = await kwp([...AGENT, '--admin-address', 'off', '--state-dir', join(dir, 'state-term')], {
      onStderr: (text, child) => {
        if (!sent && text.includes('"msg":"agent started"')) { sent = true; child.kill('SIGTERM'); }
      },
    });
    expect(sent).toBe(true);
    expect(run.stderr).toContain('"msg":"agent stopped"');
    expect(run.code).toBe(0);
  });
});

describe('kwp ip-tracker', () => {
  it('stops on SIGTERM while etcd is unreachable', async () => {
    const kubeconfigs = join(dir, 'clusters');
    mkdirSync(kubeconfigs);
    let sent = false;
    const run = await kwp(['ip-tracker', '--kubeconfig-dir', kubeconfigs, '--etcd', 'http://127.0.0.1:1'], {
      onStderr: (text, child) => {
        if (!sent && text.includes('publishing to etcd failed')) { sent = true; child.kill('SIGTERM'); }
      },
    });
    expect(sent).toBe(true);
    expect(run.stderr).toContain('"msg":"stopping"');
    expect(run.signal).toBeNull();
    expect(run.code).toBe(0);
  });
});
