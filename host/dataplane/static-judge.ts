// A PacketJudge from a fixed list of deny rules: for the standalone runner, the
// dataplane's end-to-end tests and benchmarks, where the point is to exercise
// the kernel path without the WASM pipeline.

import type { Packet } from '../contract.js';
import { formatIP } from '../net/ip.js';
import type { PacketJudge } from './judge.js';

export interface StaticDenyRule {
  /** Source IP; any when absent. */
  src?: string;
  dst?: string;
  /** IANA protocol number; any when absent. */
  protocol?: number;
  /** Destination port; any when absent. */
  port?: number;
}

export interface StaticJudgeConfig {
  deny: StaticDenyRule[];
  interest: { all: boolean; ips: string[] };
}

export class StaticJudge implements PacketJudge {
  private config: StaticJudgeConfig;

  constructor(config: StaticJudgeConfig) {
    this.config = config;
  }

  update(config: StaticJudgeConfig): void {
    this.config = config;
  }

  allows(packet: Packet): boolean {
    const deny = this.config.deny;
    if (deny.length === 0) return true;
    const src = formatIP(packet.src);
    const dst = formatIP(packet.dst);
    for (const rule of deny) {
      if (rule.src !== undefined && rule.src !== src) continue;
      if (rule.dst !== undefined && rule.dst !== dst) continue;
      if (rule.protocol !== undefined && rule.protocol !== packet.protocol) continue;
      if (rule.port !== undefined && rule.port !== packet.dstPort) continue;
      return false;
    }
    return true;
  }

  interest(): { all: boolean; ips: string[] } {
    return this.config.interest;
  }
}
