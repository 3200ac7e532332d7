// A networking.k8s.io/v1 NetworkPolicy compiled once per upsert into the
// structures decide walks; the JSON DOM is dropped afterwards. Anything
// invalid compiles to "matches nothing" and is logged, so a policy the module
// cannot understand never allows more than its valid parts do. Part of the
// SDK so evaluators that extend NetworkPolicy (multicluster) share one copy.

import {
  JValue, JKind, LabelSelector, IPBlock, cidrError, PortMatcher, portError, PodInfo, log,
  describeSelector, describePort,
} from "../index";
import { matchedAt } from "../attribution";
export { matchedAt } from "../attribution";
import { intern } from "../intern";
import { selectorMatches } from "../selector-memo";

// Shared empty lists and the `{}` selector: a field initializer that
// allocates costs an object per policy, rule and peer, 100,000 times over.
const NO_PEERS = new StaticArray<Peer>(0);
const NO_PORTS = new StaticArray<PortMatcher>(0);
const NO_RULES = new StaticArray<Rule>(0);
const EVERYTHING = LabelSelector.everything();

export const PEER_PODS: u8 = 0;        // podSelector only: pods of the policy's own namespace
export const PEER_NAMESPACES: u8 = 1;  // namespaceSelector, optionally ANDed with podSelector
export const PEER_IPBLOCK: u8 = 2;
export const PEER_NOTHING: u8 = 3;     // invalid or empty peer
/** Rule.peerIndex: no peer entry matches. */
export const NO_PEER_MATCH: i32 = -2;

export class Peer {
  kind: u8 = PEER_NOTHING;
  podSelector: LabelSelector | null = null;
  namespaceSelector: LabelSelector | null = null;
  ipBlock: IPBlock | null = null;

  /**
   * Whether the far end matches. `pod` is the far end's PodInfo (null when the
   * address is not a known pod), `family`/`addr` its address from the packet.
   * Host-networked pods answer to ipBlocks only: their address is the node's,
   * and pod selectors describe pod-network identities.
   */
  matches(policyNamespace: string, pod: PodInfo | null, family: u8, addr: usize): bool {
    const kind = this.kind;
    if (kind == PEER_IPBLOCK) return this.ipBlock!.contains(family, addr);
    if (pod == null || pod.hostNetwork) return false;
    if (kind == PEER_PODS) return pod.namespace == policyNamespace && selectorMatches(this.podSelector!, pod.labels);
    if (kind == PEER_NAMESPACES) {
      if (!selectorMatches(this.namespaceSelector!, pod.namespaceLabels)) return false;
      const ps = this.podSelector;
      return ps == null || selectorMatches(ps, pod.labels);
    }
    return false;
  }

  /** The peer clause as attribution names it: `namespaceSelector team=frontend + podSelector app=web`. */
  describe(): string {
    const kind = this.kind;
    if (kind == PEER_IPBLOCK) {
      const b = this.ipBlock!;
      let text = "ipBlock " + b.cidr.text;
      for (let i = 0; i < b.except.length; i++) text += (i == 0 ? " except " : ",") + b.except[i].text;
      return text;
    }
    if (kind == PEER_PODS) return "podSelector " + describeSelector(this.podSelector!);
    if (kind == PEER_NAMESPACES) {
      const ps = this.podSelector;
      return "namespaceSelector " + describeSelector(this.namespaceSelector!) + (ps != null ? " + podSelector " + describeSelector(ps) : "");
    }
    return "(an invalid peer)";
  }
}


export class Rule {
  /** Empty: every peer. */
  peers: StaticArray<Peer> = NO_PEERS;
  /** Empty: every port and every protocol. */
  ports: StaticArray<PortMatcher> = NO_PORTS;
  /** A rule whose ports were all invalid: it must not fall back to "every port". */
  portsInvalid: bool = false;

  /** On a match, `matchedAt` says which peer and port entry matched (-1: the rule has no such list). */
  matches(policyNamespace: string, peer: PodInfo | null, family: u8, peerAddr: usize,
          protocol: u8, dstPort: u16, dstPod: PodInfo | null): bool {
    if (this.portsInvalid) return false;
    const ports = this.ports;
    let port = -1;
    if (ports.length > 0) {
      for (let i = 0, n = ports.length; i < n; i++) {
        if (unchecked(ports[i]).matches(protocol, dstPort, dstPod)) { port = i; break; }
      }
      if (port < 0) return false;
    }
    const at = this.peerIndex(policyNamespace, peer, family, peerAddr);
    return at != NO_PEER_MATCH && matchedAt.set(at, port);
  }

  /**
   * The peer half of `matches`, for a caller that already knows the port
   * matched (sdk/port-index.ts): the index of the first peer entry that
   * matches, -1 for a rule without a peer list, NO_PEER_MATCH when none does.
   */
  peerIndex(policyNamespace: string, peer: PodInfo | null, family: u8, peerAddr: usize): i32 {
    const peers = this.peers;
    const n = peers.length;
    if (n == 0) return -1;
    for (let i = 0; i < n; i++) {
      if (unchecked(peers[i]).matches(policyNamespace, peer, family, peerAddr)) return i;
    }
    return NO_PEER_MATCH;
  }

  /** The peer entry `peer` as text: "any peer" for a rule without a peer list. */
  describePeer(peer: i32): string {
    if (peer < 0) return this.peers.length == 0 ? "any peer" : "";
    return peer < this.peers.length ? this.peers[peer].describe() : "";
  }

  /** The port entry `port` as text: "any port" for a rule without a port list. */
  describePort(port: i32): string {
    if (port < 0) return this.ports.length == 0 ? "any port" : "";
    return port < this.ports.length ? describePort(this.ports[port]) : "";
  }
}

export class Policy {
  /** Shared with every policy and pod of the namespace. */
  namespace: string = "";
  name: string = "";
  /** Reason code of an Accept by this policy version; unique while the module runs. */
  serial: u32 = 0;
  podSelector: LabelSelector = EVERYTHING;
  isolatesIngress: bool = false;
  isolatesEgress: bool = false;
  ingress: StaticArray<Rule> = NO_RULES;
  egress: StaticArray<Rule> = NO_RULES;
  /** Bits an extending evaluator sets in its `policyCompiled` hook (e.g. a peer scope); the base never reads them. */
  flags: u32 = 0;

  /** "<namespace>/<name>", for explanations and logs; built when asked rather than kept for every policy. */
  get key(): string { return this.namespace + "/" + this.name; }

  /** Whether this policy makes `pod` isolated at all (before looking at direction). */
  selects(pod: PodInfo): bool {
    return !pod.hostNetwork && pod.namespace == this.namespace && this.podSelector.matches(pod.labels);
  }
}

/** The namespace/name of a NetworkPolicy object, or null when metadata lacks them. */
export function policyKey(obj: JValue): string | null {
  const meta = obj.get("metadata");
  if (meta == null) return null;
  const ns = meta.str("namespace");
  const name = meta.str("name");
  if (ns.length == 0 || name.length == 0) return null;
  return ns + "/" + name;
}

function compilePeer(v: JValue, at: string): Peer {
  const p = new Peer();
  if (v.kind != JKind.Object) {
    log.warn(at + " must be an object; the peer matches nothing");
    return p;
  }
  const ip = v.get("ipBlock");
  const ps = v.get("podSelector");
  const ns = v.get("namespaceSelector");
  const hasIP = ip != null && ip.kind != JKind.Null;
  const hasPods = ps != null && ps.kind != JKind.Null;
  const hasNs = ns != null && ns.kind != JKind.Null;
  if (hasIP) {
    if (hasPods || hasNs) {
      log.warn(at + ": ipBlock cannot be combined with podSelector or namespaceSelector; the peer matches nothing");
      return p;
    }
    const block = IPBlock.parse(ip!);
    if (block == null) {
      log.warn(at + "." + cidrError + "; the peer matches nothing");
      return p;
    }
    p.kind = PEER_IPBLOCK;
    p.ipBlock = block;
    return p;
  }
  if (hasNs) {
    p.kind = PEER_NAMESPACES;
    p.namespaceSelector = LabelSelector.parse(ns, at + ".namespaceSelector");
    if (hasPods) p.podSelector = LabelSelector.parse(ps, at + ".podSelector");
    return p;
  }
  if (hasPods) {
    p.kind = PEER_PODS;
    p.podSelector = LabelSelector.parse(ps, at + ".podSelector");
    return p;
  }
  log.warn(at + " names no podSelector, namespaceSelector or ipBlock; the peer matches nothing");
  return p;
}

function compileRule(v: JValue, peersKey: string, at: string): Rule {
  const r = new Rule();
  if (v.kind != JKind.Object) {
    log.warn(at + " must be an object; the rule matches nothing");
    r.portsInvalid = true;
    return r;
  }
  const peers = v.get(peersKey);
  if (peers != null && peers.kind != JKind.Null) {
    const list = peers.array;
    if (list.length > 0) {
      const out = new StaticArray<Peer>(list.length);
      for (let i = 0; i < list.length; i++) out[i] = compilePeer(list[i], at + "." + peersKey + "[" + i.toString() + "]");
      r.peers = out;
    }
  }
  const ports = v.get("ports");
  if (ports != null && ports.kind != JKind.Null) {
    const list = ports.array;
    const out = new Array<PortMatcher>(0);
    for (let i = 0; i < list.length; i++) {
      const m = PortMatcher.parseNetworkPolicyPort(list[i]);
      if (m == null) log.warn(at + ".ports[" + i.toString() + "]: " + portError + "; the entry matches nothing");
      else out.push(m);
    }
    if (list.length > 0 && out.length == 0) r.portsInvalid = true;
    if (out.length > 0) {
      const fixed = new StaticArray<PortMatcher>(out.length);
      for (let i = 0; i < out.length; i++) fixed[i] = out[i];
      r.ports = fixed;
    }
  }
  return r;
}

function compileRules(spec: JValue, field: string, peersKey: string, at: string): StaticArray<Rule> {
  const v = spec.get(field);
  if (v == null || v.kind == JKind.Null) return NO_RULES;
  const list = v.array;
  if (list.length == 0) return NO_RULES;
  const out = new StaticArray<Rule>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = compileRule(list[i], peersKey, at + ".spec." + field + "[" + i.toString() + "]");
  return out;
}

/** Compiles a NetworkPolicy object; null (after a warning) when it has no namespace/name. */
export function compilePolicy(obj: JValue, serial: u32): Policy | null {
  const key = policyKey(obj);
  if (key == null) {
    log.warn("NetworkPolicy without metadata.namespace or metadata.name ignored");
    return null;
  }
  const at = "NetworkPolicy " + key!;
  const p = new Policy();
  const meta = obj.get("metadata")!;
  p.namespace = intern(meta.str("namespace"));
  p.name = meta.str("name");
  p.serial = serial;
  const specOrNull = obj.get("spec");
  const spec = specOrNull != null ? specOrNull : new JValue();

  p.podSelector = LabelSelector.parse(spec.get("podSelector"), at + " spec.podSelector");

  // The API server defaults policyTypes to Ingress, plus Egress when the
  // spec has egress rules; objects read back from it always carry the field,
  // but manifests given to `kwp eval` may not.
  const types = spec.get("policyTypes");
  const typeList = types != null ? types.array : new Array<JValue>(0);
  if (typeList.length == 0) {
    p.isolatesIngress = true;
    const eg = spec.get("egress");
    p.isolatesEgress = eg != null && eg.array.length > 0;
  } else {
    for (let i = 0; i < typeList.length; i++) {
      const t = typeList[i].kind == JKind.String ? typeList[i].s : "";
      if (t == "Ingress") p.isolatesIngress = true;
      else if (t == "Egress") p.isolatesEgress = true;
      else log.warn(at + " spec.policyTypes[" + i.toString() + "] is not Ingress or Egress; ignored");
    }
  }
  // Rules of a direction the policy does not isolate are ignored, as upstream.
  if (p.isolatesIngress) p.ingress = compileRules(spec, "ingress", "from", at);
  if (p.isolatesEgress) p.egress = compileRules(spec, "egress", "to", at);
  return p;
}
