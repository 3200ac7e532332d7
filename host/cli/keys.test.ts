import { describe, it, expect, vi, afterEach } from 'vitest';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicKey, verify } from 'node:crypto';
import { runKeygen, runSign } from './keys.js';
import { signedMessage, sha256Hex } from '../control/signature.js';
import { KwpError } from '../errors.js';

afterEach(() => { vi.restoreAllMocks(); });

function quiet(): () => string {
  let out = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => { out += String(c); return true; });
  return () => out;
}

describe('kwp keygen and kwp sign', () => {
  it('keygen writes a private key only its owner can read and an ed25519 public key', async () => {
    const prefix = join(mkdtempSync(join(tmpdir(), 'kwp-keygen-')), 'k');
    quiet();
    expect(await runKeygen(['--out', prefix])).toBe(0);
    expect(statSync(`${prefix}.key`).mode & 0o777).toBe(0o600);
    expect(createPublicKey(readFileSync(`${prefix}.pub`)).asymmetricKeyType).toBe('ed25519');
  });

  it('keygen refuses to overwrite an existing pair unless --force', async () => {
    const prefix = join(mkdtempSync(join(tmpdir(), 'kwp-keygen-')), 'k');
    quiet();
    await runKeygen(['--out', prefix]);
    const before = readFileSync(`${prefix}.key`, 'utf8');
    await expect(runKeygen(['--out', prefix])).rejects.toMatchObject({ code: 'KWP_ERR_USAGE', message: expect.stringMatching(/already exist; pick another --out or pass --force/) });
    expect(await runKeygen(['--out', prefix, '--force'])).toBe(0);
    expect(readFileSync(`${prefix}.key`, 'utf8')).not.toBe(before);
  });

  it('sign prints a signature over sha256, name and version that the public key verifies', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-sign-'));
    const prefix = join(dir, 'k');
    const file = join(dir, 'm.wasm');
    writeFileSync(file, Buffer.from('any bytes at all'));
    quiet();
    await runKeygen(['--out', prefix]);
    vi.restoreAllMocks();
    const out = quiet();
    expect(await runSign([file, '--key', `${prefix}.key`, '--name', 'm', '--version', '2.0.0'])).toBe(0);
    const sig = Buffer.from(out().trim(), 'base64');
    const pub = createPublicKey(readFileSync(`${prefix}.pub`));
    const sha = sha256Hex(readFileSync(file));
    expect(verify(null, signedMessage(sha, 'm', '2.0.0'), pub, sig)).toBe(true);
    expect(verify(null, signedMessage(sha, 'm', '2.0.1'), pub, sig)).toBe(false);
  });

  it('sign names what is missing', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--key', 'k', '--name', 'n', '--version', 'v'], /give exactly one module FILE/],
      [['f.wasm', '--name', 'n', '--version', 'v'], /--key is required/],
      [['f.wasm', '--key', '/nonexistent.key', '--name', 'n', '--version', 'v'], /nonexistent\.key: not a readable PEM private key/],
    ];
    for (const [argv, message] of cases) {
      const err = await runSign(argv).catch((e) => e);
      expect(err).toBeInstanceOf(KwpError);
      expect(err.message).toMatch(message);
    }
  });
});
