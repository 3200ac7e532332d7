// /v1/pipeline: read, replace (optimistic concurrency through ETag/If-Match),
// roll back, and the history of changes.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { KwpError } from '../../errors.js';
import type { PipelineController, PipelineView } from '../../control/pipeline-controller.js';
import { errorResponses, historyEntrySchema, ifMatchHeader, pipelineViewSchema } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

/** The revision an If-Match names; undefined for none or `*`. Accepts `"3"`, `W/"3"` and `3`. */
export function parseIfMatch(header: string | undefined, what: string): number | undefined {
  if (header === undefined || header.trim() === '*') return undefined;
  const m = /^\s*(?:W\/)?"?(\d+)"?\s*$/.exec(header);
  if (!m) throw new KwpError('KWP_ERR_REQUEST_INVALID', `${what}: If-Match must be the pipeline's ETag, e.g. "3", not ${JSON.stringify(header)}`);
  return Number(m[1]);
}

export function pipelineRoutes(app: FastifyInstance, controller: PipelineController): void {
  // A change answers with the view it activated: a change queued behind it
  // may already be active by the time this handler resumes.
  const view = (reply: FastifyReply, v: PipelineView = controller.get()) => {
    reply.header('etag', `"${v.revision}"`);
    return v;
  };

  app.get('/v1/pipeline', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: { summary: 'The active pipeline; ETag is its revision', tags: ['pipeline'], response: { 200: pipelineViewSchema, ...errorResponses } },
  }, async (_request, reply) => view(reply));

  app.put<{ Headers: { 'if-match'?: string } }>('/v1/pipeline', {
    config: { access: 'write' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Replace the pipeline',
      description: 'Builds every stage first, yielding to the packet path between slices of the feed; only a pipeline that built completely is activated, with one swap. Changes run one at a time in arrival order. If-Match is optional: with it a stale revision gets 412 KWP_ERR_PRECONDITION_FAILED, also when another change was activated while this one waited; without it the change applies to whatever is active.',
      tags: ['pipeline'],
      headers: ifMatchHeader,
      body: { type: 'object', description: 'a pipeline: {"stages": [{"name", "module", "config"?, "label"?, "mode"?, "failurePolicy"?}]}', properties: { stages: { type: 'array' } } },
      response: { 200: pipelineViewSchema, ...errorResponses },
    },
  }, async (request, reply) => {
    return view(reply, await controller.set(request.body, parseIfMatch(request.headers['if-match'], 'PUT /v1/pipeline'), 'PUT /v1/pipeline body'));
  });

  app.post<{ Headers: { 'if-match'?: string } }>('/v1/pipeline/rollback', {
    config: { access: 'write' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Swap back to the previous pipeline (kept started, so this is instant)',
      tags: ['pipeline'],
      headers: ifMatchHeader,
      response: { 200: pipelineViewSchema, ...errorResponses },
    },
  }, async (request, reply) => {
    return view(reply, await controller.rollback(parseIfMatch(request.headers['if-match'], 'POST /v1/pipeline/rollback')));
  });

  app.get('/v1/pipeline/history', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Pipeline changes, oldest first', tags: ['pipeline'],
      response: { 200: { type: 'object', required: ['history'], properties: { history: { type: 'array', items: historyEntrySchema } } }, ...errorResponses },
    },
  }, async () => ({ history: controller.history() }));
}
