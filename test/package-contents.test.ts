// What `npm pack` would publish: the host, the SDK, the built modules and the
// docs, never the lab, the test suites or their fixtures. Runs on the build
// `npm test` makes first (dist/ must exist), through npm itself, so the
// package.json `files` list and the build's output are checked together.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function packedFiles(): string[] {
  if (!existsSync(join(root, 'dist', 'host', 'index.js'))) throw new Error('dist/ is not built; run `npm run build` first');
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return (JSON.parse(out) as Array<{ files: Array<{ path: string }> }>)[0].files.map((f) => f.path);
}

/** Paths that are tests, test fixtures or the lab. The SDK scaffold's template of a plugin test is the package's own content. */
function testOrLab(path: string): boolean {
  if (path.startsWith('host/sdk-template/')) return false;
  return /(^|\/)(lab|test|tests|fixtures)\//.test(path) || /\.test\.[cm]?[jt]s$/.test(path) || /\.e2e\./.test(path);
}

describe('the published package', () => {
  const files = packedFiles();

  it('holds the compiled host, the CLI, the SDK and the built-in modules', () => {
    for (const f of ['bin/kwp.js', 'dist/host/index.js', 'dist/host/cli/main.js', 'dist/host/abi/record.js', 'sdk/ABI.md', 'sdk/exports.ts', 'dist/wasm/network-policy.wasm']) {
      expect(files, f).toContain(f);
    }
  });

  it('holds no lab, test or fixture file', () => {
    expect(files.filter(testOrLab)).toEqual([]);
  });

  it('still builds the lab for `npm run demo`, outside the shipped dist/host', () => {
    expect(existsSync(join(root, 'dist', 'test', 'lab', 'demo.js'))).toBe(true);
    expect(files.some((f) => f.startsWith('dist/test/'))).toBe(false);
  });
});
