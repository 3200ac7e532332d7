// What the admin API needs from the agent: the services it fronts and its
// safety settings. The CLI talks to the same routes through admin/client.ts.
import type { ModuleStore } from '../control/module-store.js';
import type { PipelineController } from '../control/pipeline-controller.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import type { FleetStatus } from '../fleet/fleet-status.js';
import type { AdminMetrics } from './metrics.js';
import type { Access } from './auth.js';
import type { RouteErrorConfig } from './error-handler.js';
import type { RecordedFlowSource } from '../impact/live-diff.js';
import type { SourceRefusal } from '../contract.js';

export interface AdminApiOptions {
  store: ModuleStore;
  controller: PipelineController;
  /** For explanations: the cluster state and the active pipeline. */
  engine: PolicyEngine;
  /** The admin bearer token (loadAdminToken). Without one every route that needs a token answers 401. */
  token?: string;
  /** Let GET routes, /metrics, /openapi.json and POST /v1/explain through without a token. Default false. */
  readsOpen?: boolean;
  /** True once every source finished its first sync; /readyz answers 503 until then. Default: always ready. */
  ready?: () => boolean;
  /** Sources refusing their current input (SourceRefusal); /readyz answers 503 KWP_ERR_SOURCE_REFUSED while there are any. */
  refusals?: () => SourceRefusal[];
  /** Metrics to serve on /metrics; the plugin builds its own when absent. */
  metrics?: AdminMetrics;
  /**
   * Upload rate limit, per client address (`request.ip`; behind a proxy, set
   * Fastify's `trustProxy` so that is the client's): a bucket of
   * `uploadBurst` tokens refilled at `uploadsPerMinute`. Defaults 5 and 30.
   * Every client holds the same admin token, so the address is what tells
   * them apart.
   */
  uploadBurst?: number;
  uploadsPerMinute?: number;
  /** Client buckets kept at most; past that the least recently used is forgotten. Default 1024. */
  uploadClients?: number;
  /**
   * One bucket all clients draw from besides their own: `uploadGlobalBurst`
   * tokens refilled at `uploadsPerMinuteGlobal`. Defaults 20 and 120, so many
   * addresses cannot multiply the per-address rate.
   */
  uploadGlobalBurst?: number;
  uploadsPerMinuteGlobal?: number;
  /**
   * Where the kernel sent connections to a Service (conntrack, through the
   * dataplane), so an explanation of a flow to a Service can name the
   * endpoint it was rewritten to. Absent: every endpoint is explained.
   */
  dialledEndpoints?: (query: { family: 4 | 6; protocol: number; src: string; dst: string; dstPort: number }) => Promise<Array<{ address: string; port: number }>>;
  /** The cluster-level admin API (kwp agent --fleet): what every node runs, served at GET /v1/fleet/status. Absent: no such route. */
  fleetStatus?: () => Promise<FleetStatus>;
  /** The node's recorded flows, which POST /v1/diff decides when the request gives none (the agent's flow ring). */
  recordedFlows?: RecordedFlowSource;
  /** Serve the web console at /ui/ (docs/console.md). Default true. */
  console?: boolean;
}

/** Per-route settings read by the plugin's hooks. */
export interface AdminRouteConfig extends RouteErrorConfig {
  access: Access;
}

export const SIGNATURE_HEADER = 'x-kwp-signature';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route (admin/auth.ts). */
    access?: Access;
    bodyTooLargeCode?: RouteErrorConfig['bodyTooLargeCode'];
  }
}
