// The admin API as a Fastify plugin, so an embedder can mount it under any
// prefix in its own server (`app.register(adminApi, {prefix: '/kwp', ...})`);
// createAdminServer wraps it in a server of its own. The plugin keeps its
// error handler, content-type parser, auth hook and OpenAPI document inside
// its own encapsulation context, so it changes nothing of the host server.
import type { FastifyPluginAsync } from 'fastify';
import swagger from '@fastify/swagger';
import { KwpError } from '../errors.js';
import { TokenCheck } from './auth.js';
import { ClientBuckets } from './token-bucket.js';
import { kwpErrorHandler } from './error-handler.js';
import { AdminMetrics } from './metrics.js';
import { errorResponses, errorSchema } from './schemas.js';
import { moduleRoutes } from './routes/modules.js';
import { pipelineRoutes } from './routes/pipeline.js';
import { explainRoutes } from './routes/explain.js';
import { healthRoutes } from './routes/health.js';
import { pipelineStatusRoutes } from './routes/pipeline-status.js';
import { clusterRoutes } from './routes/cluster.js';
import { flowRoutes } from './routes/flows.js';
import { matrixRoutes } from './routes/matrix.js';
import { diffRoutes } from './routes/diff.js';
import { ImpactService, type RecordedFlowSource } from '../impact/live-diff.js';
import { consoleRoutes } from './routes/console.js';
import { fleetRoutes } from './routes/fleet.js';
import type { AdminApiOptions, AdminRouteConfig } from './options.js';

/** POST /v1/diff's recorded flows: those given apart, else the agent's flow recorder (the `flows` option, docs/flows.md). */
function recordedFlowsOf(options: AdminApiOptions): RecordedFlowSource | undefined {
  if (options.recordedFlows) return options.recordedFlows;
  // Read structurally: the recorder (host/flow-records) is built beside this route, and only its query() is needed.
  const recorder = (options as { flows?: { query(): unknown[] } }).flows;
  return recorder ? { records: () => recorder.query() } : undefined;
}

export const adminApi: FastifyPluginAsync<AdminApiOptions> = async (app, options) => {
  const tokens = new TokenCheck(options.token, options.readsOpen ?? false);
  const buckets = new ClientBuckets(options.uploadBurst ?? 5, (options.uploadsPerMinute ?? 30) / 60, options.uploadClients ?? 1024, Date.now, {
    capacity: options.uploadGlobalBurst ?? 20, refillPerSecond: (options.uploadsPerMinuteGlobal ?? 120) / 60,
  });
  const metrics = options.metrics ?? new AdminMetrics({ controller: options.controller, store: options.store });

  app.addSchema(errorSchema);
  // An embedder that documents its own server already has @fastify/swagger;
  // its document then includes these routes, and registering a second copy would clash.
  if (!app.hasDecorator('swagger')) await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'kube-wasm-policies admin API', version: '1', description: 'Upload evaluators, change and roll back the pipeline, explain verdicts. See docs/admin-api.md.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });

  app.setErrorHandler(kwpErrorHandler);
  app.setNotFoundHandler((request, reply) => {
    const err = new KwpError('KWP_ERR_ROUTE_NOT_FOUND', `${request.method} ${request.url}: no such admin API route; GET /openapi.json lists them`);
    reply.status(err.status).send(err.toJSON());
  });

  app.addHook('onRequest', async (request) => {
    const access = (request.routeOptions.config as Partial<AdminRouteConfig> | undefined)?.access ?? 'write';
    tokens.check(access, request.headers.authorization, `${request.method} ${request.url}`);
  });

  moduleRoutes(app, options.store, buckets);
  pipelineRoutes(app, options.controller);
  pipelineStatusRoutes(app, options.engine, options.controller);
  explainRoutes(app, options.engine, options.dialledEndpoints);
  clusterRoutes(app, options.engine.state);
  flowRoutes(app, options.flows);
  matrixRoutes(app, options.engine);
  if (options.fleetStatus) fleetRoutes(app, options.fleetStatus);
  diffRoutes(app, new ImpactService(options.engine, recordedFlowsOf(options)));
  if (options.console ?? true) consoleRoutes(app);
  const controller = options.controller;
  const stateProblems = () => {
    const list = options.engine.state.pendingList;
    const taking = list ? [`the cluster state is taking a list of ${list.objects} ${list.kind} objects in slices (${list.waiting} later changes waiting); every stage answers with the state before it until then`] : [];
    return [...taking, ...(controller.livePipelines()[0]?.stages ?? []).flatMap((s) => (s.stateProblem ? [s.stateProblem.message] : []))];
  };
  healthRoutes(app, options.ready ?? (() => true), metrics, stateProblems, options.refusals);

  app.get('/openapi.json', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: { summary: 'This API as an OpenAPI 3 document', tags: ['health'], hide: true, response: errorResponses },
  }, async () => app.swagger());
};
