// The whole path of a plugin author, in a temp dir, following
// docs/plugin-guide.md: kwp sdk new, one npm install from this checkout, the
// starter's own test, the guide's deny-ports module and test, the modules
// deciding traffic in an in-process pipeline and pushed to an in-process
// admin API. (test/docs-sessions.test.ts runs the guide itself, word for word,
// with the CLI and a real agent.) Slow (an npm install and two asc builds),
// so it is one test.
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runSdk } from './sdk.js';
import { loadModule, namespace, pod, startPluginCluster } from '../testing/index.js';
import { guideBlocks } from '../testing/guide-blocks.js';
import { adminHarness, auth, type AdminHarness } from '../../test/fixtures/admin-harness.js';

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
    return (stdout + stderr).replace(/\x1b\[[0-9;]*m/g, '');
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm ${args.join(' ')} in ${cwd} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

async function push(h: AdminHarness, wasm: string, name: string, version: string, config?: object) {
  const query = `name=${name}&version=${version}${config ? `&config=${encodeURIComponent(JSON.stringify(config))}` : ''}`;
  return h.server.app.inject({ method: 'POST', url: `/v1/modules?${query}`, headers: { ...auth, 'content-type': 'application/wasm' }, payload: readFileSync(wasm) });
}

describe('a project from kwp sdk new', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kwp-scaffold-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('installs, passes its own test, builds the guide\'s module and decides traffic in the agent pipeline', async () => {
    expect(existsSync(join(repo, 'dist', 'host', 'testing', 'index.js')), 'run "npm run build" first: the project imports the compiled test kit').toBe(true);
    const project = join(dir, 'deny-ports');
    const wasm = join(project, 'build', 'deny-ports.wasm');
    expect(await runSdk(['new', 'deny-ports', project, '--sdk', repo])).toBe(0);

    // Straight away: the starter module (quarantine=true pods are cut off) builds and passes.
    await npm(['install', '--no-audit', '--no-fund', '--prefer-offline'], project);
    expect(await npm(['test'], project)).toMatch(/Tests\s+3 passed \(3\)/);
    const starter = loadModule(readFileSync(wasm));
    expect(starter.meta).toMatchObject({ name: 'deny-ports', version: '0.1.0', kinds: [], failurePolicy: 'fail-open', abi: { major: 1, minor: 4 } });
    const allowAll = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'open', namespace: 'prod' },
      spec: { podSelector: {}, ingress: [{}], policyTypes: ['Ingress'] },
    };
    const cluster = await startPluginCluster({
      module: starter,
      objects: [namespace('prod'), pod('prod/a', '10.4.0.1'), pod('prod/b', '10.4.0.2', { labels: { quarantine: 'true' } }), allowAll],
      pipeline: 'before-builtins',
    });
    try {
      cluster.expectFlows([
        { src: 'prod/a', dst: 'prod/b', port: 80, expect: 'deny' },
        { src: 'prod/b', dst: 'prod/a', port: 80, expect: 'deny' },
        { src: 'prod/a', dst: 'prod/a', port: 80, expect: 'allow' },
      ]);
    } finally {
      cluster.dispose();
    }

    // The guide's steps 3 and 4, word for word.
    for (const [key, text] of guideBlocks()) {
      if (!key.startsWith('file:')) continue;
      const file = join(project, key.slice('file:'.length));
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
    }
    expect(await npm(['test'], project)).toMatch(/Tests\s+3 passed \(3\)/);
    const denyPorts = loadModule(readFileSync(wasm));
    expect(denyPorts.meta).toMatchObject({ name: 'deny-ports', version: '1.0.0' });

    // Step 5 against an in-process admin API: push (with the self-test config), set, explain.
    const h = await adminHarness();
    try {
      const withoutConfig = await push(h, wasm, 'deny-ports', '1.0.0');
      expect(withoutConfig.statusCode, 'deny-ports refuses {} for its self-test').toBe(422);
      expect(withoutConfig.json().code).toBe('KWP_ERR_CONFIG_REJECTED');
      const stored = await push(h, wasm, 'deny-ports', '1.0.0', { ports: [23] });
      expect(stored.statusCode, stored.body).toBe(201);
      expect(stored.json()).toMatchObject({ created: true, module: { name: 'deny-ports', version: '1.0.0', abi: '1.4' } });
      const put = await h.server.app.inject({
        method: 'PUT', url: '/v1/pipeline', headers: auth,
        payload: { stages: [{ name: 'deny-ports', module: 'deny-ports@1.0.0', config: { ports: [23, 3389], protocols: ['TCP'] } }] },
      });
      expect(put.statusCode, put.body).toBe(200);
      const explain = await h.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: 'default/a', dst: 'default/b', port: 23 } });
      expect(explain.statusCode, explain.body).toBe(200);
      expect(explain.json().walkthrough).toBe('default/a -> default/b TCP/23  DENY  egress: [deny-ports] Deny (TCP/23 is denied cluster-wide)  ingress: [deny-ports] Deny (TCP/23 is denied cluster-wide)');
    } finally {
      await h.server.close();
      h.controller.stop();
    }
  }, 900_000);
});
