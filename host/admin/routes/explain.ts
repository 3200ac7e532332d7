// POST /v1/explain: one flow decided by the active pipeline, with the walk of
// every stage, as `kwp eval` would print it for the live cluster state.
import type { FastifyInstance } from 'fastify';
import type { PolicyEngine } from '../../pipeline/engine.js';
import { resolveFlow, toFlowSpec } from '../../flows.js';
import { walkthroughLine } from '../../walkthrough.js';
import { errorResponses, traceSchema } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

export function explainRoutes(app: FastifyInstance, engine: PolicyEngine): void {
  app.post('/v1/explain', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Explain the verdict for one flow on the active pipeline',
      tags: ['explain'],
      body: {
        type: 'object',
        required: ['src', 'dst', 'port'],
        properties: {
          src: { type: 'string', description: 'namespace/pod or an IP address' },
          dst: { type: 'string', description: 'namespace/pod or an IP address' },
          protocol: { type: 'string', description: 'TCP (default), UDP or SCTP' },
          port: { type: 'integer', minimum: 1, maximum: 65535 },
          srcPort: { type: 'integer', minimum: 1, maximum: 65535 },
        },
      },
      response: {
        200: {
          type: 'object',
          required: ['revision', 'verdict', 'walkthrough', 'egress', 'ingress', 'notes'],
          properties: {
            revision: { type: 'integer' },
            verdict: { type: 'string', enum: ['allow', 'deny'] },
            walkthrough: { type: 'string' },
            egress: { type: 'array', items: traceSchema },
            ingress: { type: 'array', items: traceSchema },
            notes: { type: 'array', items: { type: 'string' } },
          },
        },
        ...errorResponses,
      },
    },
  }, async (request) => {
    const flow = toFlowSpec(request.body, 'POST /v1/explain body', 1);
    const resolved = resolveFlow(flow, engine.state);
    // One read of the active pipeline, so the revision reported is the one that decided.
    const pipeline = engine.active;
    const d = pipeline.evaluate(resolved.packet, resolved.srcPod, resolved.dstPod);
    return {
      revision: pipeline.revision,
      verdict: d.allowed ? 'allow' : 'deny',
      walkthrough: walkthroughLine(flow, d.allowed, d.egress, d.ingress),
      egress: d.egress.trace,
      ingress: d.ingress.trace,
      notes: resolved.notes,
    };
  });
}
