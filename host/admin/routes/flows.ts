// GET /v1/flows: the agent's aggregated flow records (docs/flows.md), from
// the recorder's in-memory ring, filtered; with `follow=true` an NDJSON
// stream of the ring's matching records and then every new one as its
// interval ends, until the client goes away.
import type { FastifyInstance } from 'fastify';
import { KwpError } from '../../errors.js';
import type { FlowRecorder } from '../../flow-records/flow-recorder.js';
import { matchesFlow, parseFlowFilter } from '../../flow-records/flow-filter.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

const labels = { type: 'object', additionalProperties: { type: 'string' } } as const;
const direction = {
  type: 'object', required: ['stage', 'policy', 'rule', 'action'],
  properties: {
    stage: { type: 'string' }, policy: { type: 'string' }, rule: { type: 'string' },
    action: { type: 'string', enum: ['Accept', 'Deny', 'Default', 'Skipped', 'Failure', 'Remote', 'Unknown'] },
    peer: { type: 'string' }, rulePort: { type: 'string' },
  },
} as const;

/** One flow record, as docs/flows.md ("Flow record format") defines it. */
export const flowRecordSchema = {
  type: 'object',
  required: ['src', 'dst', 'port', 'protocol', 'family', 'verdict', 'egress', 'ingress', 'audit', 'count', 'firstSeen', 'lastSeen', 'revision', 'node'],
  properties: {
    src: { type: 'string' }, dst: { type: 'string' }, port: { type: 'integer' }, protocol: { type: 'string' },
    family: { type: 'integer', enum: [4, 6] }, srcPort: { type: 'integer' },
    srcWorkload: { type: 'string' }, dstWorkload: { type: 'string' },
    srcLabels: labels, dstLabels: labels, srcNamespaceLabels: labels, dstNamespaceLabels: labels, dstPortName: { type: 'string' },
    verdict: { type: 'string', enum: ['allow', 'deny'] },
    egress: direction, ingress: direction,
    audit: {
      type: 'array',
      items: {
        type: 'object', required: ['stage', 'direction', 'policy', 'rule', 'action'],
        properties: { stage: { type: 'string' }, direction: { type: 'string', enum: ['egress', 'ingress'] }, policy: { type: 'string' }, rule: { type: 'string' }, action: { type: 'string' } },
      },
    },
    count: { type: 'integer', minimum: 1 }, firstSeen: { type: 'string' }, lastSeen: { type: 'string' },
    revision: { type: 'integer' }, node: { type: 'string' },
  },
} as const;

interface FlowsQuery { namespace?: string; pod?: string; verdict?: string; policy?: string; since?: string; limit?: string; follow?: string }

export function flowRoutes(app: FastifyInstance, recorder: FlowRecorder | undefined): void {
  app.get<{ Querystring: FlowsQuery }>('/v1/flows', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Aggregated flow records the agent decided, newest last; follow=true streams NDJSON', tags: ['flows'],
      querystring: {
        type: 'object',
        properties: {
          namespace: { type: 'string', description: 'either end in this namespace' },
          pod: { type: 'string', description: 'either end is this pod: namespace/name, or a name in any namespace' },
          verdict: { type: 'string', description: 'allow or deny' },
          policy: { type: 'string', description: 'a direction or audit entry decided by this policy (namespace/name, or the name of a cluster-scoped one)' },
          since: { type: 'string', description: 'last seen at most this long ago (30s, 5m, 2h, 1d) or since an RFC 3339 time' },
          limit: { type: 'string', description: 'at most this many records, the newest (1-100000)' },
          follow: { type: 'string', enum: ['true', 'false'], description: 'stream NDJSON: the matching records, then each new one as its aggregation interval ends' },
        },
      },
      response: {
        200: {
          type: 'object', required: ['flows', 'intervalSeconds', 'ringSize', 'dropped'],
          properties: {
            flows: { type: 'array', items: flowRecordSchema },
            intervalSeconds: { type: 'number', description: 'the aggregation interval' },
            ringSize: { type: 'integer', description: 'records the agent keeps in memory' },
            dropped: { type: 'integer', description: 'connections not recorded because the packet path outran the recorder' },
          },
        },
        ...errorResponses,
      },
    },
  }, async (request, reply) => {
    if (!recorder) throw new KwpError('KWP_ERR_FLOWS_OFF', 'GET /v1/flows: this agent does not record flows (started with --flow-ring 0); restart it with a ring');
    const { follow, ...params } = request.query;
    const filter = parseFlowFilter(params, (name) => `GET /v1/flows: query "${name}"`);
    if (follow !== 'true') {
      return { flows: recorder.query(filter), intervalSeconds: recorder.intervalMs / 1000, ringSize: recorder.ringSize, dropped: recorder.buffer.dropped };
    }
    // The stream is written by hand: the response schema describes the non-follow answer only.
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache' });
    for (const r of recorder.query(filter)) res.write(`${JSON.stringify(r)}\n`);
    const live = { ...filter, limit: undefined };
    const stop = recorder.follow((r) => { if (matchesFlow(r, live)) res.write(`${JSON.stringify(r)}\n`); });
    // A comment-free keepalive: an empty line every 15 s lets proxies and clients see the stream is alive.
    const keepalive = setInterval(() => res.write('\n'), 15_000);
    const end = () => { stop(); clearInterval(keepalive); };
    request.raw.on('close', end);
    res.on('close', end);
  });
}
