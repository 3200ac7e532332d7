// POST /v1/explain: one flow decided by the active pipeline, with the walk of
// every stage, as `kwp eval` would print it for the live cluster state.
import type { FastifyInstance } from 'fastify';
import type { PolicyEngine } from '../../pipeline/engine.js';
import { resolveFlowRoutes, toFlowSpec, type ResolvedFlow } from '../../flows.js';
import { formatIP } from '../../net/ip.js';
import { walkthroughLine } from '../../walkthrough.js';
import { errorResponses, traceSchema } from '../schemas.js';
import type { AdminApiOptions, AdminRouteConfig } from '../options.js';

/**
 * A flow to a Service is explained for the endpoints conntrack says its
 * connections went to, or for every endpoint when conntrack knows none.
 * `viaService` takes a flow to a pod as one a Service proxy sent there (so a
 * pod to itself is the Service hairpin).
 */
export function explainRoutes(app: FastifyInstance, engine: PolicyEngine, dialledEndpoints?: AdminApiOptions['dialledEndpoints']): void {
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
          viaService: { type: 'boolean', description: 'the flow reached the destination pod through a Service (a pod to itself: the Service hairpin)' },
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
            endpoints: {
              type: 'array',
              description: 'for a flow to a Service: one decision per endpoint explained',
              items: {
                type: 'object',
                required: ['service', 'endpoint', 'address', 'port', 'verdict', 'walkthrough'],
                properties: {
                  service: { type: 'string' }, endpoint: { type: 'string' }, address: { type: 'string' }, port: { type: 'integer' },
                  verdict: { type: 'string', enum: ['allow', 'deny'] }, walkthrough: { type: 'string' },
                },
              },
            },
          },
        },
        ...errorResponses,
      },
    },
  }, async (request) => {
    const { viaService, ...fields } = request.body as Record<string, unknown> & { viaService?: boolean };
    const flow = toFlowSpec(fields, 'POST /v1/explain body', 1);
    let routes: ResolvedFlow[] = resolveFlowRoutes(flow, engine.state);
    const notes: string[] = [];
    if (routes[0].via && dialledEndpoints) {
      const p = routes[0].packet;
      const seen = await dialledEndpoints({ family: p.family, protocol: p.protocol, src: formatIP(p.src), dst: serviceAddress(flow.dst, engine), dstPort: flow.port });
      const known = routes.filter((r) => seen.some((e) => e.address === r.via!.address && e.port === r.via!.port));
      if (known.length > 0) {
        routes = known;
        notes.push(`conntrack: connections from ${flow.src} to ${flow.dst} ${flow.protocol}/${flow.port} were rewritten to ${known.map((r) => `${r.via!.endpoint}:${r.via!.port}`).join(', ')}`);
      } else notes.push(`conntrack knows no connection from ${flow.src} to ${flow.dst} ${flow.protocol}/${flow.port}: every endpoint the Service proxy may choose is explained`);
    } else if (routes[0].via) notes.push('no dataplane to ask conntrack: every endpoint the Service proxy may choose is explained');
    if (viaService && !routes[0].via) {
      const r = routes[0];
      if (r.srcPod && r.dstPod && r.srcPod.id === r.dstPod.id) {
        r.packet.serviceHairpin = true;
        notes.push(`${flow.src} reaching itself through a Service: a Service hairpin`);
      } else notes.push(`taken as sent to ${flow.dst} by a Service proxy; only a pod reaching itself is judged differently for that`);
    }
    // One read of the active pipeline, so the revision reported is the one that decided.
    const pipeline = engine.active;
    const decided = routes.map((r) => ({ r, d: pipeline.evaluate(r.packet, r.srcPod, r.dstPod) }));
    const lines = decided.map(({ r, d }) => walkthroughLine(flow, d.allowed, d.egress, d.ingress, r.via));
    const first = decided[0];
    return {
      revision: pipeline.revision,
      verdict: decided.every(({ d }) => d.allowed) ? 'allow' : 'deny',
      walkthrough: lines.join('\n'),
      egress: first.d.egress.trace,
      ingress: first.d.ingress.trace,
      notes: [...new Set([...notes, ...routes.flatMap((r) => r.notes)])],
      ...(first.r.via
        ? { endpoints: decided.map(({ r, d }, i) => ({ service: r.via!.service, endpoint: r.via!.endpoint, address: r.via!.address, port: r.via!.port, verdict: d.allowed ? 'allow' : 'deny', walkthrough: lines[i] })) }
        : {}),
    };
  });
}

/** The ClusterIP a flow dialled: the address itself, or the named Service's. */
function serviceAddress(dst: string, engine: PolicyEngine): string {
  if (!dst.includes('/')) return dst;
  const service = engine.state.object('v1/Service', dst);
  const ip = service?.spec?.clusterIP;
  return typeof ip === 'string' ? ip : dst;
}
