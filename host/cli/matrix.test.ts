import { describe, it, expect, vi, afterEach } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runMatrix } from './eval.js';
import { main } from './main.js';

/** `examples` and every directory below it. */
function exampleDirs(dir = 'examples'): string[] {
  return [dir, ...readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => exampleDirs(join(dir, e.name)))];
}

async function matrix(...args: string[]): Promise<string> {
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => { out += String(chunk); return true; });
  try {
    await runMatrix(['--manifests', 'examples/basic/manifests', ...args]);
  } finally {
    spy.mockRestore();
  }
  return out;
}
afterEach(() => vi.restoreAllMocks());

describe('kwp matrix', () => {
  it('narrows the matrix to a namespace and a label selector, the selection POST /v1/matrix makes', async () => {
    expect(await matrix('--namespace', 'y')).toBe('TCP/80\n     y/a y/b\ny/a  X   X\ny/b  X   X\n');
    expect(await matrix('--selector', 'app in (web,db)').catch((e) => e)).toMatchObject({ code: 'KWP_ERR_USAGE', message: expect.stringContaining('kwp matrix: --selector: "app in (web" is not a label requirement') });
    expect(await matrix('--selector', 'app!=batch,app!=cache')).toBe('TCP/80\n     x/a y/a\nx/a  .   .\ny/a  .   X\n');
  });
});

describe('kwp matrix on any directory', () => {
  it.each(exampleDirs())('prints a matrix or a KWP_ERR line for %s, never a crash', async (dir) => {
    let stdout = '';
    let stderr = '';
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => { stdout += String(chunk); return true; });
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => { stderr += String(chunk); return true; });
    // main() lets only KwpErrors become an exit status; anything else (a RangeError, a TypeError) throws here.
    const code = await main(['matrix', '--manifests', dir]);
    vi.restoreAllMocks();
    if (code === 0) expect(stdout).toMatch(/^TCP\/80\n/);
    else expect(stderr).toMatch(/^KWP_ERR_[A-Z_]+: /m);
  });
});
