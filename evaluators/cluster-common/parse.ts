// Turns the JSON of a cluster-wide policy into the compiled Policy. The three
// kinds share their shape (subject, ordered ingress/egress rules, peers,
// ports); a Dialect carries what differs between them. Anything that cannot
// be understood is logged once, naming the object and the field, and fails
// closed as upstream asks (see Rule.failClosed).

import { JValue, JKind, log } from "../../sdk/index";
import { LabelSelector } from "../../sdk/selector";
import { CIDR, cidrError } from "../../sdk/cidr";
import { PortMatcher, PROTO_ANY, protocolNumber } from "../../sdk/ports";
import { PROTO_TCP, PROTO_UDP, PROTO_SCTP } from "../../sdk/podinfo";
import { Action, Peer, PeerKind, Policy, Rule } from "./policy";
import { DomainPattern } from "./domain-name";

export class Dialect {
  /** For messages: "ClusterNetworkPolicy". */
  kindName: string = "";
  /** The word for accepting traffic: "Accept" (v1alpha2) or "Allow" (v1alpha1). */
  acceptWord: string = "Accept";
  /** BaselineAdminNetworkPolicy has no Pass. */
  passAllowed: bool = true;
  /** BaselineAdminNetworkPolicy has no domainNames peer. */
  domainNamesAllowed: bool = true;
  /** v1alpha2 writes ports as `protocols` (tcp/udp/sctp/destinationNamedPort); v1alpha1 as `ports`. */
  protocolsField: bool = false;
}

let ruleCounter: u32 = 0;

/** Reason codes are rule ids; ids only grow, so a code never names a different rule later. */
function nextRuleId(): u32 {
  ruleCounter++;
  return ruleCounter;
}

function isSet(v: JValue | null): bool { return v != null && v.kind != JKind.Null; }

function isInteger(v: JValue | null): bool { return v != null && v.kind == JKind.Number && v.n == Math.floor(v.n); }

function portNumberValid(v: JValue | null): bool { return isInteger(v) && v!.n >= 1 && v!.n <= 65535; }

/** Collects the first problem of a rule or subject; the rest is still read so every problem is logged. */
class Problems {
  first: string = "";
  count: i32 = 0;
  /** `consequence` ends every logged line: what the evaluator does about the problem. */
  constructor(public where: string, public consequence: string = "the rule fails closed") {}
  add(field: string, msg: string): void {
    log.warn(this.where + ": " + field + ": " + msg + "; " + this.consequence);
    this.count++;
    if (this.first.length == 0) this.first = field + ": " + msg;
  }
  get any(): bool { return this.first.length > 0; }
}

const SELECTOR_FIELDS: string[] = ["matchLabels", "matchExpressions"];
const NAMESPACED_POD_FIELDS: string[] = ["namespaceSelector", "podSelector"];

/**
 * Logs every member of `v` outside `allowed`. A field this version does not
 * know may narrow what the object selects (an older or newer API shape), so
 * ignoring it could widen an Accept: the caller fails closed instead.
 */
function unknownFields(v: JValue, allowed: string[], field: string, p: Problems): bool {
  const keys = v.objectKeys;
  let found = false;
  for (let i = 0; i < keys.length; i++) {
    if (v.items![i].kind == JKind.Null || knownKey(keys[i], allowed)) continue;
    p.add(field, "unknown field \"" + keys[i] + "\" (expected " + allowed.join(", ") + ")");
    found = true;
  }
  return found;
}

/** A LabelSelector field; an invalid selector, or one with fields it does not know, is unusable. */
function selector(v: JValue | null, field: string, p: Problems): LabelSelector {
  if (v != null && v.kind == JKind.Object && unknownFields(v, SELECTOR_FIELDS, field, p)) return LabelSelector.nothing("unknown fields");
  const s = LabelSelector.compile(v);
  if (!s.valid) p.add(field, s.error!);
  return s;
}

function knownKey(key: string, allowed: string[]): bool {
  for (let i = 0; i < allowed.length; i++) if (allowed[i] == key) return true;
  return false;
}

/** The one member set in an object that must set exactly one of `allowed`; "" after logging a problem. */
function onlyMember(v: JValue, allowed: string[], field: string, p: Problems): string {
  const keys = v.objectKeys;
  let found = "";
  let count = 0;
  for (let i = 0; i < keys.length; i++) {
    if (v.items![i].kind == JKind.Null) continue;
    if (!knownKey(keys[i], allowed)) {
      p.add(field, "unknown field \"" + keys[i] + "\" (expected exactly one of " + allowed.join(", ") + ")");
      return "";
    }
    found = keys[i];
    count++;
  }
  if (count != 1) {
    p.add(field, (count == 0 ? "sets none" : "sets more than one") + " of " + allowed.join(", "));
    return "";
  }
  return found;
}

const INGRESS_RULE_FIELDS: string[] = ["name", "action", "from", "ports", "protocols"];
const EGRESS_RULE_FIELDS: string[] = ["name", "action", "to", "ports", "protocols"];
const INGRESS_PEERS: string[] = ["namespaces", "pods"];
const EGRESS_PEERS: string[] = ["namespaces", "pods", "nodes", "networks", "domainNames"];
const EGRESS_PEERS_NO_DOMAINS: string[] = ["namespaces", "pods", "nodes", "networks"];

function parsePeer(v: JValue, egress: bool, d: Dialect, field: string, p: Problems): Peer | null {
  if (v.kind != JKind.Object) { p.add(field, "a peer must be an object"); return null; }
  const allowed = !egress ? INGRESS_PEERS : d.domainNamesAllowed ? EGRESS_PEERS : EGRESS_PEERS_NO_DOMAINS;
  const which = onlyMember(v, allowed, field, p);
  if (which.length == 0) return null;
  const body = v.get(which)!;
  const peer = new Peer();
  const before = p.count;
  if (which == "namespaces") {
    peer.kind = PeerKind.Namespaces;
    peer.namespaceSelector = selector(body, field + ".namespaces", p);
  } else if (which == "pods") {
    peer.kind = PeerKind.Pods;
    if (body.kind != JKind.Object) { p.add(field + ".pods", "must be an object with namespaceSelector and podSelector"); return null; }
    if (unknownFields(body, NAMESPACED_POD_FIELDS, field + ".pods", p)) return null;
    peer.namespaceSelector = selector(body.get("namespaceSelector"), field + ".pods.namespaceSelector", p);
    peer.podSelector = selector(body.get("podSelector"), field + ".pods.podSelector", p);
  } else if (which == "nodes") {
    peer.kind = PeerKind.Nodes;
    peer.nodeSelector = selector(body, field + ".nodes", p);
  } else if (which == "networks") {
    peer.kind = PeerKind.Networks;
    const list = body.array;
    if (body.kind != JKind.Array || list.length == 0) { p.add(field + ".networks", "must be a non-empty list of CIDRs"); return null; }
    const nets = new StaticArray<CIDR>(list.length);
    for (let i = 0; i < list.length; i++) {
      const c = list[i].kind == JKind.String ? CIDR.parse(list[i].s) : null;
      if (c == null) {
        p.add(field + ".networks[" + i.toString() + "]", (list[i].kind == JKind.String ? cidrError : "must be a string"));
        return null;
      }
      nets[i] = c;
    }
    peer.networks = nets;
  } else {
    peer.kind = PeerKind.DomainNames;
    const list = body.array;
    if (body.kind != JKind.Array || list.length == 0) { p.add(field + ".domainNames", "must be a non-empty list of domain names"); return null; }
    const doms = new StaticArray<DomainPattern>(list.length);
    for (let i = 0; i < list.length; i++) {
      const dp = list[i].kind == JKind.String ? new DomainPattern(list[i].s) : null;
      if (dp == null || !dp.valid) {
        p.add(field + ".domainNames[" + i.toString() + "]", "must be a domain name, optionally starting with \"*.\"");
        return null;
      }
      doms[i] = dp;
    }
    peer.domains = doms;
  }
  return p.count > before ? null : peer;
}

const CNP_PROTOCOLS: string[] = ["tcp", "udp", "sctp", "destinationNamedPort"];
const ANP_PORTS: string[] = ["portNumber", "portRange", "namedPort"];

/** v1alpha2 `protocols[]` entry. */
function parseProtocol(v: JValue, field: string, p: Problems): PortMatcher | null {
  if (v.kind != JKind.Object) { p.add(field, "must be an object"); return null; }
  const which = onlyMember(v, CNP_PROTOCOLS, field, p);
  if (which.length == 0) return null;
  const body = v.get(which)!;
  if (which == "destinationNamedPort") {
    if (body.kind != JKind.String || body.s.length == 0) { p.add(field + ".destinationNamedPort", "must be a container port name"); return null; }
    // The named container port carries its own protocol.
    return PortMatcher.named(PROTO_ANY, body.s);
  }
  const proto: u8 = which == "tcp" ? PROTO_TCP : which == "udp" ? PROTO_UDP : PROTO_SCTP;
  const at = field + "." + which;
  if (body.kind != JKind.Object) { p.add(at, "must be an object"); return null; }
  if (unknownFields(body, ["destinationPort"], at, p)) return null;
  const dp = body.get("destinationPort");
  if (!isSet(dp)) return PortMatcher.anyPort(proto);
  if (dp!.kind != JKind.Object) { p.add(at + ".destinationPort", "must be an object with number or range"); return null; }
  const kind = onlyMember(dp!, ["number", "range"], at + ".destinationPort", p);
  if (kind.length == 0) return null;
  if (kind == "number") {
    const n = dp!.get("number");
    if (!portNumberValid(n)) { p.add(at + ".destinationPort.number", "must be a port number 1-65535"); return null; }
    return PortMatcher.single(proto, <i32>n!.n);
  }
  return parseRange(dp!.get("range")!, proto, at + ".destinationPort.range", p);
}

function parseRange(r: JValue, proto: u8, field: string, p: Problems, allowed: string[] = ["start", "end"]): PortMatcher | null {
  if (r.kind == JKind.Object && unknownFields(r, allowed, field, p)) return null;
  const start = r.get("start");
  const end = r.get("end");
  if (!portNumberValid(start) || !portNumberValid(end) || end!.n < start!.n) {
    p.add(field, "start and end must be port numbers 1-65535 with start <= end");
    return null;
  }
  return PortMatcher.range(proto, <i32>start!.n, <i32>end!.n);
}

function parseProtocolName(v: JValue, field: string, p: Problems): u8 {
  const pv = v.get("protocol");
  if (!isSet(pv)) return PROTO_TCP;
  const n = pv!.kind == JKind.String ? protocolNumber(pv!.s) : <u8>0;
  if (n == 0) p.add(field + ".protocol", "must be TCP, UDP or SCTP");
  return n;
}

/** v1alpha1 `ports[]` entry (also accepted on early v1alpha2 objects). */
function parsePort(v: JValue, field: string, p: Problems): PortMatcher | null {
  if (v.kind != JKind.Object) { p.add(field, "must be an object"); return null; }
  const which = onlyMember(v, ANP_PORTS, field, p);
  if (which.length == 0) return null;
  const body = v.get(which)!;
  const at = field + "." + which;
  if (which == "namedPort") {
    if (body.kind != JKind.String || body.s.length == 0) { p.add(at, "must be a container port name"); return null; }
    return PortMatcher.named(PROTO_ANY, body.s);
  }
  if (body.kind != JKind.Object) { p.add(at, "must be an object"); return null; }
  const proto = parseProtocolName(body, at, p);
  if (proto == 0) return null;
  if (which == "portNumber") {
    if (unknownFields(body, ["protocol", "port"], at, p)) return null;
    const n = body.get("port");
    if (!portNumberValid(n)) { p.add(at + ".port", "must be a port number 1-65535"); return null; }
    return PortMatcher.single(proto, <i32>n!.n);
  }
  return parseRange(body, proto, at, p, ["protocol", "start", "end"]);
}

function parsePorts(rule: JValue, d: Dialect, field: string, p: Problems): StaticArray<PortMatcher> {
  const protocols = rule.get("protocols");
  const ports = rule.get("ports");
  const none = new StaticArray<PortMatcher>(0);
  if (isSet(protocols) && isSet(ports)) { p.add(field, "sets both protocols and ports"); return none; }
  let list: JValue | null = null;
  let useProtocols = false;
  let name = "";
  if (isSet(protocols) && d.protocolsField) { list = protocols; useProtocols = true; name = "protocols"; }
  else if (isSet(ports)) { list = ports; name = "ports"; }
  else if (isSet(protocols)) { p.add(field + ".protocols", "is not a field of " + d.kindName + " (use ports)"); return none; }
  if (list == null) return none;
  if (list.kind != JKind.Array || list.array.length == 0) { p.add(field + "." + name, "must be a non-empty list"); return none; }
  const items = list.array;
  const out = new StaticArray<PortMatcher>(items.length);
  for (let i = 0; i < items.length; i++) {
    const at = field + "." + name + "[" + i.toString() + "]";
    const m = useProtocols ? parseProtocol(items[i], at, p) : parsePort(items[i], at, p);
    if (m == null) return none;
    out[i] = m;
  }
  return out;
}

function parseRule(v: JValue, egress: bool, index: i32, d: Dialect, policyName: string, where: string): Rule {
  const dir = egress ? "egress" : "ingress";
  const field = "spec." + dir + "[" + index.toString() + "]";
  const p = new Problems(where);
  const rule = new Rule();
  rule.id = nextRuleId();
  const name = v.kind == JKind.Object ? v.str("name") : "";
  rule.ruleName = name.length > 0 ? name : dir + " rule " + index.toString();
  // Walkthroughs name an unnamed rule with its policy, as NetworkPolicy's do.
  rule.label = name.length > 0 ? name : policyName + ", " + rule.ruleName;
  if (v.kind != JKind.Object) {
    p.add(field, "a rule must be an object");
    rule.failClosed = true;
    rule.problem = p.first;
    return rule;
  }

  unknownFields(v, egress ? EGRESS_RULE_FIELDS : INGRESS_RULE_FIELDS, field, p);
  const action = v.str("action");
  if (action == d.acceptWord) rule.action = Action.Accept;
  else if (action == "Deny") rule.action = Action.Deny;
  else if (action == "Pass" && d.passAllowed) rule.action = Action.Pass;
  else {
    rule.action = Action.Deny;
    p.add(field + ".action", "\"" + action + "\" is not one of " + d.acceptWord + ", Deny" + (d.passAllowed ? ", Pass" : ""));
  }

  const peersField = egress ? "to" : "from";
  const list = v.get(peersField);
  const items = list != null ? list.array : new Array<JValue>(0);
  if (list == null || list.kind != JKind.Array || items.length == 0) {
    p.add(field + "." + peersField, "must be a non-empty list of peers");
  }
  const peers = new Array<Peer>(0);
  for (let i = 0; i < items.length; i++) {
    const peer = parsePeer(items[i], egress, d, field + "." + peersField + "[" + i.toString() + "]", p);
    if (peer != null) peers.push(peer);
  }
  rule.peers = StaticArray.fromArray<Peer>(peers);
  rule.ports = parsePorts(v, d, field, p);
  if (p.any) {
    rule.failClosed = true;
    rule.problem = p.first;
  }
  return rule;
}

function parseRules(spec: JValue, egress: bool, d: Dialect, policyName: string, where: string): StaticArray<Rule> {
  const v = spec.get(egress ? "egress" : "ingress");
  if (!isSet(v)) return new StaticArray<Rule>(0);
  if (v!.kind != JKind.Array) {
    // A rules list we cannot read must not silently become "no rules".
    log.warn(where + ": spec." + (egress ? "egress" : "ingress") + " must be a list; treating it as one rule that fails closed");
    const r = new Rule();
    r.id = nextRuleId();
    r.failClosed = true;
    r.problem = "spec." + (egress ? "egress" : "ingress") + " is not a list";
    r.ruleName = (egress ? "egress" : "ingress") + " rules";
    r.label = policyName + ", " + r.ruleName;
    const out = new StaticArray<Rule>(1);
    out[0] = r;
    return out;
  }
  const items = v!.array;
  const out = new StaticArray<Rule>(items.length);
  for (let i = 0; i < items.length; i++) out[i] = parseRule(items[i], egress, i, d, policyName, where);
  return out;
}

function parseSubject(spec: JValue, policy: Policy, where: string): void {
  const subject = spec.get("subject");
  policy.subjectValid = false;
  const p = new Problems(where, "the policy selects no pod");
  if (subject == null || subject.kind != JKind.Object) { p.add("spec.subject", "is missing"); return; }
  const which = onlyMember(subject, ["namespaces", "pods"], "spec.subject", p);
  if (which.length == 0) return;
  const body = subject.get(which)!;
  if (which == "namespaces") {
    policy.subjectNamespaces = selector(body, "spec.subject.namespaces", p);
    policy.subjectPods = null;
  } else {
    if (body.kind != JKind.Object) { p.add("spec.subject.pods", "must be an object with namespaceSelector and podSelector"); return; }
    if (unknownFields(body, NAMESPACED_POD_FIELDS, "spec.subject.pods", p)) return;
    policy.subjectNamespaces = selector(body.get("namespaceSelector"), "spec.subject.pods.namespaceSelector", p);
    policy.subjectPods = selector(body.get("podSelector"), "spec.subject.pods.podSelector", p);
  }
  policy.subjectValid = !p.any;
}

/** Compiles the spec shared by all three kinds; BaselineAdminNetworkPolicy has no priority field. */
export function parsePolicy(obj: JValue, d: Dialect, hasPriority: bool): Policy {
  const policy = new Policy();
  policy.kindName = d.kindName;
  const meta = obj.get("metadata");
  policy.name = meta != null ? meta.str("name") : "";
  const where = d.kindName + " \"" + policy.name + "\"";
  const spec = obj.get("spec");
  if (spec == null || spec.kind != JKind.Object) {
    log.warn(where + ": spec is missing; the policy selects no pod");
    policy.subjectValid = false;
    return policy;
  }
  if (hasPriority) {
    const pr = spec.get("priority");
    if (!isInteger(pr)) {
      log.warn(where + ": spec.priority must be an integer 0-1000; evaluating the policy last in its tier");
      policy.priority = 1000;
    } else if (pr!.n < 0 || pr!.n > 1000) {
      policy.priority = pr!.n < 0 ? 0 : 1000;
      log.warn(where + ": spec.priority " + pr!.n.toString() + " is outside 0-1000; using " + policy.priority.toString());
    } else policy.priority = <i32>pr!.n;
  }
  parseSubject(spec, policy, where);
  policy.ingress = parseRules(spec, false, d, policy.name, where);
  policy.egress = parseRules(spec, true, d, policy.name, where);
  return policy;
}
