// GET /ui/: the web console's files (host/admin/ui, copied next to the
// compiled code by `npm run build`). They are the package's own static files
// and carry no cluster data, so they are open like /healthz: the console then
// asks for the token only when a read or change of the API needs it. Every file
// is read once at startup and served from memory by its exact name, so no
// request path ever reaches the file system.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KwpError } from '../../errors.js';
import type { AdminRouteConfig } from '../options.js';

/** Where the console's files are: beside the compiled routes (dist/host/admin/ui) or the sources (host/admin/ui). */
export const CONSOLE_DIR = fileURLToPath(new URL('../ui/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

// Nothing but this origin: no CDN, no inline script, no framing. The console
// talks only to the admin API it was served from.
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-cache',
};

interface Asset { type: string; body: Buffer; etag: string }

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return assets;
  }
  for (const entry of entries) {
    const file = join(dir, entry);
    const type = TYPES[extname(file)];
    if (!type || entry.endsWith('.test.ts') || !statSync(file).isFile()) continue;
    const body = readFileSync(file);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(relative(dir, file).split(sep).join('/'), { type, body, etag });
  }
  return assets;
}

export function consoleRoutes(app: FastifyInstance, dir: string = CONSOLE_DIR): void {
  const assets = loadAssets(dir);
  const config = { access: 'open' } satisfies AdminRouteConfig;
  const schema = { hide: true };

  const send = (reply: FastifyReply, name: string, ifNoneMatch: string | undefined, what: string) => {
    const asset = assets.get(name);
    if (!asset) {
      const hint = assets.size === 0 ? `the console's files are missing from ${dir}; run "npm run build"` : 'the console has no such file';
      throw new KwpError('KWP_ERR_ROUTE_NOT_FOUND', `${what}: ${hint}`);
    }
    reply.headers(SECURITY_HEADERS).header('etag', asset.etag);
    if (ifNoneMatch === asset.etag) return reply.status(304).send();
    return reply.type(asset.type).send(asset.body);
  };

  // Relative, so it also lands right when an embedder mounts the API under a prefix.
  app.get('/ui', { config, schema }, async (_request, reply) => reply.redirect('ui/', 308));
  app.get('/ui/', { config, schema }, async (request, reply) => send(reply, 'index.html', request.headers['if-none-match'], 'GET /ui/'));
  app.get<{ Params: { '*': string } }>('/ui/*', { config, schema }, async (request, reply) =>
    send(reply, request.params['*'], request.headers['if-none-match'], `GET ${request.url}`));
}
