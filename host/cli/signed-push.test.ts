// Signing on one machine and pushing from another: `kwp keygen`, then
// `kwp sign --out`, then `kwp module push --signature` with what sign wrote,
// to a real `kwp agent` that trusts the key. The compiled CLI in child
// processes throughout (npm run build first).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KWP, REPO, AgentProcess } from '../../test/fixtures/agent-process.js';

const WASM = join(REPO, 'dist', 'wasm', 'examples', 'deny-ports.wasm');
const SELF_TEST = ['--self-test-config', '{"ports":[81]}'];

interface Run { code: number; stdout: string; stderr: string }

function kwp(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [KWP, ...args], { cwd: dir, env: { ...process.env, NO_COLOR: '1', ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

let dir: string;
let agent: AgentProcess;
let releaseKey: string;
const push = (...args: string[]) => kwp(['module', 'push', WASM, ...SELF_TEST, '--server', agent.url, ...args], { KWP_ADMIN_TOKEN: agent.token });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-signed-push-'));
  const keygen = await kwp(['keygen', '--out', 'release']);
  expect(keygen.code, keygen.stderr).toBe(0);
  releaseKey = /, key ([0-9a-f]{16})\n$/.exec(keygen.stdout)![1];
  agent = await AgentProcess.start(['--manifests', 'examples/basic/manifests', '--trusted-key', join(dir, 'release.pub')]);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('kwp module push --signature', () => {
  it('uploads with the file kwp sign --out wrote, and the agent records the key that signed it', async () => {
    const sign = await kwp(['sign', WASM, '--key', 'release.key', '--name', 'deny-ports', '--version', '1.0.0', '--out', 'deny-ports.sig']);
    expect(sign.code, sign.stderr).toBe(0);
    const pushed = await push('--signature', 'deny-ports.sig', '-o', 'json');
    expect(pushed.code, pushed.stderr).toBe(0);
    const result = JSON.parse(pushed.stdout);
    expect(result).toMatchObject({ created: true, module: { name: 'deny-ports', version: '1.0.0' } });
    expect(result.module.signedBy).toBe(releaseKey);
    const stored = (await (await agent.call('/v1/modules/deny-ports')).json()).versions;
    expect(stored).toMatchObject([{ version: '1.0.0', signedBy: releaseKey }]);
  });

  it('is refused by the agent without a signature, and with one made for another version', async () => {
    const unsigned = await push('--name', 'deny-ports', '--version', '1.0.0');
    expect(unsigned.code).toBe(1);
    expect(unsigned.stderr).toMatch(/^KWP_ERR_SIGNATURE_REQUIRED: /);
    await kwp(['sign', WASM, '--key', 'release.key', '--name', 'deny-ports', '--version', '9.9.9', '--out', 'wrong.sig']);
    const wrong = await push('--signature', 'wrong.sig');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^KWP_ERR_SIGNATURE_INVALID: /);
  });

  it.each([
    ['a PEM key', () => readFileSync(join(dir, 'release.key'), 'utf8'), 'found a PEM key (give the key with --sign-key instead)'],
    ['text', () => 'not a signature\n', 'found "not a signature"'],
    ['base64 of the wrong length', () => `${Buffer.alloc(32).toString('base64')}\n`, 'found base64 of 32 bytes'],
  ])('refuses %s as the signature file, naming the file and what it should hold', async (_what, contents, found) => {
    writeFileSync(join(dir, 'bad.sig'), contents());
    const r = await push('--signature', 'bad.sig');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`KWP_ERR_USAGE: kwp module push: --signature: bad.sig is not a signature: expected one line of base64 encoding a 64-byte ed25519 signature, as "kwp sign --out FILE" writes, ${found}\n`);
  });

  it('refuses a missing signature file and --sign-key with --signature', async () => {
    expect((await push('--signature', 'missing.sig')).stderr).toMatch(/^KWP_ERR_USAGE: kwp module push: --signature: cannot read missing\.sig: ENOENT/);
    expect((await push('--signature', 'deny-ports.sig', '--sign-key', 'release.key')).stderr).toBe('KWP_ERR_USAGE: kwp module push: give --sign-key or --signature, not both\n');
  });
});
