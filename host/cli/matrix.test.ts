import { describe, it, expect, vi, afterEach } from 'vitest';
import { runMatrix } from './eval.js';

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
