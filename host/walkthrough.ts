// How a decision reads as one line of text: the walkthrough `kwp eval`,
// `kwp explain` and the admin API's explain route all print. Shared here so
// the agent's routes do not depend on the offline evaluator.
import type { DirectionResult, StageTrace } from './contract.js';
import type { FlowSpec, ServiceHop } from './flows.js';
import { attributedReason } from './abi/attribution.js';

/** One step as a walkthrough shows it, or undefined for a stage that answered Next. */
export function formatStep(t: StageTrace): string | undefined {
  const prefix = t.mode === 'audit' ? 'audit ' : '';
  if (t.failure) return `[${t.label}] ${prefix}${t.verdict} (${t.failure}: failure policy)`;
  // Next means "not my business": a walkthrough shows only stages that had something to say.
  if (t.verdict === 'Next') return undefined;
  const text = t.attribution ? attributedReason(t.attribution, t.reason ?? '') : (t.reason ?? '');
  return `[${t.label}] ${prefix}${t.verdict}${text ? ` (${text})` : ''}`;
}

function formatWalk(r: DirectionResult): string {
  const steps = r.trace.map(formatStep).filter((s): s is string => s !== undefined);
  return steps.length ? steps.join(' -> ') : 'no stage decided';
}

/** `via` names the endpoint a flow to a Service was sent to: `x/a -> y/web TCP/80 via y/web-1:8080  ALLOW ...`. */
export function walkthroughLine(flow: Pick<FlowSpec, 'src' | 'dst' | 'protocol' | 'port'>, allowed: boolean, egress: DirectionResult, ingress: DirectionResult, via?: ServiceHop): string {
  const proto = (flow.protocol ?? 'TCP').toUpperCase();
  const hop = via ? ` via ${via.endpoint}${via.address.includes(':') ? `[${via.address}]` : ''}:${via.port}` : '';
  return `${flow.src} -> ${flow.dst} ${proto}/${flow.port}${hop}  ${allowed ? 'ALLOW' : 'DENY'}  egress: ${formatWalk(egress)}  ingress: ${formatWalk(ingress)}`;
}
