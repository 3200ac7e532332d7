// The decision record (ABI.md, 64 bytes) seen through one reusable accessor:
// reading a field is a load from linear memory, and nothing on this path
// allocates.

import { PodInfo } from "./podinfo";
import { pods } from "./registry";

export const RECORD_SIZE: usize = 64;
export const OFF_DIRECTION: usize = 0;
export const OFF_FAMILY: usize = 1;
export const OFF_PROTOCOL: usize = 2;
export const OFF_FLAGS: usize = 3;
export const OFF_SRC_PORT: usize = 4;
export const OFF_DST_PORT: usize = 6;
export const OFF_ICMP_TYPE: usize = 8;
export const OFF_ICMP_CODE: usize = 9;
export const OFF_SRC_POD: usize = 12;
export const OFF_DST_POD: usize = 16;
export const OFF_SRC_ADDR: usize = 20;
export const OFF_DST_ADDR: usize = 36;
export const OFF_VERDICT: usize = 52;
export const OFF_REASON: usize = 56;
export const OFF_RULE: usize = 60;
/** kwp_decide_pair (ABI 1.4): the direction byte asking for both directions. */
export const DIRECTION_BOTH: u8 = 2;
/** kwp_decide_pair's pair area: one entry per batch record holding the ingress verdict, reason and rule code. */
export const PAIR_RESULT_SIZE: usize = 16;
export const PAIR_OFF_VERDICT: usize = 0;
export const PAIR_OFF_REASON: usize = 4;
export const PAIR_OFF_RULE: usize = 8;
/** Flags bit 0 (ABI 1.2): the source reached itself through a Service address. */
export const FLAG_SERVICE_HAIRPIN: u8 = 1;

/**
 * Next: not this evaluator's business. Pass: an explicit rule hands the packet
 * to later stages (the engine treats it exactly like Next; explanations say
 * "Pass"). Accept and Deny end the walk in this direction.
 */
export enum Verdict { Next = 0, Accept = 1, Deny = 2, Pass = 3 }
export enum Direction { Egress = 0, Ingress = 1 }

export class Decision {
  /** Address of the current record; set by the ABI layer. */
  ptr: usize = 0;

  get direction(): Direction { return <Direction>load<u8>(this.ptr + OFF_DIRECTION); }
  get isEgress(): bool { return load<u8>(this.ptr + OFF_DIRECTION) == 0; }
  get isIngress(): bool { return load<u8>(this.ptr + OFF_DIRECTION) == 1; }
  get family(): u8 { return load<u8>(this.ptr + OFF_FAMILY); }
  get protocol(): u8 { return load<u8>(this.ptr + OFF_PROTOCOL); }
  get srcPort(): u16 { return load<u16>(this.ptr + OFF_SRC_PORT); }
  get dstPort(): u16 { return load<u16>(this.ptr + OFF_DST_PORT); }
  get icmpType(): u8 { return load<u8>(this.ptr + OFF_ICMP_TYPE); }
  get icmpCode(): u8 { return load<u8>(this.ptr + OFF_ICMP_CODE); }
  /**
   * The source reached itself through a Service: the Service proxy sent the
   * connection back to the pod that opened it (so source and destination are
   * the same pod). False for a pod's traffic to its own address, which never
   * goes through a Service proxy. Always false from an ABI 1.0/1.1 host.
   */
  get isServiceHairpin(): bool { return (load<u8>(this.ptr + OFF_FLAGS) & FLAG_SERVICE_HAIRPIN) != 0; }
  get srcPodId(): u32 { return load<u32>(this.ptr + OFF_SRC_POD); }
  get dstPodId(): u32 { return load<u32>(this.ptr + OFF_DST_POD); }
  /** Address of the 16 source-address bytes (IPv4 in the first 4). */
  get srcAddr(): usize { return this.ptr + OFF_SRC_ADDR; }
  get dstAddr(): usize { return this.ptr + OFF_DST_ADDR; }

  get srcPod(): PodInfo | null { return pods.lookup(this.srcPodId); }
  get dstPod(): PodInfo | null { return pods.lookup(this.dstPodId); }

  /** The pod the policy is about: the source for egress, the destination for ingress. */
  get subject(): PodInfo | null { return this.isEgress ? this.srcPod : this.dstPod; }
  /** The other end. */
  get peer(): PodInfo | null { return this.isEgress ? this.dstPod : this.srcPod; }
  get subjectAddr(): usize { return this.isEgress ? this.srcAddr : this.dstAddr; }
  get peerAddr(): usize { return this.isEgress ? this.dstAddr : this.srcAddr; }

  /** Records which policy/rule decided; kwp_explain turns the code into text on demand. */
  set reason(code: u32) { store<u32>(this.ptr + OFF_REASON, code); }
  get reason(): u32 { return load<u32>(this.ptr + OFF_REASON); }
  /**
   * ABI 1.3: which rule of the reason's policy decided, in the evaluator's own
   * code (0 none; `packRule` is one way to build it). The host hands the pair
   * back to Evaluator.attribution when it wants text, never on the packet path.
   */
  set rule(code: u32) { store<u32>(this.ptr + OFF_RULE, code); }
  get rule(): u32 { return load<u32>(this.ptr + OFF_RULE); }
}
