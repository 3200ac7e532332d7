import { describe, it, expect, afterEach } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { KwpError } from '../errors.js';
import { kwpErrorHandler } from './error-handler.js';

let app: FastifyInstance | undefined;
afterEach(async () => { await app?.close(); app = undefined; });

async function appWith(handler: () => unknown): Promise<FastifyInstance> {
  app = Fastify({ bodyLimit: 100 });
  app.setErrorHandler(kwpErrorHandler);
  app.post('/thing', { schema: { body: { type: 'object', required: ['x'], properties: { x: { type: 'integer' } } } } }, async () => handler());
  app.post('/upload', { config: { bodyTooLargeCode: 'KWP_ERR_MODULE_TOO_LARGE' } }, async () => ({}));
  await app.ready();
  return app;
}

describe('every failure leaves as a KWP error with the catalogue status', () => {
  const cases: Array<[string, () => unknown, object, string, number]> = [
    ['a KwpError keeps its code', () => { throw new KwpError('KWP_ERR_MODULE_IN_USE', 'busy'); }, { x: 1 }, 'KWP_ERR_MODULE_IN_USE', 409],
    ['a schema violation', () => ({}), { x: 'one' }, 'KWP_ERR_REQUEST_INVALID', 400],
    ['an unexpected exception', () => { throw new Error('secret internals at /etc/x'); }, { x: 1 }, 'KWP_ERR_INTERNAL', 500],
  ];
  it.each(cases)('%s', async (_name, handler, payload, code, status) => {
    const a = await appWith(handler);
    const res = await a.inject({ method: 'POST', url: '/thing', payload });
    expect([res.statusCode, res.json().code]).toEqual([status, code]);
    expect(res.json().message).not.toContain('secret internals');
  });

  it('a body over the route limit is KWP_ERR_BODY_TOO_LARGE, or the code the route names', async () => {
    const a = await appWith(() => ({}));
    const big = { x: 1, pad: 'p'.repeat(500) };
    const general = await a.inject({ method: 'POST', url: '/thing', payload: big });
    expect([general.statusCode, general.json().code]).toEqual([413, 'KWP_ERR_BODY_TOO_LARGE']);
    const upload = await a.inject({ method: 'POST', url: '/upload', payload: big });
    expect([upload.statusCode, upload.json().code]).toEqual([413, 'KWP_ERR_MODULE_TOO_LARGE']);
  });

  it('a body that is not JSON is KWP_ERR_REQUEST_INVALID', async () => {
    const a = await appWith(() => ({}));
    const res = await a.inject({ method: 'POST', url: '/thing', headers: { 'content-type': 'application/json' }, payload: '{"x": ' });
    expect([res.statusCode, res.json().code]).toEqual([400, 'KWP_ERR_REQUEST_INVALID']);
  });
});

describe('every 5xx is logged under a request id that the answer carries', () => {
  it('an unexpected exception answers 500 with the id in the X-Request-Id header and the body, and the log line has the same id and the details', async () => {
    const lines: string[] = [];
    app = Fastify({ logger: { level: 'info', stream: { write: (l: string) => { lines.push(l); } } } as never, genReqId: () => 'req-under-test' });
    app.setErrorHandler(kwpErrorHandler);
    app.get('/boom', async () => { throw new Error('disk on fire at /var/lib/kwp'); });
    app.get('/busy', async () => { throw new KwpError('KWP_ERR_MODULE_IN_USE', 'busy'); });
    await app.ready();
    const res = await app.inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    expect(res.headers['x-request-id']).toBe('req-under-test');
    expect(res.json()).toMatchObject({ code: 'KWP_ERR_INTERNAL', requestId: 'req-under-test' });
    expect(res.json().message).toContain('request id req-under-test');
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.level === 50);
    expect(logged).toMatchObject({ requestId: 'req-under-test', code: 'KWP_ERR_INTERNAL' });
    expect(logged.err.message).toBe('disk on fire at /var/lib/kwp');
    // A 4xx is the client's to fix: no id, nothing at error level.
    const busy = await app.inject({ method: 'GET', url: '/busy' });
    expect(busy.headers['x-request-id']).toBeUndefined();
    expect(busy.json().requestId).toBeUndefined();
  });
});
