// The narrow loading of @kubernetes/client-node (narrow-client.ts): in a child
// process, as `kwp agent` loads it, against the API-server emulator over real
// HTTP. A module hook changes how a whole process loads, so it is proved in a
// process of its own.
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiServerEmulator } from '../../../test/apiserver/emulator.js';
import { namespace, pod } from '../../../test/apiserver/fixtures.js';
import { writeKubeconfig } from '../../../test/apiserver/kubeconfig.js';
import { nodeScriptArgs } from '../../../test/lab/node-script.js';

interface Resolution { specifier: string; parentURL?: string; url: string; redirect: boolean }
interface Probe { beforeIndex: Resolution[]; generatedAfterIndex: number; listed: string[]; watched: string[]; uid: string }

let emulator: ApiServerEmulator | undefined;
afterEach(async () => { await emulator?.stop(); emulator = undefined; });

function probe(kubeconfig: string): Promise<Probe> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeScriptArgs(import.meta.url, '../../../test/apiserver/narrow-client-probe.js'), kubeconfig], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`probe exited with ${code}: ${stderr}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()!));
      } catch (err) {
        reject(new Error(`probe printed no JSON line (${(err as Error).message}): ${stdout.slice(0, 500)}`));
      }
    });
  });
}

// Where the generated API lives in the package: its classes, models and the index's object API.
const GENERATED_API = /\/@kubernetes\/client-node\/dist\/gen\/(apis|models|types)\//;

describe('the narrow loading of the Kubernetes client', () => {
  it('loads KubeConfig and Watch without the generated API, and still lists and watches the API server over HTTP', async () => {
    emulator = await ApiServerEmulator.start();
    emulator.create(namespace('default'));
    const kubeSystem = emulator.create(namespace('kube-system'));
    emulator.create(pod('default', 'listed', { app: 'a' }, '10.9.0.1'));
    const kubeconfig = await writeKubeconfig({ server: emulator.url });

    const result = await probe(kubeconfig);

    // KubeConfig's import of the generated index went to the narrow module, and nothing of the generated API loaded.
    const redirects = result.beforeIndex.filter((r) => r.redirect);
    expect(redirects).toHaveLength(1);
    expect(redirects[0].parentURL).toMatch(/\/@kubernetes\/client-node\/dist\/config\.js$/);
    expect(redirects[0].url).toMatch(/\/narrow-gen\.js$/);
    expect(result.beforeIndex.some((r) => r.url.endsWith('/@kubernetes/client-node/dist/watch.js'))).toBe(true);
    expect(result.beforeIndex.filter((r) => GENERATED_API.test(r.url))).toEqual([]);
    // The list and the watch went through the client as before.
    expect(result.listed).toEqual(['listed']);
    expect(result.watched).toEqual(['after-list', 'listed']);
    // The package's index still loads on demand, whole, and works with the same KubeConfig.
    expect(result.generatedAfterIndex).toBeGreaterThan(100);
    expect(result.uid).toBe(kubeSystem.metadata.uid);
  }, 120_000);
});
