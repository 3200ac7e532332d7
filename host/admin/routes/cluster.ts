// GET /v1/cluster/pods and /v1/cluster/namespaces: what the agent knows of the
// cluster, for choosing the ends of a flow or the pods of a matrix.
import type { FastifyInstance } from 'fastify';
import type { ClusterState } from '../../state/cluster-state.js';
import { listNamespaces, listPods } from '../../state/cluster-listing.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

const labels = { type: 'object', additionalProperties: { type: 'string' } } as const;

const podSchema = {
  type: 'object',
  required: ['namespace', 'name', 'labels', 'ips', 'nodeName', 'hostNetwork', 'ports'],
  properties: {
    namespace: { type: 'string' },
    name: { type: 'string' },
    labels,
    ips: { type: 'array', items: { type: 'string' } },
    nodeName: { type: 'string' },
    hostNetwork: { type: 'boolean' },
    ports: {
      type: 'array',
      items: { type: 'object', required: ['port', 'protocol'], properties: { name: { type: 'string' }, port: { type: 'integer' }, protocol: { type: 'string' } } },
    },
  },
} as const;

export function clusterRoutes(app: FastifyInstance, state: ClusterState): void {
  app.get<{ Querystring: { namespace?: string; selector?: string } }>('/v1/cluster/pods', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Pods of this cluster that have an address, sorted by namespace and name', tags: ['cluster'],
      querystring: {
        type: 'object',
        properties: {
          namespace: { type: 'string', description: 'only pods of this namespace' },
          selector: { type: 'string', description: 'equality-based label selector, e.g. app=web,tier!=db' },
        },
      },
      response: { 200: { type: 'object', required: ['pods'], properties: { pods: { type: 'array', items: podSchema } } }, ...errorResponses },
    },
  }, async (request) => ({
    pods: listPods(state, { namespace: request.query.namespace, selector: request.query.selector, where: 'GET /v1/cluster/pods: query "selector"' }),
  }));

  app.get('/v1/cluster/namespaces', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Namespaces, with their labels and how many pods each has', tags: ['cluster'],
      response: {
        200: {
          type: 'object', required: ['namespaces'],
          properties: { namespaces: { type: 'array', items: { type: 'object', required: ['name', 'labels', 'pods'], properties: { name: { type: 'string' }, labels, pods: { type: 'integer' } } } } },
        },
        ...errorResponses,
      },
    },
  }, async () => ({ namespaces: listNamespaces(state) }));
}
