// Runs the real `kwp agent` (bin/kwp.js, i.e. the compiled dist/) inside a
// lab's node namespace, reading the lab's manifests: what the demo and the
// end-to-end matrix tests enforce with.

import { tmpdir } from 'node:os';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Lab, LabProcess } from './lab.js';

export interface KwpAgentOptions {
  /** Manifest files or directories (`--manifests`), watched by the agent. */
  manifests: string[];
  /** More `kwp agent` flags, e.g. `--fail-open=false`. */
  args?: string[];
  readyTimeoutMs?: number;
  /** More environment variables for the agent (test hooks such as KWP_TEST_FAST_PATH_FLUSH_DELAY_MS). */
  env?: Record<string, string>;
}

export interface KwpAgentHandle {
  process: LabProcess;
  /** From the dataplane's start line: `nft` or `xtables`. */
  queueMode: string | undefined;
  /** Resolves with the next log line (after this call) containing `text`. */
  nextLog(text: string, timeoutMs?: number): Promise<string>;
  /** SIGTERM, wait for the agent to remove its rules, then make sure the process is gone. */
  stop(): Promise<void>;
}

function repositoryRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'bin', 'kwp.js'))) return dir;
  }
  throw new Error('kwp-agent: cannot find bin/kwp.js above this file');
}

export async function startKwpAgent(lab: Lab, options: KwpAgentOptions): Promise<KwpAgentHandle> {
  const root = repositoryRoot();
  if (!existsSync(join(root, 'dist', 'host', 'cli', 'main.js'))) {
    throw new Error(`kwp-agent: ${join(root, 'dist')} is not built; run \`npm run build\` first (bin/kwp.js runs the compiled CLI)`);
  }
  // A state directory of its own unless the caller names one: a persisted
  // pipeline from an earlier run must never override the one under test.
  const ownStateDir = (options.args ?? []).some((a) => a.startsWith('--state-dir')) ? undefined : mkdtempSync(join(tmpdir(), 'kwp-lab-state-'));
  const stateArgs = ownStateDir ? [`--state-dir=${ownStateDir}`] : [];
  // KWP_LAB_AGENT_ARGS adds flags to every lab agent, e.g. `--module-threads` to run the e2e suites with the wall-clock backstop on.
  const extra = (process.env.KWP_LAB_AGENT_ARGS ?? '').split(/\s+/).filter(Boolean);
  const args = [join(root, 'bin', 'kwp.js'), 'agent', ...options.manifests.map((m) => `--manifests=${m}`), `--node-name=${lab.nodeName}`, ...stateArgs, ...(options.args ?? []), ...extra];
  const proc = lab.spawnInNode(process.execPath, args, options.env ? { ...process.env, ...options.env } : undefined);
  // However the agent ends (stop, SIGKILL, the lab's teardown), its private state goes with it.
  if (ownStateDir) proc.child.once('exit', () => rmSync(ownStateDir, { recursive: true, force: true }));
  await proc.waitForLine((line) => line.includes('"msg":"agent started"'), options.readyTimeoutMs ?? 90_000, 'stderr');
  const running = proc.errorLines.find((line) => line.includes('"msg":"dataplane running'));
  const queueMode = running ? (JSON.parse(running) as { mode?: string }).mode : undefined;

  const nextLog = (text: string, timeoutMs = 30_000) => {
    // Armed only after waitForLine has scanned the lines already seen, so old lines never match.
    let armed = false;
    const waiting = proc.waitForLine((line) => armed && line.includes(text), timeoutMs, 'stderr');
    armed = true;
    return waiting;
  };

  return {
    process: proc,
    queueMode,
    nextLog,
    stop: async () => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
      const stopped = nextLog('"msg":"agent stopped"', 10_000).catch(() => undefined);
      proc.child.kill('SIGTERM');
      await stopped;
      // The nfqueue binding keeps the event loop alive after the agent stopped; finish it.
      await proc.kill('SIGKILL');
    },
  };
}
