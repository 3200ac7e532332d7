// The whole path of a plugin author, in a temp dir: kwp sdk new, one npm
// install from this checkout, npm run build, the project's own tests, then the
// module it built deciding traffic in an in-process pipeline. Slow (an npm
// install and an asc build), so it is one test.
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runSdk } from './sdk.js';
import { loadModule, namespace, pod, startPluginCluster } from '../testing/index.js';
import { adminHarness, auth } from '../admin/admin-harness.js';

const run = promisify(execFile);
const repo = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** The child npm and vitest must not think they are workers of this vitest. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VITEST') && k !== 'NODE_ENV' && k !== 'TEST') env[k] = v;
  return env;
}

async function npm(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout, stderr } = await run('npm', args, { cwd, env: childEnv(), timeout: 600_000, maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm ${args.join(' ')} in ${cwd} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

describe('a project from kwp sdk new', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kwp-scaffold-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('installs, builds, passes its own test and decides traffic in the agent pipeline', async () => {
    expect(existsSync(join(repo, 'dist', 'host', 'testing', 'index.js')), 'run "npm run build" first: the project imports the compiled test kit').toBe(true);
    const project = join(dir, 'quarantine');
    expect(await runSdk(['new', 'quarantine', project, '--sdk', repo])).toBe(0);

    await npm(['install', '--no-audit', '--no-fund', '--prefer-offline'], project);
    await npm(['run', 'build'], project);
    const wasm = join(project, 'build', 'quarantine.wasm');
    expect(existsSync(wasm)).toBe(true);

    const testOutput = await npm(['exec', '--', 'vitest', 'run'], project);
    expect(testOutput.replace(/\x1b\[[0-9;]*m/g, '')).toMatch(/Tests\s+3 passed \(3\)/);

    // What `kwp module push` will be handed: the agent's loader accepts it, with module.json's metadata.
    const module = loadModule(readFileSync(wasm));
    expect(module.meta).toMatchObject({ name: 'quarantine', version: '0.1.0', kinds: [], failurePolicy: 'fail-open', abi: { major: 1, minor: 0 } });

    const allowAll = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'open', namespace: 'prod' },
      spec: { podSelector: {}, ingress: [{}], policyTypes: ['Ingress'] },
    };
    const cluster = await startPluginCluster({
      module,
      objects: [namespace('prod'), pod('prod/a', '10.4.0.1'), pod('prod/b', '10.4.0.2', { labels: { quarantine: 'true' } }), allowAll],
      pipeline: 'before-builtins',
    });
    try {
      cluster.expectFlows([
        { src: 'prod/a', dst: 'prod/b', port: 80, expect: 'deny' },
        { src: 'prod/b', dst: 'prod/a', port: 80, expect: 'deny' },
        { src: 'prod/a', dst: 'prod/a', port: 80, expect: 'allow' },
      ]);
      cluster.expectWalkthrough({ src: 'prod/a', dst: 'prod/b', port: 80 }, 'ingress: [quarantine] Deny (prod/b is quarantined (quarantine=true))');
    } finally {
      cluster.dispose();
    }

    // And as `kwp module push` + `kwp pipeline set` + `kwp explain` would do it, against an in-process admin API.
    const h = await adminHarness();
    try {
      const push = await h.server.app.inject({
        method: 'POST', url: '/v1/modules?name=quarantine&version=0.1.0',
        headers: { ...auth, 'content-type': 'application/wasm' }, payload: readFileSync(wasm),
      });
      expect(push.statusCode, push.body).toBe(201);
      expect(push.json()).toMatchObject({ created: true, module: { name: 'quarantine', version: '0.1.0', abi: '1.0' } });
      h.engine.state.apply('v1/Pod', { type: 'upsert', object: pod('default/b', '10.0.0.2', { labels: { app: 'b', quarantine: 'true' } }) });
      const put = await h.server.app.inject({ method: 'PUT', url: '/v1/pipeline', headers: auth, payload: { stages: [{ name: 'quarantine', module: 'quarantine@0.1.0' }] } });
      expect(put.statusCode, put.body).toBe(200);
      const explain = await h.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: 'default/a', dst: 'default/b', port: 80 } });
      expect(explain.statusCode, explain.body).toBe(200);
      expect(explain.json().walkthrough).toContain('DENY  egress: no stage decided  ingress: [quarantine] Deny (default/b is quarantined (quarantine=true))');
    } finally {
      await h.server.close();
      h.controller.stop();
    }
  }, 900_000);
});
