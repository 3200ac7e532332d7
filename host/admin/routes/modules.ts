// /v1/modules: upload, list, inspect, remove.
import type { FastifyInstance } from 'fastify';
import { KwpError } from '../../errors.js';
import type { ModuleStore } from '../../control/module-store.js';
import type { ClientBuckets } from '../token-bucket.js';
import { errorResponses, moduleInfoSchema } from '../schemas.js';
import { SIGNATURE_HEADER, type AdminRouteConfig } from '../options.js';

const NAME = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
const uploadResult = { type: 'object', required: ['created', 'module'], properties: { created: { type: 'boolean' }, module: moduleInfoSchema } } as const;

export function moduleRoutes(app: FastifyInstance, store: ModuleStore, buckets: ClientBuckets): void {
  app.addContentTypeParser(['application/wasm', 'application/octet-stream'], { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.post<{ Querystring: { name: string; version: string; config?: string }; Headers: Record<string, string | undefined> }>('/v1/modules', {
    bodyLimit: store.maxModuleBytes + 64 * 1024,
    config: { access: 'write', bodyTooLargeCode: 'KWP_ERR_MODULE_TOO_LARGE' } satisfies AdminRouteConfig,
    // Runs after the plugin's auth hook, so a caller without the token takes no one's tokens.
    onRequest: async (request, reply) => {
      const { wait, bucket } = buckets.takeFor(request.ip);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        const who = bucket === 'global' ? 'from all clients together' : `from ${request.ip}`;
        throw new KwpError('KWP_ERR_RATE_LIMITED', `POST /v1/modules: too many uploads ${who}; retry in ${wait} s`);
      }
    },
    schema: {
      summary: 'Upload an evaluator module',
      description: 'Body: the .wasm bytes as application/wasm. Validation order: size cap, signature, static ABI checks, name/version against kwp.meta, instantiation, configuration, self-test decision. 201 when stored, 200 when the same bytes were already stored.',
      tags: ['modules'],
      consumes: ['application/wasm'],
      querystring: {
        type: 'object',
        required: ['name', 'version'],
        properties: {
          name: { type: 'string', pattern: NAME, description: "must equal kwp.meta's name" },
          version: { type: 'string', minLength: 1, maxLength: 64, description: "must equal kwp.meta's version" },
          config: { type: 'string', description: 'JSON object the self-test configures the module with (default {})' },
        },
      },
      headers: {
        type: 'object',
        properties: { [SIGNATURE_HEADER]: { type: 'string', description: 'base64 ed25519 signature of sha256hex + "\\n" + name + "\\n" + version' } },
      },
      response: { 200: uploadResult, 201: uploadResult, ...errorResponses },
    },
  }, async (request, reply) => {
    const body = request.body;
    if (!Buffer.isBuffer(body)) throw new KwpError('KWP_ERR_MEDIA_TYPE', 'POST /v1/modules: send the module as application/wasm');
    let selfTestConfig: Record<string, unknown> | undefined;
    if (request.query.config !== undefined) {
      try {
        selfTestConfig = JSON.parse(request.query.config);
      } catch (err) {
        throw new KwpError('KWP_ERR_REQUEST_INVALID', `POST /v1/modules: query "config" is not JSON: ${(err as Error).message}`);
      }
      if (typeof selfTestConfig !== 'object' || selfTestConfig === null || Array.isArray(selfTestConfig)) {
        throw new KwpError('KWP_ERR_REQUEST_INVALID', 'POST /v1/modules: query "config" must be a JSON object');
      }
    }
    const result = await store.add(new Uint8Array(body.buffer, body.byteOffset, body.byteLength), {
      name: request.query.name,
      version: request.query.version,
      signature: request.headers[SIGNATURE_HEADER],
      selfTestConfig,
    });
    reply.status(result.created ? 201 : 200);
    return result;
  });

  app.get('/v1/modules', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'List stored modules (every version)', tags: ['modules'],
      response: { 200: { type: 'object', required: ['modules'], properties: { modules: { type: 'array', items: moduleInfoSchema } } }, ...errorResponses },
    },
  }, async () => ({ modules: store.list() }));

  app.get<{ Params: { name: string } }>('/v1/modules/:name', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: "One module's stored versions, newest first", tags: ['modules'],
      params: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
      response: {
        200: { type: 'object', required: ['name', 'versions'], properties: { name: { type: 'string' }, versions: { type: 'array', items: moduleInfoSchema } } },
        ...errorResponses,
      },
    },
  }, async (request) => ({ name: request.params.name, versions: store.get(request.params.name) }));

  app.delete<{ Params: { name: string }; Querystring: { version?: string } }>('/v1/modules/:name', {
    config: { access: 'write' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Remove a module (every version), or one version as NAME@VERSION or ?version=', tags: ['modules'],
      description: 'Refused with 409 KWP_ERR_MODULE_IN_USE while a stage of the active pipeline runs it. On the cluster-level admin API (kwp agent --fleet) also refused while a Pipeline object (its stages or its stable stages) names it; otherwise its EvaluatorModule objects are deleted too (docs/fleet.md).',
      params: { type: 'object', required: ['name'], properties: { name: { type: 'string', description: 'NAME or NAME@VERSION' } } },
      querystring: { type: 'object', properties: { version: { type: 'string' } } },
      response: {
        200: {
          type: 'object', required: ['removed'],
          properties: { removed: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, version: { type: 'string' }, sha256: { type: 'string' } } } } },
        },
        ...errorResponses,
      },
    },
  }, async (request) => {
    const [name, atVersion] = request.params.name.split('@');
    const version = atVersion ?? request.query.version;
    const removed = await store.withdraw(name, version);
    return { removed: removed.map((m) => ({ name: m.name, version: m.version, sha256: m.sha256 })) };
  });
}
