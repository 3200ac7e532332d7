// What the dataplane asks of the policy pipeline. The pipeline implements it;
// the dataplane never looks inside, so tests and embedders can plug in their own.

import type { Packet } from '../contract.js';

export interface PacketJudge {
  /** Decide one packet. src/dst pods are looked up by the judge itself. Called on the packet path: keep it synchronous and fast. */
  allows(packet: Packet): boolean;
  /** Which traffic the dataplane must queue: every packet, or only packets to/from these IPs. */
  interest(): { all: boolean; ips: string[] };
}
