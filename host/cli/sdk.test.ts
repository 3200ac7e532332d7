import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { runSdk, scaffold, sdkDependency, templateDir } from './sdk.js';

describe('kwp sdk new', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kwp-sdk-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes every template with the name and dependency filled in', () => {
    const project = join(dir, 'my-policy');
    const files = scaffold({ name: 'my-policy', dir: project, sdk: 'file:../kwp' });
    expect(files).toEqual(['README.md', 'asconfig.json', 'assembly/index.ts', 'assembly/module.json', '.gitignore', 'package.json', 'test/my-policy.test.ts']);
    for (const f of files) expect(readFileSync(join(project, f), 'utf8')).not.toMatch(/\{\{\w+\}\}/);
    const pkg = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8'));
    expect(pkg.name).toBe('my-policy');
    expect(pkg.devDependencies['kube-wasm-policies']).toBe('file:../kwp');
    const kwp = JSON.parse(readFileSync(join(templateDir(), '..', '..', 'package.json'), 'utf8'));
    expect(pkg.devDependencies.assemblyscript).toBe(kwp.dependencies.assemblyscript ?? kwp.devDependencies.assemblyscript);
    expect(pkg.devDependencies.vitest).toBe(kwp.devDependencies?.vitest ?? kwp.dependencies.vitest);
    expect(JSON.parse(readFileSync(join(project, 'assembly', 'module.json'), 'utf8'))).toMatchObject({ name: 'my-policy', kinds: [], failurePolicy: 'fail-open' });
    expect(JSON.parse(readFileSync(join(project, 'asconfig.json'), 'utf8')).options).toMatchObject({
      outFile: 'build/my-policy.wasm',
      transform: ['kube-wasm-policies/sdk/transform.mjs'],
    });
    expect(readFileSync(join(project, 'test', 'my-policy.test.ts'), 'utf8')).toContain("from 'kube-wasm-policies/testing'");
  });

  it.each(['My-Policy', '-lead', 'trail-', 'under_score', 'x'.repeat(64), ''])('refuses the module name %j', (name) => {
    expect(() => scaffold({ name, dir: join(dir, 'p'), sdk: '0.1.0' })).toThrow(expect.objectContaining({ code: 'KWP_ERR_USAGE', message: expect.stringContaining('not a valid module name') }));
  });

  it('refuses to write into a directory that has files, and leaves them alone', () => {
    writeFileSync(join(dir, 'keep.txt'), 'mine');
    expect(() => scaffold({ name: 'p', dir, sdk: '0.1.0' })).toThrow(/already exists and is not an empty directory/);
    expect(readdirSync(dir)).toEqual(['keep.txt']);
  });

  it('accepts an existing empty directory', () => {
    mkdirSync(join(dir, 'empty'));
    expect(scaffold({ name: 'p', dir: join(dir, 'empty'), sdk: '0.1.0' })).toContain('package.json');
  });

  it('turns a path into a file: dependency relative to the project and keeps a version as it is', () => {
    mkdirSync(join(dir, 'checkout'));
    writeFileSync(join(dir, 'kwp.tgz'), '');
    const project = join(dir, 'work', 'p');
    expect(sdkDependency(join(dir, 'checkout'), project)).toBe('file:../../checkout');
    expect(sdkDependency('./kwp.tgz', project, dir)).toBe('file:../../kwp.tgz');
    expect(sdkDependency('file:checkout', project, dir)).toBe('file:../../checkout');
    expect(sdkDependency('0.1.0', project)).toBe('0.1.0');
    expect(sdkDependency('^0.2.0', project)).toBe('^0.2.0');
    expect(() => sdkDependency('./missing', project, dir)).toThrow(/--sdk \.\/missing: no such file or directory/);
  });

  it('explains its usage for a wrong number of arguments and an unknown subcommand', async () => {
    await expect(runSdk(['new'])).rejects.toThrow(/expected NAME and an optional DIR, got 0 argument/);
    await expect(runSdk(['new', 'a', 'b', 'c'])).rejects.toThrow(/got 3 argument/);
    await expect(runSdk(['build'])).rejects.toThrow(/unknown subcommand "build"/);
    await expect(runSdk(['new', 'p', join(dir, 'p'), '--sdk-version', '1'])).rejects.toMatchObject({ code: 'KWP_ERR_USAGE' });
  });

  it('depends on the package this kwp runs from without --sdk, so the project installs from it', async () => {
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => { out.push(String(chunk)); return true; });
    try {
      expect(await runSdk(['new', 'pinned', join(dir, 'pinned')])).toBe(0);
    } finally {
      spy.mockRestore();
    }
    const root = join(templateDir(), '..', '..');
    const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
    const dependency = JSON.parse(readFileSync(join(dir, 'pinned', 'package.json'), 'utf8')).devDependencies['kube-wasm-policies'];
    expect(dependency).toMatch(/^file:/);
    expect(resolve(join(dir, 'pinned'), dependency.slice('file:'.length))).toBe(resolve(root));
    const text = out.join('');
    expect(text).toContain('npm test        # builds build/pinned.wasm and runs test/pinned.test.ts');
    expect(text).toContain(`run again with --sdk ${version}`);
    // What an agent run from the project writes (the token, the state, keys) stays out of git.
    const ignored = readFileSync(join(dir, 'pinned', '.gitignore'), 'utf8').split('\n');
    expect(ignored).toEqual(expect.arrayContaining(['node_modules/', 'build/', '.kwp-token', '.kwp-state/', '*.key']));
  });
});
