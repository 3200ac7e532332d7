import { describe, it, expect, afterEach, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { builtinWasmDir } from '../pipeline/modules.js';
import { loadTrustedKeys } from '../control/signature.js';
import { runModule } from '../cli/module.js';
import { runPipeline } from '../cli/pipeline.js';
import { runExplain } from '../cli/explain.js';
import { runKeygen, runSign } from '../cli/keys.js';
import { KwpError } from '../errors.js';
import { AdminClient } from './client.js';
import { DEFAULT_ADMIN_HOST, DEFAULT_ADMIN_PORT } from './server.js';
import { adminHarness, ADMIN_TOKEN, DENY_FIRST, type AdminHarness, type HarnessOptions } from '../../test/fixtures/admin-harness.js';

const scriptedFile = join(builtinWasmDir(), 'fixtures', 'scripted.wasm');
const open: AdminHarness[] = [];
async function listening(options: HarnessOptions = {}): Promise<{ h: AdminHarness; url: string; dir: string; tokenFile: string }> {
  const h = await adminHarness(options);
  open.push(h);
  const url = await h.server.listen();
  const dir = mkdtempSync(join(tmpdir(), 'kwp-cli-'));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${ADMIN_TOKEN}\n`);
  return { h, url, dir, tokenFile };
}
afterEach(async () => {
  vi.restoreAllMocks();
  for (const h of open.splice(0)) {
    await h.server.close();
    await h.store.close();
    h.controller.stop();
  }
});

/** Runs a CLI command in-process and returns what it printed. */
async function cli(run: (argv: string[]) => Promise<number>, argv: string[]): Promise<string> {
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    expect(await run(argv)).toBe(0);
  } finally {
    spy.mockRestore();
  }
  return out;
}

describe('the admin API over a real socket', () => {
  it('listens on 127.0.0.1 by default, port 9443 unless told otherwise', async () => {
    expect([DEFAULT_ADMIN_HOST, DEFAULT_ADMIN_PORT]).toEqual(['127.0.0.1', 9443]);
    const { url } = await listening();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('the CLI pushes a module, reorders the pipeline, explains a flow and rolls back', async () => {
    const { url, dir, tokenFile } = await listening({ validation: 'worker' });
    const common = ['--server', url, '--token-file', tokenFile];
    expect(await cli(runModule, ['push', scriptedFile, ...common])).toMatch(/^stored scripted@1\.0\.0 sha256:[0-9a-f]{64} \(\d+ bytes, ABI 1\.4\)\n$/);
    const ls = await cli(runModule, ['ls', ...common]);
    expect(ls, JSON.stringify(ls)).toMatch(/^NAME +VERSION +SHA256 +SIZE +ABI +USED BY\nscripted +1\.0\.0 +[0-9a-f]{12} +\d+ +1\.4 +allow,deny\n$/);
    const file = join(dir, 'pipeline.yaml');
    writeFileSync(file, 'stages:\n  - name: deny\n    module: scripted@1.0.0\n    config: {egress: Deny, ingress: Deny, reason: "deny says Deny"}\n  - name: allow\n    module: scripted\n    config: {egress: Accept, ingress: Accept}\n');
    expect(await cli(runPipeline, ['set', file, ...common])).toMatch(/^# revision 2 \(rollback goes to revision 1\)\n.*- name: deny\n/s);
    expect(await cli(runModule, ['ls', 'scripted', ...common])).toMatch(/scripted +1\.0\.0 .* deny,allow\n$/);
    expect(await cli(runExplain, ['--src', 'default/a', '--dst', 'default/b', '--port', '80', ...common]))
      .toBe('default/a -> default/b TCP/80  DENY  egress: [deny] Deny (deny says Deny)  ingress: not reached   (pipeline revision 2)\n'.replace('ingress: not reached', 'ingress: [deny] Deny (deny says Deny)'));
    expect(await cli(runPipeline, ['rollback', ...common])).toMatch(/^# revision 1 \(rollback goes to revision 2\)\n.*- name: allow\n/s);
    expect(await cli(runPipeline, ['history', ...common])).toMatch(/startup +1 +- +configured pipeline.*\n.*set +2 +1\s*\n.*rollback +1 +2/s);
    // The fixture pipeline runs the very same bytes, so the store counts them as in use.
    await expect(runModule(['rm', 'scripted@1.0.0', ...common])).rejects.toMatchObject({ code: 'KWP_ERR_MODULE_IN_USE' });
  });

  it('pipeline set is based on the revision it read: a change in between is a 412 unless --force', async () => {
    const { h, url, dir, tokenFile } = await listening();
    const file = join(dir, 'p.json');
    writeFileSync(file, JSON.stringify(DENY_FIRST));
    const client = new AdminClient(url, ADMIN_TOKEN);
    const read = await client.getPipeline();
    await h.controller.set(DENY_FIRST);
    await expect(client.setPipeline(DENY_FIRST, read.revision)).rejects.toMatchObject({ code: 'KWP_ERR_PRECONDITION_FAILED' });
    expect(await cli(runPipeline, ['set', file, '--force', '--server', url, '--token-file', tokenFile])).toMatch(/^# revision 3/);
  });

  it('the client turns error answers into the server\'s KwpError and an unreachable server into KWP_ERR_ADMIN_UNREACHABLE', async () => {
    const { url } = await listening();
    await expect(new AdminClient(url).listModules()).rejects.toMatchObject({ code: 'KWP_ERR_UNAUTHORIZED' });
    await expect(new AdminClient(url, 'wrong-token-wrong-token').rollback()).rejects.toMatchObject({ code: 'KWP_ERR_FORBIDDEN' });
    const err = await new AdminClient('http://127.0.0.1:1').getPipeline().catch((e) => e);
    expect(err).toBeInstanceOf(KwpError);
    expect(err.code).toBe('KWP_ERR_ADMIN_UNREACHABLE');
  });

  it('keygen and sign make a signature the server accepts for exactly that name and version', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-keys-'));
    const prefix = join(dir, 'release');
    expect(await cli(runKeygen, ['--out', prefix])).toMatch(/wrote .*release\.key \(private\) and .*release\.pub \(public\), key [0-9a-f]{16}/);
    const signature = (await cli(runSign, [scriptedFile, '--key', `${prefix}.key`, '--name', 'scripted', '--version', '1.0.0'])).trim();
    const { url, tokenFile } = await listening({ trustedKeys: loadTrustedKeys([`${prefix}.pub`]) });
    const client = new AdminClient(url, ADMIN_TOKEN);
    const bytes = readFileSync(scriptedFile);
    await expect(client.pushModule(bytes, { name: 'scripted', version: '1.0.1', signature })).rejects.toMatchObject({ code: 'KWP_ERR_SIGNATURE_INVALID' });
    expect((await client.pushModule(bytes, { name: 'scripted', version: '1.0.0', signature })).created).toBe(true);
    expect(await cli(runModule, ['push', scriptedFile, '--sign-key', `${prefix}.key`, '--server', url, '--token-file', tokenFile])).toMatch(/^unchanged scripted@1\.0\.0/);
  });

  it('close() lets an upload already in flight finish and answers it', async () => {
    const { h, url } = await listening({ validation: 'worker' });
    const bytes = readFileSync(scriptedFile);
    const { port } = new URL(url);
    // close() must begin after the server has the request; on a loaded machine a fixed pause may not be enough.
    const received = new Promise((r) => h.server.app.server.once('request', () => setTimeout(r, 20)));
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1', port, method: 'POST', path: '/v1/modules?name=scripted&version=1.0.0',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/wasm', 'content-length': bytes.length },
      }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      // Half the body now, the rest after close() has begun.
      req.write(bytes.subarray(0, 1000));
      setTimeout(() => { req.end(bytes.subarray(1000)); }, 150);
    });
    await received;
    const closing = h.server.close();
    open.splice(open.indexOf(h), 1);
    const res = await answer;
    await closing;
    expect(res.status).toBe(201);
    expect(JSON.parse(res.body).module.name).toBe('scripted');
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    await h.store.close();
    h.controller.stop();
  });
});

describe('TLS with client certificates', () => {
  function makeCerts(dir: string) {
    const ossl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    ossl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=kwp-test-ca', '-days', '1');
    for (const [name, ext] of [['server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'], ['client', 'extendedKeyUsage=clientAuth']]) {
      writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
      ossl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
      ossl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', '-extfile', `${name}.ext`);
    }
    const read = (f: string) => readFileSync(join(dir, f));
    return { ca: read('ca.crt'), serverKey: read('server.key'), serverCert: read('server.crt'), clientKey: read('client.key'), clientCert: read('client.crt') };
  }

  it('a client without a certificate is refused at the handshake; one with a certificate from the CA gets answers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-tls-'));
    const c = makeCerts(dir);
    const { url } = await listening({ https: { key: c.serverKey, cert: c.serverCert, ca: c.ca, requestCert: true, rejectUnauthorized: true } });
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:/);
    const { port } = new URL(url);
    const get = (withCert: boolean) => new Promise<number>((resolve, reject) => {
      const req = httpsRequest({
        host: '127.0.0.1', port, path: '/v1/pipeline', ca: c.ca, headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        ...(withCert ? { key: c.clientKey, cert: c.clientCert } : {}),
      }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)); });
      req.on('error', reject);
      req.end();
    });
    await expect(get(false)).rejects.toThrow();
    expect(await get(true)).toBe(200);
  });
});
