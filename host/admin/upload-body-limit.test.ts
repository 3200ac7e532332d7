// An oversized upload is refused from its Content-Length, before its body is
// read: the route's body limit answers while the client has sent almost none
// of it. (The loader's own size check answers the same code, but only once the
// whole body is buffered.)
import { afterEach, describe, it, expect } from 'vitest';
import { request as httpRequest } from 'node:http';
import { adminHarness, ADMIN_TOKEN, type AdminHarness } from '../../test/fixtures/admin-harness.js';

const open: AdminHarness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.server.close();
    await h.store.close();
    h.controller.stop();
  }
});

describe('the upload route on a real socket', () => {
  it('answers 413 KWP_ERR_MODULE_TOO_LARGE to a Content-Length over its limit without waiting for the body', async () => {
    const h = await adminHarness({ limits: { maxModuleBytes: 1000 } });
    open.push(h);
    const { port } = new URL(await h.server.listen());
    // Over the route's limit (the cap plus 64 KiB) and under Fastify's 1 MiB default.
    const declared = 200_000;
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1', port, method: 'POST', path: '/v1/modules?name=big&version=1.0.0',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/wasm', 'content-length': declared },
      }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => { resolve({ status: res.statusCode!, body }); req.destroy(); });
      });
      req.on('error', (err) => { if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(err); });
      // 1 KB of the 200 KB, and the rest never: a server that buffers first never answers.
      req.write(Buffer.alloc(1000));
      setTimeout(() => reject(new Error('no answer within 20 s to an upload whose body was never sent: the body limit did not refuse it up front')), 20_000).unref();
    });
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body).code).toBe('KWP_ERR_MODULE_TOO_LARGE');
    expect(h.store.list()).toEqual([]);
  });
});
