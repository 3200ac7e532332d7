// Probes and metrics. /healthz and /readyz are always open (kubelet probes
// carry no token); /metrics is a read.
import type { FastifyInstance } from 'fastify';
import { KwpError } from '../../errors.js';
import type { AdminMetrics } from '../metrics.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';
import type { SourceRefusal } from '../../contract.js';

/**
 * `stateProblems` lists, per stage of the active pipeline that answers with
 * another state than the cluster's, why (Stage.stateProblem).
 */
export function healthRoutes(
  app: FastifyInstance, ready: () => boolean, metrics: AdminMetrics, stateProblems: () => string[] = () => [], refusals: () => SourceRefusal[] = () => [],
): void {
  app.get('/healthz', {
    config: { access: 'open' } satisfies AdminRouteConfig,
    schema: { summary: 'Liveness: the API answers', tags: ['health'], response: { 200: { type: 'object', properties: { status: { type: 'string' } } } } },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    config: { access: 'open' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Readiness: every source finished its first sync and takes its current input, and every stage answers with the current state', tags: ['health'],
      response: { 200: { type: 'object', properties: { ready: { type: 'boolean' } } }, ...errorResponses },
    },
  }, async () => {
    if (!ready()) throw new KwpError('KWP_ERR_NOT_READY', 'GET /readyz: not every source has finished its first sync yet');
    const refused = refusals();
    if (refused.length) {
      throw new KwpError('KWP_ERR_SOURCE_REFUSED', `GET /readyz: ${refused.map((r) => `the ${r.source} source refuses ${r.files.length ? r.files.join(', ') : 'its input'} (${r.code}: ${r.message}); it keeps the last good state`).join('; ')}`);
    }
    const problems = stateProblems();
    if (problems.length) throw new KwpError('KWP_ERR_STAGE_STATE_STALE', `GET /readyz: ${problems.join('; ')}`);
    return { ready: true };
  });

  app.get('/metrics', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: { summary: 'Prometheus metrics (kwp_ prefix)', tags: ['health'], produces: ['text/plain'], response: { 200: { type: 'string' }, ...errorResponses } },
  }, async (_request, reply) => {
    const text = await metrics.text();
    reply.type(metrics.contentType);
    return text;
  });
}
