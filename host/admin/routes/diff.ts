// POST /v1/diff: what a proposed pipeline or proposed objects would flip
// among the node's recorded flows (or flows given), without applying anything.
// It builds and runs modules the caller chooses, so it takes the token a
// change takes, even where reads are open.
import type { FastifyInstance } from 'fastify';
import type { DiffRequest, ImpactService } from '../../impact/live-diff.js';
import { MAX_DIFF_FLOWS } from '../../impact/live-diff.js';
import { errorResponses, traceSchema } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

const outcomeSchema = {
  type: 'object',
  required: ['verdict', 'walkthrough', 'egress', 'ingress'],
  properties: {
    verdict: { type: 'string', enum: ['allow', 'deny'] },
    walkthrough: { type: 'string' },
    egress: { type: 'array', items: traceSchema },
    ingress: { type: 'array', items: traceSchema },
  },
} as const;

export function diffRoutes(app: FastifyInstance, impact: ImpactService): void {
  app.post<{ Body: DiffRequest }>('/v1/diff', {
    config: { access: 'write' } satisfies AdminRouteConfig,
    schema: {
      summary: 'The recorded flows whose verdict a proposed pipeline or proposed objects would change; applies nothing',
      description: `Decides each flow with the active pipeline on the live state and with the proposal (built by a trial engine with the agent's modules and limits, then disposed; no revision is taken). Flows: "flows" when given, else the node's recorded flows (docs/flows.md); at most ${MAX_DIFF_FLOWS} distinct flows. A flow whose pod one side does not know is listed in "skipped". Needs the admin token even with readsOpen: it builds and runs modules.`,
      tags: ['pipeline'],
      body: {
        type: 'object',
        additionalProperties: false,
        properties: {
          pipeline: { type: 'object', description: 'a whole pipeline, as PUT /v1/pipeline takes it' },
          objects: { type: 'array', maxItems: 1000, items: { type: 'object' }, description: 'objects added to the live state or replacing the one of the same kind, namespace and name; validated as strictly as manifests' },
          remove: {
            type: 'array', maxItems: 1000,
            items: {
              type: 'object', required: ['apiVersion', 'kind', 'name'], additionalProperties: false,
              properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, namespace: { type: 'string' }, name: { type: 'string' } },
            },
            description: 'objects taken out of the live state',
          },
          flows: { type: 'array', maxItems: MAX_DIFF_FLOWS, items: { type: 'object' }, description: 'flows to decide instead of the recorded ones: flow records, or {src, dst, port, protocol}' },
        },
      },
      response: {
        200: {
          type: 'object',
          required: ['revision', 'flowsFrom', 'decided', 'changes', 'skipped'],
          properties: {
            revision: { type: 'integer', description: 'the active pipeline revision the proposal was compared with' },
            flowsFrom: { type: 'string', enum: ['request', 'recorded'] },
            decided: { type: 'integer', description: 'distinct flows decided on both sides' },
            changes: {
              type: 'array',
              items: {
                type: 'object',
                required: ['src', 'dst', 'protocol', 'port', 'count', 'from', 'before', 'after'],
                properties: {
                  src: { type: 'string' }, dst: { type: 'string' }, protocol: { type: 'string' }, port: { type: 'integer' },
                  count: { type: 'integer', description: 'connections the flow stands for' },
                  from: { type: 'string', description: 'where the flow was read' },
                  via: { type: 'object', additionalProperties: true },
                  before: outcomeSchema,
                  after: outcomeSchema,
                },
              },
            },
            skipped: { type: 'array', items: { type: 'string' } },
          },
        },
        ...errorResponses,
      },
    },
  }, async (request) => impact.diff(request.body));
}
