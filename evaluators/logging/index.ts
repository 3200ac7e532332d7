// The verbose-mode first stage: logs each packet it is shown and answers Next,
// like kube-network-policies' logging evaluator at -v=2. Logging goes through
// the host's rate-limited kwp.log import, so it can never slow the packet
// path by more than the limit allows.
import { Evaluator, Decision, Verdict, PodInfo, register, log } from "../../sdk/index";

function endpoint(pod: PodInfo | null, addr: usize, family: u8): string {
  if (pod != null) return pod.namespace + "/" + pod.name;
  if (family == 4) {
    return load<u8>(addr).toString() + "." + load<u8>(addr + 1).toString() + "." + load<u8>(addr + 2).toString() + "." + load<u8>(addr + 3).toString();
  }
  let s = "";
  for (let i: usize = 0; i < 16; i += 2) {
    if (i > 0) s += ":";
    s += ((<u32>load<u8>(addr + i) << 8) | <u32>load<u8>(addr + i + 1)).toString(16);
  }
  return s;
}

class LoggingEvaluator extends Evaluator {
  decide(d: Decision): Verdict {
    log.info((d.isEgress ? "egress " : "ingress ") +
      endpoint(d.srcPod, d.srcAddr, d.family) + ":" + d.srcPort.toString() + " -> " +
      endpoint(d.dstPod, d.dstAddr, d.family) + ":" + d.dstPort.toString() + " proto " + d.protocol.toString());
    return Verdict.Next;
  }
}

register(new LoggingEvaluator());
export * from "../../sdk/exports";
