// GET /v1/pipeline/status: each active stage with the module bytes it runs and
// its verdict, trap and fuel counters (the same counts /metrics exports), in
// one JSON read a dashboard can poll.
import type { FastifyInstance } from 'fastify';
import type { PipelineController } from '../../control/pipeline-controller.js';
import type { PolicyEngine } from '../../pipeline/engine.js';
import { pipelineStatus } from '../../control/pipeline-status.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

const count = { type: 'number' } as const;

const stageStatusSchema = {
  type: 'object',
  required: ['name', 'label', 'module', 'moduleName', 'moduleVersion', 'sha256', 'mode', 'failurePolicy', 'counters'],
  properties: {
    name: { type: 'string' },
    label: { type: 'string' },
    module: { type: 'string', description: 'the module reference of the stage spec' },
    moduleName: { type: 'string' },
    moduleVersion: { type: 'string' },
    sha256: { type: 'string' },
    mode: { type: 'string', enum: ['enforce', 'audit'] },
    failurePolicy: { type: 'string', enum: ['fail-open', 'fail-closed'] },
    counters: {
      type: 'object',
      required: ['decisions', 'accept', 'deny', 'next', 'pass', 'traps', 'fuelExhausted', 'unavailable'],
      properties: { decisions: count, accept: count, deny: count, next: count, pass: count, traps: count, fuelExhausted: count, unavailable: count },
    },
  },
} as const;

export function pipelineStatusRoutes(app: FastifyInstance, engine: PolicyEngine, controller: PipelineController): void {
  app.get('/v1/pipeline/status', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'The active stages with their modules and counters since each started',
      tags: ['pipeline'],
      response: {
        200: {
          type: 'object', required: ['revision', 'readAt', 'stages'],
          properties: { revision: { type: 'integer' }, previousRevision: { type: 'integer' }, readAt: { type: 'string', format: 'date-time' }, stages: { type: 'array', items: stageStatusSchema } },
        },
        ...errorResponses,
      },
    },
  }, async () => pipelineStatus(engine.active, controller.previousRevision));
}
