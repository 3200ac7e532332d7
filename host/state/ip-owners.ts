// Which pod owns an address. Several pods can claim one address at once (a
// pod replaced under churn, a remote pod whose IP a local one reuses): each
// claim is kept, and every change re-elects the owner, whose PodInfo goes
// into the lookup tables the packet path reads (two lookups per packet).

import type { PodInfo } from '../contract.js';
import { parseIP } from '../net/ip.js';
import { Ipv4PodIndex } from './ipv4-index.js';

/** What the election looks at: ClusterState's pod record. */
export interface IpClaimant {
  readonly id: number;
  running: boolean;
  /** The PodInfo that wins the address; a claimant without one is passed over. */
  info?: PodInfo;
  /** A pod of another cluster: loses every address to a local claimant. */
  remote?: boolean;
}

/**
 * The IPv4 index key: the address's 32 bits read as a signed int32. Same bits
 * as the u32, but always a small integer in V8, so a lookup with any address
 * (192.168.x.x included) never boxes a heap number.
 */
function ipv4Key(bytes: Uint8Array): number {
  return (bytes[0] << 24) | (bytes[1] << 16) | (bytes[2] << 8) | bytes[3];
}

/** The IPv6 index key: the eight 16-bit groups as an eight-character string, built in one call. */
function ipv6Key(b: Uint8Array): string {
  return String.fromCharCode(
    (b[0] << 8) | b[1],
    (b[2] << 8) | b[3],
    (b[4] << 8) | b[5],
    (b[6] << 8) | b[7],
    (b[8] << 8) | b[9],
    (b[10] << 8) | b[11],
    (b[12] << 8) | b[13],
    (b[14] << 8) | b[15],
  );
}

export class IpOwners<C extends IpClaimant = IpClaimant> {
  /**
   * Every claimant of an address, by canonical address text. A lone claimant
   * (nearly every address) is stored as itself: a Set per pod IP cost ~150
   * bytes each.
   */
  private readonly claims = new Map<string, C | Set<C>>();
  private readonly byIPv4 = new Ipv4PodIndex();
  private readonly byIPv6 = new Map<string, PodInfo>();

  /** The owner of `ip` (4 or 16 bytes). Allocation-free for 4 bytes. */
  ownerOf(ip: Uint8Array): PodInfo | undefined {
    if (ip.length === 4) return this.byIPv4.get(ipv4Key(ip));
    if (ip.length === 16) return this.byIPv6.get(ipv6Key(ip));
    return undefined;
  }

  /** The owner's pod id, 0 when there is none: for 4 bytes without reading the PodInfo (ownerOf(ip)?.id ?? 0 otherwise). */
  ownerIdOf(ip: Uint8Array): number {
    if (ip.length === 4) return this.byIPv4.idOf(ipv4Key(ip));
    return this.ownerOf(ip)?.id ?? 0;
  }

  /**
   * Moves `claimant`'s claims from the addresses of `before` to those of
   * `after` and re-elects the owner of every address involved (call it with
   * the same PodInfo twice when only `running` changed). Host-networked pods
   * claim nothing: their address is the node's.
   */
  update(claimant: C, before: PodInfo | undefined, after: PodInfo | undefined): void {
    const oldIPs = before && !before.hostNetwork ? before.ips : [];
    const newIPs = after && !after.hostNetwork ? after.ips : [];
    for (const ip of oldIPs) {
      if (newIPs.includes(ip)) continue;
      const claimants = this.claims.get(ip);
      if (claimants === claimant) this.claims.delete(ip);
      else if (claimants instanceof Set) {
        claimants.delete(claimant);
        if (claimants.size === 1) this.claims.set(ip, claimants.values().next().value!);
      }
    }
    for (const ip of newIPs) {
      const claimants = this.claims.get(ip);
      if (claimants === undefined) this.claims.set(ip, claimant);
      else if (claimants instanceof Set) claimants.add(claimant);
      else if (claimants !== claimant) this.claims.set(ip, new Set([claimants, claimant]));
    }
    for (const ip of new Set([...oldIPs, ...newIPs])) this.elect(ip);
  }

  /**
   * A local pod beats a remote one (a remote entry never shadows a local pod);
   * then a Running pod beats one that is not; among equals the newest pod
   * (highest id) wins.
   */
  private elect(ip: string): void {
    let winner: C | undefined;
    const claimants = this.claims.get(ip);
    for (const candidate of claimants instanceof Set ? claimants : claimants ? [claimants] : []) {
      if (!candidate.info) continue;
      const candidateLocal = candidate.remote !== true;
      const winnerLocal = winner?.remote !== true;
      if (
        !winner ||
        (candidateLocal && !winnerLocal) ||
        (candidateLocal === winnerLocal &&
          ((candidate.running && !winner.running) || (candidate.running === winner.running && candidate.id > winner.id)))
      ) {
        winner = candidate;
      }
    }
    const bytes = parseIP(ip)!.bytes;
    if (bytes.length === 4) {
      if (winner) this.byIPv4.set(ipv4Key(bytes), winner.info!);
      else this.byIPv4.delete(ipv4Key(bytes));
    } else {
      if (winner) this.byIPv6.set(ipv6Key(bytes), winner.info!);
      else this.byIPv6.delete(ipv6Key(bytes));
    }
  }
}
