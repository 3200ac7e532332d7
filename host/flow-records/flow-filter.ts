// The filters of `GET /v1/flows` and `kwp flows` (docs/flows.md, "Reading
// flows"), parsed once from query parameters or flags, so the route and the
// CLI accept exactly the same words and refuse the same mistakes.
import { KwpError } from '../errors.js';
import type { FlowRecord } from './flow-record.js';

export interface FlowFilter {
  /** Either end in this namespace. */
  namespace?: string;
  /** Either end is this pod: `namespace/name`, or a name matched in any namespace. */
  pod?: string;
  verdict?: 'allow' | 'deny';
  /** A direction (or audit entry) decided by this policy. */
  policy?: string;
  /** Records last seen at or after this time (ms since the epoch). */
  since?: number;
  /** At most this many records (the newest). */
  limit?: number;
}

/** The largest `limit` a request may ask for. */
export const MAX_FLOW_LIMIT = 100_000;

/** `30s`, `5m`, `2h`, `1d`, or an RFC 3339 time. */
export function parseSince(text: string, now = Date.now()): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text);
  if (m) {
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
    return now - Number(m[1]) * unit;
  }
  const t = Date.parse(text);
  if (/^\d{4}-\d\d-\d\dT/.test(text) && Number.isFinite(t)) return t;
  throw new KwpError('KWP_ERR_FLOW_FILTER', `since "${text}" is neither a duration (30s, 5m, 2h, 1d) nor an RFC 3339 time (2026-12-01T13:40:00Z)`);
}

/** Builds a filter from string parameters (query string or flags); `where` names them in errors. */
export function parseFlowFilter(params: Record<string, string | undefined>, where: (name: string) => string, now = Date.now()): FlowFilter {
  const f: FlowFilter = {};
  const known = new Set(['namespace', 'pod', 'verdict', 'policy', 'since', 'limit']);
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    if (!known.has(k)) throw new KwpError('KWP_ERR_FLOW_FILTER', `${where(k)} is not a flow filter; use namespace, pod, verdict, policy, since or limit`);
    if (v === '') throw new KwpError('KWP_ERR_FLOW_FILTER', `${where(k)} is empty; give a value or leave it out`);
  }
  if (params.namespace !== undefined) f.namespace = params.namespace;
  if (params.pod !== undefined) f.pod = params.pod;
  if (params.policy !== undefined) f.policy = params.policy;
  if (params.verdict !== undefined) {
    const v = params.verdict.toLowerCase();
    if (v !== 'allow' && v !== 'deny') throw new KwpError('KWP_ERR_FLOW_FILTER', `${where('verdict')} "${params.verdict}" is not allow or deny`);
    f.verdict = v;
  }
  if (params.since !== undefined) {
    try {
      f.since = parseSince(params.since, now);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLOW_FILTER', `${where('since')}: ${(err as Error).message.replace(/^since /, '')}`);
    }
  }
  if (params.limit !== undefined) {
    const n = Number(params.limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_FLOW_LIMIT) throw new KwpError('KWP_ERR_FLOW_FILTER', `${where('limit')} "${params.limit}" must be a whole number from 1 to ${MAX_FLOW_LIMIT}`);
    f.limit = n;
  }
  return f;
}

function podMatches(end: string, pod: string): boolean {
  return pod.includes('/') ? end === pod : end.slice(end.indexOf('/') + 1) === pod && end.includes('/');
}

export function matchesFlow(r: FlowRecord, f: FlowFilter): boolean {
  if (f.verdict !== undefined && r.verdict !== f.verdict) return false;
  if (f.namespace !== undefined && !r.src.startsWith(`${f.namespace}/`) && !r.dst.startsWith(`${f.namespace}/`)) return false;
  if (f.pod !== undefined && !podMatches(r.src, f.pod) && !podMatches(r.dst, f.pod)) return false;
  if (f.policy !== undefined && r.egress.policy !== f.policy && r.ingress.policy !== f.policy && !r.audit.some((a) => a.policy === f.policy)) return false;
  if (f.since !== undefined && Date.parse(r.lastSeen) < f.since) return false;
  return true;
}
