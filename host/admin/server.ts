// A standalone admin server: the adminApi plugin in a Fastify instance of its
// own, on 127.0.0.1:9443 unless told otherwise, with optional TLS (client
// certificates included). close() stops accepting, lets in-flight requests
// finish, then closes idle keep-alive connections.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import { randomUUID } from 'node:crypto';
import { adminApi } from './plugin.js';
import type { AdminApiOptions } from './options.js';

export const DEFAULT_ADMIN_HOST = '127.0.0.1';
export const DEFAULT_ADMIN_PORT = 9443;

export interface AdminServerOptions extends AdminApiOptions {
  host?: string;
  port?: number;
  /** TLS: key, cert, and for client certificates ca + requestCert + rejectUnauthorized. */
  https?: HttpsServerOptions;
  /** A pino logger; Fastify logs nothing when absent. */
  logger?: FastifyBaseLogger;
  /** URL prefix for every route (default none). */
  prefix?: string;
}

export interface AdminServer {
  readonly app: FastifyInstance;
  /** Starts listening; resolves to the URL it listens on. */
  listen(): Promise<string>;
  /** Graceful: in-flight requests finish first. */
  close(): Promise<void>;
}

export async function createAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const { host = DEFAULT_ADMIN_HOST, port = DEFAULT_ADMIN_PORT, https, logger, prefix, ...api } = options;
  const app = (Fastify as any)({
    ...(https ? { https } : {}),
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    forceCloseConnections: 'idle',
    // Ids that stay unique across restarts, since 5xx answers and log lines carry them.
    genReqId: () => randomUUID(),
    return503OnClosing: true,
  }) as FastifyInstance;
  await app.register(adminApi, { ...api, prefix });
  await app.ready();
  return {
    app,
    async listen() {
      return app.listen({ host, port });
    },
    async close() {
      const closing = app.close();
      // Connections that finish their last request after close() began would
      // otherwise idle until keep-alive times out; close them as they go idle.
      const sweep = setInterval(() => app.server.closeIdleConnections?.(), 50);
      try {
        await closing;
      } finally {
        clearInterval(sweep);
      }
    },
  };
}
