// The impact of a change: recorded flows decided twice, by the pipeline and
// objects as they are and as proposed, and every flow whose verdict differs.
// `kwp diff` runs it on manifests; POST /v1/diff on the agent's live state.
import type { StageTrace } from '../contract.js';
import { isKwpError } from '../errors.js';
import type { FlowResult } from '../eval.js';
import type { FlowSpec, ServiceHop } from '../flows.js';
import type { RecordedFlow } from './recorded-flows.js';

/** Decides one flow on one side of the comparison (one result per Service endpoint). */
export type FlowDecider = (flow: FlowSpec) => FlowResult[];

export interface Outcome {
  verdict: 'allow' | 'deny';
  walkthrough: string;
  egress: StageTrace[];
  ingress: StageTrace[];
}

export interface VerdictChange {
  src: string;
  dst: string;
  protocol: string;
  port: number;
  /** Connections the recorded flow stands for. */
  count: number;
  /** Where the flow was read: file and line, or the record's position. */
  from: string;
  /** For a flow to a Service: the endpoint this change is for. */
  via?: ServiceHop;
  before: Outcome;
  after: Outcome;
}

export interface VerdictDiff {
  /** Flows decided on both sides (each distinct flow once). */
  decided: number;
  changes: VerdictChange[];
  /** Flows not decided, with why: undecidable records, or (with skipUnresolvable) ends one side does not know. */
  skipped: string[];
}

export interface DiffOptions {
  /**
   * A flow whose end one side cannot resolve (the pod is gone from the live
   * state) is listed in `skipped` instead of failing the whole diff. The CLI
   * keeps it an error, as `kwp eval` does.
   */
  skipUnresolvable?: boolean;
}

function outcome(r: FlowResult): Outcome {
  return { verdict: r.verdict, walkthrough: r.walkthrough, egress: r.egress, ingress: r.ingress };
}

function placeOf(f: FlowSpec): string {
  return f.line === undefined ? `${f.file}: flow ${f.index}` : `${f.file}: line ${f.line}`;
}

function decideOrSkip(decide: FlowDecider, f: RecordedFlow, side: string, options: DiffOptions, skipped: string[]): FlowResult[] | undefined {
  try {
    return decide(f.flow);
  } catch (err) {
    if (!options.skipUnresolvable || !isKwpError(err) || err.code !== 'KWP_ERR_FLOWS') throw err;
    skipped.push(`${err.message} (${side}); skipped`);
    return undefined;
  }
}

/** Every recorded flow decided before and after; the ones whose verdict differs, in the order they were read. */
export function diffVerdicts(flows: RecordedFlow[], before: FlowDecider, after: FlowDecider, options: DiffOptions = {}): VerdictDiff {
  const changes: VerdictChange[] = [];
  const skipped: string[] = [];
  let decided = 0;
  for (const f of flows) {
    const was = decideOrSkip(before, f, 'as it is', options, skipped);
    const will = was && decideOrSkip(after, f, 'as proposed', options, skipped);
    if (!was || !will) continue;
    decided++;
    // Service flows: one result per endpoint on each side, paired by endpoint (a side may have endpoints the other lacks).
    const endpointOf = (r: FlowResult) => (r.via ? `${r.via.address}:${r.via.port}` : '');
    const wills = new Map(will.map((r) => [endpointOf(r), r]));
    for (const w of was) {
      const n = wills.get(endpointOf(w));
      if (!n || n.verdict === w.verdict) continue;
      changes.push({
        src: f.flow.src, dst: f.flow.dst, protocol: f.flow.protocol, port: f.flow.port, count: f.count, from: placeOf(f.flow),
        ...(w.via ? { via: w.via } : {}),
        before: outcome(w), after: outcome(n),
      });
    }
  }
  return { decided, changes, skipped };
}

/** The changes as text: one line per flip, then both walkthroughs. */
export function formatChanges(diff: VerdictDiff): string {
  const lines: string[] = [];
  for (const c of diff.changes) {
    const hop = c.via ? ` via ${c.via.endpoint}:${c.via.port}` : '';
    const times = c.count === 1 ? '1 connection' : `${c.count} connections`;
    lines.push(`${c.src} -> ${c.dst} ${c.protocol}/${c.port}${hop}  ${c.before.verdict.toUpperCase()} -> ${c.after.verdict.toUpperCase()}  (${times}; ${c.from})`);
    lines.push(`  now:      ${c.before.walkthrough}`);
    lines.push(`  proposed: ${c.after.walkthrough}`);
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

export function diffSummary(diff: VerdictDiff): string {
  const n = diff.changes.length;
  const skipped = diff.skipped.length ? `, ${diff.skipped.length} skipped` : '';
  return `${n} of ${diff.decided} flow${diff.decided === 1 ? '' : 's'} change verdict${skipped}\n`;
}
