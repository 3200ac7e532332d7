// What a plugin project gets when it installs kube-wasm-policies: the package
// exports the SDK sources, the asc transform and the test kit, and `npm pack`
// ships everything those need (and no test fixtures).
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(import.meta.url);

describe('the kube-wasm-policies package', () => {
  it('resolves the asc transform and the test kit by their package names', () => {
    expect(require.resolve('kube-wasm-policies/sdk/transform.mjs')).toBe(resolve(repo, 'sdk/transform.mjs'));
    expect(require.resolve('kube-wasm-policies/testing')).toBe(resolve(repo, 'dist/host/testing/index.js'));
    expect(() => require.resolve('kube-wasm-policies/host/eval.js')).toThrow(/Package subpath '.\/host\/eval.js' is not defined by "exports"/);
  });

  it('packs the SDK, the test kit, the built-in modules and the scaffold templates, and no fixtures', async () => {
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
    const files = new Set<string>(JSON.parse(stdout)[0].files.map((f: { path: string }) => f.path));
    for (const f of [
      'bin/kwp.js', 'sdk/index.ts', 'sdk/exports.ts', 'sdk/transform.mjs', 'sdk/ABI.md',
      'dist/host/testing/index.js', 'dist/host/testing/index.d.ts', 'dist/host/cli/sdk.js',
      'dist/wasm/network-policy.wasm', 'host/sdk-template/package.json.tmpl', 'host/sdk-template/gitignore.tmpl',
      'asconfig.json', 'docs/plugin-guide.md',
    ]) expect(files, f).toContain(f);
    expect([...files].filter((f) => f.startsWith('dist/wasm/fixtures/') || f.startsWith('test/'))).toEqual([]);
  });
});
