// What the dataplane asks of the policy pipeline. The pipeline implements it;
// the dataplane never looks inside, so tests and embedders can plug in their own.

import type { Packet } from '../contract.js';

export interface PacketJudge {
  /** Decide one packet. src/dst pods are looked up by the judge itself. Called on the packet path: keep it synchronous and fast. */
  allows(packet: Packet): boolean;
  /**
   * Optional: decide many packets at once, `out[i] = 1` when `packets[i]` is
   * allowed, 0 when denied, each exactly as `allows` would. When the judge
   * has it, the dataplane collects the packets one read wakeup brings and
   * answers them together (verdicts go back by packet id), so a judge whose
   * calls cost a thread crossing pays it per batch, not per packet.
   */
  allowsBatch?(packets: readonly Packet[], out: Uint8Array): void;
  /**
   * Optional: `allowsBatch` answered later — `out` is filled when the promise
   * resolves, and the dataplane gives the verdicts by packet id then, so the
   * thread stays free meanwhile (a judge whose module code runs in other
   * threads). Undefined when the judge would rather answer now: the
   * dataplane then calls `allowsBatch`.
   */
  allowsBatchAsync?(packets: readonly Packet[], out: Uint8Array): Promise<void> | undefined;
  /** Which traffic the dataplane must queue: every packet, or only packets to/from these IPs. */
  interest(): { all: boolean; ips: string[] };
}
