// The flow record as docs/flows.md ("Flow record format") defines it: one
// JSON object per line, what the agent writes and `kwp flows`, `kwp diff` and
// `kwp recommend` read. Kept a plain object so it crosses a worker, a file
// and an HTTP response unchanged.

/** How one direction's walk ended. */
export interface FlowDirection {
  /** The stage that decided; "" when none did. */
  stage: string;
  policy: string;
  rule: string;
  /** `Accept`, `Deny`, `Default` (no stage decided: allowed), `Skipped` (ingress after an egress deny), `Failure`, `Remote`, `Unknown` (the drain could not work the walk out). */
  action: FlowAction;
  peer?: string;
  rulePort?: string;
}

export type FlowAction = 'Accept' | 'Deny' | 'Default' | 'Skipped' | 'Failure' | 'Remote' | 'Unknown';

/** What an audit stage would have done. */
export interface FlowAudit {
  stage: string;
  direction: 'egress' | 'ingress';
  policy: string;
  rule: string;
  /** `Accept`, `Deny` or `Pass`. */
  action: string;
}

export interface FlowRecord {
  src: string;
  dst: string;
  port: number;
  protocol: string;
  family: 4 | 6;
  srcPort: number;
  srcWorkload: string;
  dstWorkload: string;
  srcLabels: Record<string, string>;
  dstLabels: Record<string, string>;
  srcNamespaceLabels: Record<string, string>;
  dstNamespaceLabels: Record<string, string>;
  dstPortName: string;
  verdict: 'allow' | 'deny';
  egress: FlowDirection;
  ingress: FlowDirection;
  audit: FlowAudit[];
  count: number;
  firstSeen: string;
  lastSeen: string;
  revision: number;
  node: string;
}

const PROTOCOL_NAMES: Record<number, string> = { 1: 'ICMP', 6: 'TCP', 17: 'UDP', 58: 'ICMPv6', 132: 'SCTP' };

/** `TCP`, `UDP`, ...; the IANA number as a string for protocols without a name here. */
export function protocolName(protocol: number): string {
  return PROTOCOL_NAMES[protocol] ?? String(protocol);
}

/** The pod a record's end names: `namespace/pod` or an address (no `/`). */
export function endNamespace(end: string): string | undefined {
  const slash = end.indexOf('/');
  return slash > 0 ? end.slice(0, slash) : undefined;
}
