// Rule attribution (ABI 1.3): which policy and which rule of it decided a
// record, and the peer and port clauses that matched. On the decision path an
// evaluator only stores a u32 rule code beside its reason code (Decision.rule);
// the text is built here, off the packet path, when the host calls
// kwp_attribution(reason, rule) for a flow record or a walkthrough.

import { LabelSelector, SelectorOp } from "./selector";
import { PortMatcher } from "./ports";

export class Attribution {
  constructor(
    /** The policy as the module names it: `namespace/name`, or the name of a cluster-scoped policy. */
    public policy: string,
    /** The rule: its name when the API has one, else `ingress rule N` / `egress rule N`; "" when none. */
    public rule: string = "",
    /** The peer clause that matched, e.g. `namespaceSelector team=frontend + podSelector app=web`; "" for none. */
    public peer: string = "",
    /** The port clause that matched, e.g. `http`, `TCP/8080`; "" for none. */
    public port: string = "",
  ) {}

  toJSON(): string {
    return "{\"policy\":" + quote(this.policy) + ",\"rule\":" + quote(this.rule)
      + ",\"peer\":" + quote(this.peer) + ",\"port\":" + quote(this.port) + "}";
  }
}

/**
 * Where the last matching rule matched, by the index of its peer and port
 * entries (-1: the rule has no such list): set by a rule's `matches`, read
 * right after it, so deciding allocates nothing.
 */
export class MatchedAt {
  peer: i32 = -1;
  port: i32 = -1;
  /** Records a match; returns true so `matches` can `return matchedAt.set(i, port)`. */
  set(peer: i32, port: i32): bool {
    this.peer = peer;
    this.port = port;
    return true;
  }
}
export const matchedAt = new MatchedAt();

/** A JSON string literal. */
export function quote(s: string): string {
  let out = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c < 0x20) out += "\\u" + (c + 0x10000).toString(16).slice(1);
    else out += String.fromCharCode(c);
  }
  return out + "\"";
}

/**
 * A rule code packing which rule of a policy matched and which of its peers
 * and ports: bit 31 ingress, bits 0..11 rule index + 1, bits 12..21 peer
 * index + 1 (0: the rule has no peer list), bits 22..30 port index + 1 (0:
 * the rule has no port list). Indices past the field's width are stored as
 * its largest value, which attribution reports as unknown. Never 0.
 */
export function packRule(ingress: bool, rule: i32, peer: i32, port: i32): u32 {
  return (ingress ? 0x80000000 : 0) | <u32>min(rule + 1, 0xfff) | (<u32>min(peer + 1, 0x3ff) << 12) | (<u32>min(port + 1, 0x1ff) << 22);
}
export function ruleIsIngress(code: u32): bool { return (code & 0x80000000) != 0; }
/** The rule index, or -1 when the code names none. */
export function ruleIndex(code: u32): i32 { return <i32>(code & 0xfff) - 1; }
/** The peer index, or -1 for a rule without a peer list. */
export function rulePeer(code: u32): i32 { return <i32>((code >> 12) & 0x3ff) - 1; }
/** The port index, or -1 for a rule without a port list. */
export function rulePort(code: u32): i32 { return <i32>((code >> 22) & 0x1ff) - 1; }

/** `team=frontend,tier in (a,b)`; `{}` selects everything and reads `all`. */
export function describeSelector(s: LabelSelector): string {
  if (s.error != null) return "(invalid)";
  let out = "";
  for (let i = 0; i < s.keys.length; i++) out += (out.length > 0 ? "," : "") + s.keys[i] + "=" + s.values[i];
  for (let i = 0; i < s.requirements.length; i++) {
    const r = s.requirements[i];
    let text = r.key;
    if (r.op == SelectorOp.Exists) text = r.key;
    else if (r.op == SelectorOp.DoesNotExist) text = "!" + r.key;
    else text = r.key + (r.op == SelectorOp.In ? " in (" : " notin (") + r.values.join(",") + ")";
    out += (out.length > 0 ? "," : "") + text;
  }
  return out.length > 0 ? out : "all";
}

/** A port clause as attribution names it: the name of a named port, else `TCP/80`, `TCP/8000-8080`, `UDP`. */
export function describePort(m: PortMatcher): string {
  const name = m.name;
  return name != null ? name : m.toString();
}
