// Destination-port matching for policy rules: one port, an inclusive range,
// or a container port named on the destination pod, each for one protocol.

import { JValue, JKind } from "./json";
import { PodInfo, PROTO_TCP, PROTO_UDP, PROTO_SCTP, internKey } from "./podinfo";

/** A PortMatcher protocol that accepts the packet's protocol (e.g. AdminNetworkPolicy namedPort). */
export const PROTO_ANY: u8 = 0;

/** Why the last PortMatcher.parseNetworkPolicyPort returned null. */
export let portError: string = "";

/** "TCP" / "UDP" / "SCTP" to the IANA number; 0 for anything else. */
export function protocolNumber(name: string): u8 {
  if (name == "TCP") return PROTO_TCP;
  if (name == "UDP") return PROTO_UDP;
  if (name == "SCTP") return PROTO_SCTP;
  return 0;
}

export function protocolName(proto: u8): string {
  if (proto == PROTO_TCP) return "TCP";
  if (proto == PROTO_UDP) return "UDP";
  if (proto == PROTO_SCTP) return "SCTP";
  if (proto == PROTO_ANY) return "any";
  return proto.toString();
}

export class PortMatcher {
  /** IANA protocol number, or PROTO_ANY. */
  protocol: u8 = PROTO_TCP;
  /** First port of the range; 0 with no name = every port. */
  port: i32 = 0;
  /** Last port of the range, inclusive (== port for a single port). */
  endPort: i32 = 0;
  /** A container port name, resolved on the destination pod; null for numeric ports. */
  name: string | null = null;

  static anyPort(protocol: u8): PortMatcher {
    const m = new PortMatcher();
    m.protocol = protocol;
    m.port = 0;
    m.endPort = 65535;
    return m;
  }

  static single(protocol: u8, port: i32): PortMatcher { return PortMatcher.range(protocol, port, port); }

  static range(protocol: u8, start: i32, end: i32): PortMatcher {
    const m = new PortMatcher();
    m.protocol = protocol;
    m.port = start;
    m.endPort = end;
    return m;
  }

  static named(protocol: u8, name: string): PortMatcher {
    const m = new PortMatcher();
    m.protocol = protocol;
    m.name = internKey(name);
    return m;
  }

  /**
   * Compiles a networking.k8s.io/v1 NetworkPolicyPort: protocol defaults to
   * TCP, a missing port means every port of the protocol, a string port is a
   * container port name, endPort (only with a numeric port) closes an
   * inclusive range. Null and portError on bad input.
   */
  static parseNetworkPolicyPort(v: JValue): PortMatcher | null {
    if (v.kind != JKind.Object) { portError = "a port entry must be an object"; return null; }
    let protocol = PROTO_TCP;
    const pv = v.get("protocol");
    if (pv != null && pv.kind != JKind.Null) {
      protocol = pv.kind == JKind.String ? protocolNumber(pv.s) : 0;
      if (protocol == 0) { portError = "protocol must be TCP, UDP or SCTP"; return null; }
    }
    const port = v.get("port");
    const end = v.get("endPort");
    const hasEnd = end != null && end.kind != JKind.Null;
    if (port == null || port.kind == JKind.Null) {
      if (hasEnd) { portError = "endPort needs a numeric port"; return null; }
      return PortMatcher.anyPort(protocol);
    }
    if (port.kind == JKind.String) {
      if (hasEnd) { portError = "endPort cannot be used with the named port \"" + port.s + "\""; return null; }
      if (port.s.length == 0) { portError = "port must not be an empty string"; return null; }
      return PortMatcher.named(protocol, port.s);
    }
    if (port.kind != JKind.Number || port.n != Math.floor(port.n) || port.n < 1 || port.n > 65535) {
      portError = "port must be a number 1-65535 or a container port name";
      return null;
    }
    const start = <i32>port.n;
    if (!hasEnd) return PortMatcher.single(protocol, start);
    if (end!.kind != JKind.Number || end!.n != Math.floor(end!.n) || end!.n < start || end!.n > 65535) {
      portError = "endPort must be a number from port (" + start.toString() + ") to 65535";
      return null;
    }
    return PortMatcher.range(protocol, start, <i32>end!.n);
  }

  /**
   * Whether a packet to `port` over `protocol` matches. A named port needs the
   * destination pod (`dst`, null when it is not a known pod: then a name never
   * matches) to expose a container port of that name with the packet's
   * protocol. No allocation.
   */
  matches(protocol: u8, port: u16, dst: PodInfo | null): bool {
    if (this.protocol != PROTO_ANY && this.protocol != protocol) return false;
    const name = this.name;
    if (name != null) {
      if (dst == null) return false;
      // Every container port of that name and protocol counts, not just the
      // first: names are only unique per pod when the API server validated it.
      const ports = dst.ports;
      for (let i = 0, n = ports.length; i < n; i++) {
        const c = unchecked(ports[i]);
        if (c.port == port && c.protocol == protocol && c.name == name) return true;
      }
      return false;
    }
    const p = <i32>port;
    return p >= this.port && p <= this.endPort;
  }

  toString(): string {
    const proto = protocolName(this.protocol);
    const name = this.name;
    if (name != null) return proto + "/" + name;
    if (this.port == 0 && this.endPort == 65535) return proto;
    if (this.port == this.endPort) return proto + "/" + this.port.toString();
    return proto + "/" + this.port.toString() + "-" + this.endPort.toString();
  }
}

/** True when any matcher matches; an empty list matches every port and protocol. */
export function portsMatch(list: StaticArray<PortMatcher>, protocol: u8, port: u16, dst: PodInfo | null): bool {
  const n = list.length;
  if (n == 0) return true;
  for (let i = 0; i < n; i++) if (unchecked(list[i]).matches(protocol, port, dst)) return true;
  return false;
}
