// What `kwp agent` loads, from its installed entry (bin/kwp.js, the compiled
// CLI): the agent's module graph with the Kubernetes client's KubeConfig made
// narrow (host/sources/kubernetes/narrow-client.ts), so none of the client's
// generated API. A resolve hook that only reports (test/modules) watches the
// child; `kwp agent --help` loads the whole command before it prints.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nodeScriptArgs } from '../../test/lab/node-script.js';
import type { Resolution } from '../../test/modules/watch-resolutions.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

afterEach(() => { vi.doUnmock('./agent-load.js'); vi.resetModules(); });

function kwpAgentHelp(): Promise<{ stdout: string; resolutions: Resolution[] }> {
  const report = join(mkdtempSync(join(tmpdir(), 'kwp-agent-entry-')), 'resolutions.jsonl');
  const [watcher] = nodeScriptArgs(import.meta.url, '../../test/modules/watch-resolutions.js');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', pathToFileURL(watcher).href, 'bin/kwp.js', 'agent', '--help'], { cwd: root, env: { ...process.env, KWP_TEST_RESOLUTIONS: report } }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`kwp agent --help failed: ${err.message}\n${stderr}`));
      const lines = readFileSync(report, 'utf8').trim().split('\n').filter(Boolean);
      resolve({ stdout, resolutions: lines.map((l) => JSON.parse(l) as Resolution) });
    });
  });
}

describe("kwp agent's entry", () => {
  it("loads the agent with KubeConfig made narrow, and nothing of the client's generated API", async () => {
    const { stdout, resolutions } = await kwpAgentHelp();
    expect(stdout).toContain('usage: kwp agent');
    // KubeConfig's imports came from the data: module narrow-client.ts makes of its source ...
    expect(resolutions.filter((r) => r.parentURL === 'data:' && r.url.endsWith('/narrow-gen.js'))).toHaveLength(1);
    expect(resolutions.some((r) => r.url.endsWith('/@kubernetes/client-node/dist/watch.js'))).toBe(true);
    // ... and neither the package's own config.js nor its index, generated or not, was resolved.
    const whole = resolutions.filter((r) => /\/@kubernetes\/client-node\/dist\/(config\.js|index\.js|gen\/index\.js|gen\/(apis|models|types)\/)/.test(r.url));
    expect(whole).toEqual([]);
  }, 120_000);

  it('runs the agent command through loadAgentCommand, the loader the memory bench measures', async () => {
    const runAgent = vi.fn(async () => 0);
    const loadAgentCommand = vi.fn(async () => runAgent);
    vi.doMock('./agent-load.js', () => ({ loadAgentCommand }));
    const { main } = await import('./main.js');
    expect(await main(['agent', '--help'])).toBe(0);
    expect(loadAgentCommand).toHaveBeenCalledTimes(1);
    expect(runAgent).toHaveBeenCalledWith(['--help']);
  });
});
