// Recorded flows as `kwp diff`, `kwp recommend` and POST /v1/diff read them:
// the agent's flow records (docs/flows.md, "Flow record format") or any line
// with at least `src`, `dst` and `port` (and `protocol`, TCP when absent), as
// in `kwp eval`'s flows. Fields a reader does not know are ignored, since
// records grow fields over time; the four it needs are checked as strictly
// as `kwp eval` checks them, naming the file, line and field.
import { KwpError } from '../errors.js';
import { describe, locate as where, toFlowSpec, type FlowSpec } from '../flows.js';

export interface RecordedFlow {
  /** The flow to decide again, with where it was read from. */
  flow: FlowSpec;
  /** Connections it stands for: the records' `count` summed over lines of the same flow (1 for a plain line). */
  count: number;
  /** What the agent did with it, when the record says. */
  recordedVerdict?: 'allow' | 'deny';
}

export interface RecordedFlowRead {
  flows: RecordedFlow[];
  /** Lines read but not decidable (protocols without ports, such as ICMP), each with its place and why. */
  skipped: string[];
}

/** Protocols a flow can be decided for; records of others (ICMP, numbers) are skipped with a note. */
const DECIDABLE = new Set(['TCP', 'UDP', 'SCTP']);

/** The key two lines of one flow share: their counts add up, and the flow is decided once. */
export function flowKey(f: Pick<FlowSpec, 'src' | 'dst' | 'protocol' | 'port' | 'family'>): string {
  // Records of one pair over IPv4 and over IPv6 are two flows: an ipBlock may tell them apart.
  return `${f.src} ${f.dst} ${f.protocol}/${f.port}${f.family ? ` IPv${f.family}` : ''}`;
}

/**
 * One record or flow line; undefined (with `skipped` told why) for a record
 * of a protocol without ports. `index` is the 1-based position, `line` the
 * line in JSON Lines.
 */
function toRecordedFlow(value: unknown, file: string, index: number, line: number | undefined, skipped: string[]): RecordedFlow | undefined {
  const at = where(file, index, line);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new KwpError('KWP_ERR_FLOWS', `${at}: a flow is an object with at least "src", "dst" and "port" (a flow record of the agent, or a kwp eval flow), not ${describe(value)}`);
  }
  const raw = value as Record<string, unknown>;
  const protocol = raw.protocol === undefined ? 'TCP' : typeof raw.protocol === 'string' ? raw.protocol.toUpperCase() : raw.protocol;
  if (typeof protocol === 'string' && protocol !== '' && !DECIDABLE.has(protocol) && (raw.port === 0 || raw.port === undefined)) {
    skipped.push(`${at}: protocol ${protocol} has no ports, and policies here decide TCP, UDP and SCTP flows only; skipped`);
    return undefined;
  }
  // Only the fields a flow is decided by go to the strict checker; the rest of a record is the recorder's.
  const picked: Record<string, unknown> = { src: raw.src, dst: raw.dst, port: raw.port, protocol: raw.protocol ?? 'TCP' };
  if (raw.src === undefined) throw new KwpError('KWP_ERR_FLOWS', `${at}: field "src" is missing; give "namespace/pod" or an IP address`);
  if (raw.dst === undefined) throw new KwpError('KWP_ERR_FLOWS', `${at}: field "dst" is missing; give "namespace/pod" or an IP address`);
  const flow = toFlowSpec(picked, file, index, line);
  if (raw.family !== undefined) {
    if (raw.family !== 4 && raw.family !== 6) throw new KwpError('KWP_ERR_FLOWS', `${at}: field "family" must be 4 or 6, not ${describe(raw.family)}`);
    flow.family = raw.family;
  }

  let count = 1;
  if (raw.count !== undefined) {
    if (typeof raw.count !== 'number' || !Number.isInteger(raw.count) || raw.count < 1) {
      throw new KwpError('KWP_ERR_FLOWS', `${at}: field "count" must be a whole number of connections, at least 1, not ${describe(raw.count)}`);
    }
    count = raw.count;
  }
  const out: RecordedFlow = { flow, count };
  if (raw.verdict !== undefined) {
    if (raw.verdict !== 'allow' && raw.verdict !== 'deny') {
      throw new KwpError('KWP_ERR_FLOWS', `${at}: field "verdict" must be "allow" or "deny", not ${describe(raw.verdict)}`);
    }
    out.recordedVerdict = raw.verdict;
  }
  return out;
}

/** Lines of one flow become one, their counts added; the first line's place is kept for messages. */
function merge(flows: RecordedFlow[]): RecordedFlow[] {
  const byKey = new Map<string, RecordedFlow>();
  for (const f of flows) {
    const key = flowKey(f.flow);
    const seen = byKey.get(key);
    if (!seen) byKey.set(key, { ...f });
    else {
      seen.count += f.count;
      // Records of one flow with both verdicts (a pipeline change in between): the latest one stands.
      if (f.recordedVerdict) seen.recordedVerdict = f.recordedVerdict;
    }
  }
  return [...byKey.values()];
}

/** Records already parsed (the agent's ring, a request body): `name` says where they came from. */
export function recordedFlowsFromValues(values: unknown[], name: string): RecordedFlowRead {
  const skipped: string[] = [];
  const flows = values.flatMap((v, i) => toRecordedFlow(v, name, i + 1, undefined, skipped) ?? []);
  return { flows: merge(flows), skipped };
}

/**
 * Parses JSON Lines of records (blank lines and `#` comments skipped) or a
 * JSON array of them. Throws KWP_ERR_FLOWS naming the file, line and field.
 */
export function parseRecordedFlows(text: string, file: string): RecordedFlowRead {
  const body = text.replace(/^\uFEFF/, '');
  if (body.trim() === '') {
    throw new KwpError('KWP_ERR_FLOWS', `${file} holds no flows; write one flow record per line (kwp flows -o json), or a JSON array of flows`);
  }
  if (body.trimStart().startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLOWS', `${file} is not valid JSON (${(err as Error).message}); fix the syntax, or write one record per line`);
    }
    if (!Array.isArray(parsed) || parsed.length === 0) throw new KwpError('KWP_ERR_FLOWS', `${file} must be a non-empty JSON array of flows, or JSON Lines`);
    return recordedFlowsFromValues(parsed, file);
  }
  const skipped: string[] = [];
  const flows: RecordedFlow[] = [];
  let index = 0;
  body.split(/\r?\n/).forEach((text, i) => {
    const trimmed = text.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    index++;
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLOWS', `${where(file, index, i + 1)}: not valid JSON (${(err as Error).message}); each line holds one flow record`);
    }
    const f = toRecordedFlow(parsed, file, index, i + 1, skipped);
    if (f) flows.push(f);
  });
  if (flows.length === 0 && skipped.length === 0) throw new KwpError('KWP_ERR_FLOWS', `${file} holds no flows, only blank lines and comments`);
  return { flows: merge(flows), skipped };
}
