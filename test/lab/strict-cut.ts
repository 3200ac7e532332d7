// Runs test/lab/strict-cut-node.ts in a network namespace of its own (named
// kwpsc-PID-N, deleted afterwards, leftovers of dead runs swept first) and
// returns its report. Needs root, conntrack, and the nfqueue binding.

import { execFileSync, spawn } from 'node:child_process';
import { nodeScriptArgs } from './node-script.js';
import type { StrictCutConfig, StrictCutReport } from './strict-cut-node.js';

export type { StrictCutConfig, StrictCutReport };

const PREFIX = 'kwpsc-';
let runs = 0;

function namespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).split('\n').map((l) => l.split(' ')[0]).filter((n) => n.startsWith(PREFIX));
}

/** Delete namespaces left by strict-cut runs whose process is gone. */
function sweepStale(): void {
  for (const ns of namespaces()) {
    const pid = Number(ns.slice(PREFIX.length).split('-')[0]);
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {
      alive = false;
    }
    if (!alive) execFileSync('ip', ['netns', 'delete', ns]);
  }
}

export async function runStrictCut(config: StrictCutConfig, timeoutMs = 120_000): Promise<StrictCutReport> {
  sweepStale();
  const ns = `${PREFIX}${process.pid}-${runs++}`;
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const args = ['netns', 'exec', ns, process.execPath, ...nodeScriptArgs(import.meta.url, './strict-cut-node.js'), JSON.stringify(config)];
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (c) => (out += c));
      child.stderr.on('data', (c) => (err += c));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('error', reject);
      child.on('exit', (exitCode) => {
        clearTimeout(timer);
        resolve({ code: exitCode, stdout: out, stderr: err });
      });
    });
    const last = stdout.trim().split('\n').at(-1) ?? '';
    let parsed: (StrictCutReport & { error?: undefined }) | { error: string } | undefined;
    try {
      parsed = JSON.parse(last);
    } catch {
      parsed = undefined;
    }
    if (code !== 0 || !parsed || parsed.error !== undefined) {
      throw new Error(`strict-cut run in ${ns} failed (exit ${code}): ${parsed?.error ?? last}; stderr: ${stderr.trim().split('\n').slice(-10).join(' | ')}`);
    }
    return parsed;
  } finally {
    execFileSync('ip', ['netns', 'delete', ns]);
  }
}
