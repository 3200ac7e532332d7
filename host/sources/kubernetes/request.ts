// One-shot requests (lists, discovery, the fleet's writes) authenticated by client-node's
// KubeConfig. Watches go through client-node's Watch; lists come here because
// the generated typed clients turn objects into model classes (Dates instead of
// strings), and the pipeline wants the objects in their JSON shape.

import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** An error from the API server with its HTTP status; `statusCode` matches client-node's Watch errors. */
export class ApiRequestError extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
    readonly reason?: string,
  ) {
    super(message);
    this.name = 'ApiRequestError';
  }
}

export async function getJson(kc: KubeConfig, path: string, signal?: AbortSignal, timeoutMs = 60_000): Promise<any> {
  return requestJson(kc, 'GET', path, { signal, timeoutMs });
}

export interface JsonRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** One JSON request (the fleet's writes: create, replace, status); resolves with the answer's body, rejects with ApiRequestError. */
export async function requestJson(kc: KubeConfig, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, options: JsonRequestOptions = {}): Promise<any> {
  const { signal, timeoutMs = 60_000 } = options;
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new ApiRequestError('the kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + path);
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  const headers: Record<string, string | number> = { Accept: 'application/json' };
  if (payload) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': payload.length });
  const opts: https.RequestOptions = { method, headers };
  await kc.applyToHTTPSOptions(opts);
  const transport = url.protocol === 'http:' ? http : https;
  return new Promise((resolve, reject) => {
    const req = transport.request(url, { ...opts, signal, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        const code = res.statusCode ?? 0;
        if (code >= 200 && code < 300 && body !== undefined) return resolve(body);
        const detail = body?.message ?? (text.slice(0, 200) || res.statusMessage);
        reject(new ApiRequestError(`${method} ${url.pathname}: HTTP ${code}: ${detail}`, code, body?.reason));
      });
    });
    req.on('timeout', () => req.destroy(new ApiRequestError(`${method} ${url.pathname}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}
