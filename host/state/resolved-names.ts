// The DNS answers ClusterNetworkPolicy `domainNames` peers match on: which
// addresses a name resolved to, each until its TTL runs out. The cache owns
// no clock (callers pass `now`), so tests and `kwp eval` control time.

import { KwpError } from '../errors.js';
import { formatIP, parseIP } from '../net/ip.js';

export function normalizeDnsName(name: string): string {
  let normalized = name.trim().toLowerCase();
  if (normalized.endsWith('.')) normalized = normalized.slice(0, -1);
  return normalized;
}

/** IPv4 before IPv6, then by bytes. */
export function compareAddresses(a: string, b: string): number {
  const pa = parseIP(a)!.bytes;
  const pb = parseIP(b)!.bytes;
  if (pa.length !== pb.length) return pa.length - pb.length;
  for (let i = 0; i < pa.length; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

export class ResolvedNames {
  /** name → address → expiry (ms since the epoch). */
  private readonly names = new Map<string, Map<string, number>>();

  /**
   * Remembers that `name` resolved to `address` for `ttlSeconds`; returns the
   * normalized name when its address set changed, undefined when the answer
   * only extended an expiry. Throws KWP_ERR_USAGE for an empty name or an
   * address that is not one.
   */
  record(name: string, address: string, ttlSeconds: number, now: number): string | undefined {
    const normalizedName = normalizeDnsName(name);
    if (normalizedName === '') {
      throw new KwpError('KWP_ERR_USAGE', `a resolved name must not be empty (address ${address}); give a DNS name such as www.example.com`);
    }
    const parsed = parseIP(address);
    if (!parsed) {
      throw new KwpError('KWP_ERR_USAGE', `"${address}" recorded for ${normalizedName} is not an IPv4 or IPv6 address; give one address such as 192.0.2.10`);
    }
    const canonical = formatIP(parsed.bytes);
    const ttlMs = Number.isFinite(ttlSeconds) && ttlSeconds > 0 ? ttlSeconds * 1000 : 0;
    let addresses = this.names.get(normalizedName);
    if (!addresses) this.names.set(normalizedName, (addresses = new Map()));
    const known = addresses.get(canonical);
    addresses.set(canonical, Math.max(known ?? -Infinity, now + ttlMs));
    return known === undefined ? normalizedName : undefined;
  }

  /**
   * Forgets addresses whose TTL has run out, telling `changed` of each name
   * whose address set changed as soon as it has (a name with none left is gone).
   */
  expire(now: number, changed: (name: string) => void): void {
    for (const [name, addresses] of [...this.names]) {
      let any = false;
      for (const [address, expiresAt] of [...addresses]) {
        if (expiresAt <= now) {
          addresses.delete(address);
          any = true;
        }
      }
      if (!any) continue;
      if (addresses.size === 0) this.names.delete(name);
      changed(name);
    }
  }

  /** When the next address expires (ms since the epoch). */
  nextExpiry(): number | undefined {
    let earliest: number | undefined;
    for (const addresses of this.names.values()) {
      for (const expiresAt of addresses.values()) if (earliest === undefined || expiresAt < earliest) earliest = expiresAt;
    }
    return earliest;
  }

  /** The addresses `name` currently resolves to, sorted (IPv4 first); [] for an unknown name. */
  addresses(name: string): string[] {
    return [...(this.names.get(normalizeDnsName(name))?.keys() ?? [])].sort(compareAddresses);
  }
}
