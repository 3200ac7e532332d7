// The narrow loading of @kubernetes/client-node (narrow-client.ts): in a child
// process, as `kwp agent` loads it, against the API-server emulator over real
// HTTP. What a process loads is proved in a
// process of its own, watched by a resolve hook that only reports (test/modules).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiServerEmulator } from '../../../test/apiserver/emulator.js';
import { namespace, pod } from '../../../test/apiserver/fixtures.js';
import { writeKubeconfig } from '../../../test/apiserver/kubeconfig.js';
import { nodeScriptArgs } from '../../../test/lab/node-script.js';
import { CONFIG_MODULE, narrowConfigSource } from './narrow-client.js';

interface Resolution { specifier: string; parentURL?: string; url: string }
interface Probe { narrowKubeConfig: boolean; beforeIndex: Resolution[]; generatedAfterIndex: number; listed: string[]; watched: string[]; uid: string }

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

    // KubeConfig came from its source rewritten: its imports were made from the data: module, its
    // import of the generated index went to narrow-gen.js, and nothing of the generated API loaded.
    expect(result.narrowKubeConfig).toBe(true);
    const fromData = result.beforeIndex.filter((r) => r.parentURL === 'data:');
    expect(fromData.some((r) => r.url.endsWith('/@kubernetes/client-node/dist/exec_auth.js'))).toBe(true);
    expect(fromData.filter((r) => r.url.endsWith('/narrow-gen.js'))).toHaveLength(1);
    expect(result.beforeIndex.some((r) => r.url.endsWith('/@kubernetes/client-node/dist/gen/configuration.js'))).toBe(true);
    expect(result.beforeIndex.some((r) => r.url.endsWith('/@kubernetes/client-node/dist/watch.js'))).toBe(true);
    expect(result.beforeIndex.filter((r) => r.url.endsWith('/@kubernetes/client-node/dist/config.js') || r.url.endsWith('/dist/gen/index.js'))).toEqual([]);
    expect(result.beforeIndex.filter((r) => GENERATED_API.test(r.url))).toEqual([]);
    // The list and the watch went through the client as before.
    expect(result.listed).toEqual(['listed']);
    expect(result.watched).toEqual(['after-list', 'listed']);
    // The package's index still loads on demand, whole, and works with the same KubeConfig.
    expect(result.generatedAfterIndex).toBeGreaterThan(100);
    expect(result.uid).toBe(kubeSystem.metadata.uid);
  }, 120_000);
});

describe("KubeConfig's source made narrow", () => {
  it("makes every import of the package's config.js absolute and points only the generated index at narrow-gen.js", () => {
    const source = narrowConfigSource(CONFIG_MODULE, 'file:///narrow-gen.js')!;
    expect(source).toBeDefined();
    const specifiers = [...source.matchAll(/\bfrom\s*'([^']+)'/g)].map((m) => m[1]);
    expect(specifiers.length).toBeGreaterThan(10);
    expect(specifiers.filter((s) => s === 'file:///narrow-gen.js')).toHaveLength(1);
    expect(specifiers.filter((s) => !s.startsWith('file:///') && !s.startsWith('node:'))).toEqual([]);
    expect(specifiers.some((s) => s.endsWith('/@kubernetes/client-node/dist/exec_auth.js'))).toBe(true);
    expect(specifiers.some((s) => s.includes('/gen/index.js'))).toBe(false);
  });

  it('gives up (the package\'s own file loads) on a source it cannot rewrite for sure', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-narrow-'));
    const attempt = (text: string) => {
      const file = join(dir, 'config.js');
      writeFileSync(file, text);
      return narrowConfigSource(file, 'file:///narrow-gen.js');
    };
    const gen = "import { createConfiguration } from './gen/index.js';\n";
    expect(attempt(`${gen}import { a } from './a.js';\nexport class KubeConfig {}\n`)).toContain("from 'file:///narrow-gen.js'");
    // No import of the generated index, or two: not the file this was written for.
    expect(attempt("import { a } from './a.js';\nexport class KubeConfig {}\n")).toBeUndefined();
    expect(attempt(`${gen}${gen}export class KubeConfig {}\n`)).toBeUndefined();
    // A dynamic import or import.meta would resolve against the data: module.
    expect(attempt(`${gen}export class KubeConfig { load() { return import('./b.js'); } }\n`)).toBeUndefined();
    expect(attempt(`${gen}export const here = import.meta.url;\n`)).toBeUndefined();
    // A statement the pattern does not read.
    expect(attempt(`${gen}export { a };\n`)).toBeUndefined();
    // A dependency that is not installed where config.js would find it.
    expect(attempt(`${gen}import x from 'kwp-no-such-package';\nexport class KubeConfig {}\n`)).toBeUndefined();
  });
});
