// Bearer-token checks for the admin API. Tokens are compared as sha256
// digests with timingSafeEqual, so neither the comparison time nor a length
// mismatch tells a caller how much of a guess was right.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';

/** Who may call a route: anyone, a reader (open when `readsOpen`), or only the admin token. */
export type Access = 'open' | 'read' | 'write';

export const TOKEN_ENV = 'KWP_ADMIN_TOKEN';

/** The admin token: from `file` when given, else from $KWP_ADMIN_TOKEN; undefined when neither is set. */
export function loadAdminToken(options: { file?: string; env?: NodeJS.ProcessEnv } = {}): string | undefined {
  if (options.file) {
    let text: string;
    try {
      text = readFileSync(options.file, 'utf8');
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `${options.file}: cannot read the admin token file: ${(err as Error).message}`);
    }
    const token = text.trim();
    if (token.length < 16) throw new KwpError('KWP_ERR_USAGE', `${options.file}: the admin token must be at least 16 characters (e.g. "openssl rand -hex 32 > ${options.file}")`);
    return token;
  }
  const fromEnv = (options.env ?? process.env)[TOKEN_ENV]?.trim();
  return fromEnv ? fromEnv : undefined;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

export class TokenCheck {
  private readonly expected: Buffer | undefined;

  constructor(token: string | undefined, private readonly readsOpen: boolean) {
    this.expected = token ? digest(token) : undefined;
  }

  /** Throws KWP_ERR_UNAUTHORIZED or KWP_ERR_FORBIDDEN unless the request may use a route of this access level. */
  check(access: Access, authorization: string | undefined, what: string): void {
    if (access === 'open' || (access === 'read' && this.readsOpen)) return;
    if (!this.expected) {
      throw new KwpError('KWP_ERR_UNAUTHORIZED', `${what}: the admin API has no token configured, so it refuses every call that needs one; start the agent with --admin-token-file or ${TOKEN_ENV}`);
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!m) {
      throw new KwpError('KWP_ERR_UNAUTHORIZED', `${what}: send the admin token as "Authorization: Bearer <token>" (kwp CLI: --token-file)`);
    }
    if (!timingSafeEqual(digest(m[1]), this.expected)) {
      throw new KwpError('KWP_ERR_FORBIDDEN', `${what}: the bearer token is not this agent's admin token`);
    }
  }
}
