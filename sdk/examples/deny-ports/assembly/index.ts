// deny-ports: the smallest useful evaluator. The stage config names ports
// that no pod may use, in either direction, anywhere in the cluster:
//   config: {"ports": [23, 3389], "protocols": ["TCP"]}
// Everything else is left to the later stages (Verdict.Next).
import { Evaluator, Decision, Verdict, JValue, JKind, register, protocolNumber, protocolName } from "../../../index"; // your project: "kube-wasm-policies/sdk"

class DenyPorts extends Evaluator {
  // protocol << 16 | port, so one lookup answers a packet without allocating.
  private denied: Set<u32> = new Set<u32>();

  configure(config: JValue): string | null {
    const ports = config.get("ports");
    if (ports == null || ports.kind != JKind.Array || ports.array.length == 0) {
      return "config.ports must be a non-empty list of port numbers, e.g. {\"ports\": [23, 3389]}";
    }
    const protocols = new Array<u8>(0);
    const protoList = config.get("protocols");
    if (protoList == null) protocols.push(protocolNumber("TCP"));
    else {
      if (protoList.kind != JKind.Array || protoList.array.length == 0) return "config.protocols must be a non-empty list of TCP, UDP or SCTP";
      for (let i = 0; i < protoList.array.length; i++) {
        const p = protoList.array[i];
        const n = p.kind == JKind.String ? protocolNumber(p.s) : <u8>0;
        if (n == 0) return "config.protocols[" + i.toString() + "] must be TCP, UDP or SCTP";
        protocols.push(n);
      }
    }
    const denied = new Set<u32>();
    for (let i = 0; i < ports.array.length; i++) {
      const p = ports.array[i];
      if (p.kind != JKind.Number || p.n != Math.floor(p.n) || p.n < 1 || p.n > 65535) {
        return "config.ports[" + i.toString() + "] must be a port number from 1 to 65535";
      }
      for (let j = 0; j < protocols.length; j++) denied.add((<u32>protocols[j] << 16) | <u32>p.n);
    }
    this.denied = denied;
    return null;
  }

  decide(d: Decision): Verdict {
    const key = (<u32>d.protocol << 16) | <u32>d.dstPort;
    if (!this.denied.has(key)) return Verdict.Next;
    // The reason is the key itself: explain() turns it into text only when asked.
    d.reason = key;
    return Verdict.Deny;
  }

  explain(reason: u32): string {
    return protocolName(<u8>(reason >> 16)) + "/" + (reason & 0xffff).toString() + " is denied cluster-wide";
  }
}

register(new DenyPorts());
export * from "../../../exports"; // your project: "kube-wasm-policies/sdk/exports"
