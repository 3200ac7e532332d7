// GET /v1/fleet/status on the cluster-level admin API (kwp agent --fleet):
// each Pipeline's rollout and what every node reports running, the answer
// `kwp fleet status --server URL` prints. A node's own admin API has no such
// route: it knows only itself.
import type { FastifyInstance } from 'fastify';
import type { FleetStatus } from '../../fleet/fleet-status.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

export function fleetRoutes(app: FastifyInstance, read: () => Promise<FleetStatus>): void {
  app.get('/v1/fleet/status', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Every Pipeline\'s rollout and every node\'s NodePipelineStatus (the cluster-level admin API only)', tags: ['fleet'],
      response: {
        200: {
          type: 'object', required: ['pipelines', 'nodes'],
          properties: {
            pipelines: { type: 'array', items: { type: 'object', required: ['name', 'generation'], additionalProperties: true, properties: { name: { type: 'string' }, generation: { type: 'integer' } } } },
            nodes: { type: 'array', items: { type: 'object', required: ['nodeName'], additionalProperties: true, properties: { nodeName: { type: 'string' } } } },
          },
        },
        ...errorResponses,
      },
    },
  }, async () => read());
}
