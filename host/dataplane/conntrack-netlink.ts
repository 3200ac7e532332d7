// Strict mode's cut over netlink: the optional `kwp-conntrack-netlink` addon
// (host/dataplane/conntrack-netlink/, built by node-gyp during `npm ci` when
// libnetfilter-conntrack-dev is installed) clears the accepted bit of many
// entries in batches of acknowledged update messages on libuv's thread pool.
// Like `nfqueue`, it is loaded lazily and its absence is an answer, not a
// crash: the strict cut then falls back to one `conntrack` process per entry.

import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { parseIP } from '../net/ip.js';
import { Protocol } from '../contract.js';
import type { ConntrackEntry } from './conntrack.js';

/** What clearing a bit on a family's entries came to. */
export interface ClearResult {
  /** Entries whose bit is now clear. */
  cleared: number;
  /** Entries the kernel no longer had: the connection ended meanwhile, nothing to cut. */
  gone: number;
  failed: number;
  /** Why the first failure failed, when one did. */
  firstError?: string;
}

/** Clears one mark bit on conntrack entries of one family; how strict mode cuts. */
export interface MarkClearer {
  /** Which mechanism it is, for the log line and the `kwp_dataplane_strict_cut_path` metric. */
  readonly path: 'netlink' | 'conntrack-process';
  clear(family: 4 | 6, entries: readonly ConntrackEntry[], bit: number): Promise<ClearResult>;
}

interface ConntrackNetlinkBinding {
  clearMarkBit(family: 4 | 6, tuples: Buffer, count: number, bit: number): Promise<{ cleared: number; gone: number; failed: number; firstError: number }>;
  recordBytes: number;
}

/** The packed tuple the addon reads (its src/conntrack_netlink.c). */
export const TUPLE_BYTES = 44;
const OFF_ICMP_TYPE = 1;
const OFF_ICMP_CODE = 2;
const OFF_SRC_PORT = 4;
const OFF_DST_PORT = 6;
const OFF_ICMP_ID = 8;
const OFF_SRC = 12;
const OFF_DST = 28;

/** The original-direction tuples of `entries`, 44 bytes each, ports and ICMP id in network order. */
export function packTuples(entries: readonly ConntrackEntry[]): Buffer {
  const out = Buffer.alloc(entries.length * TUPLE_BYTES);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const o = i * TUPLE_BYTES;
    out[o] = e.protocol;
    if (e.protocol === Protocol.ICMP || e.protocol === Protocol.ICMPv6) {
      out[o + OFF_ICMP_TYPE] = e.icmpType;
      out[o + OFF_ICMP_CODE] = e.icmpCode;
      out.writeUInt16BE(e.icmpId & 0xffff, o + OFF_ICMP_ID);
    } else {
      out.writeUInt16BE(e.srcPort & 0xffff, o + OFF_SRC_PORT);
      out.writeUInt16BE(e.dstPort & 0xffff, o + OFF_DST_PORT);
    }
    out.set(addressBytes(e.src), o + OFF_SRC);
    out.set(addressBytes(e.dst), o + OFF_DST);
  }
  return out;
}

function addressBytes(text: string): Uint8Array {
  const parsed = parseIP(text);
  if (!parsed) throw new Error(`conntrack entry with an address that is not one: ${text}`);
  return parsed.bytes;
}

const PACKAGE = 'kwp-conntrack-netlink';

/** The addon, or why it is not there (not built, library missing, not Linux). */
export function loadConntrackNetlink(moduleName = PACKAGE): { binding: ConntrackNetlinkBinding } | { reason: string } {
  try {
    const binding = createRequire(import.meta.url)(moduleName) as ConntrackNetlinkBinding;
    if (binding.recordBytes !== TUPLE_BYTES) return { reason: `${moduleName} packs ${binding.recordBytes}-byte tuples, this agent ${TUPLE_BYTES}: rebuild it (npm rebuild ${PACKAGE})` };
    return { binding };
  } catch (err) {
    return { reason: err instanceof Error ? err.message.split('\n')[0] : String(err) };
  }
}

/** Clears bits through the addon: one call per family, which the caller may run in parallel. */
export function netlinkMarkClearer(binding: ConntrackNetlinkBinding): MarkClearer {
  return {
    path: 'netlink',
    async clear(family, entries, bit) {
      if (entries.length === 0) return { cleared: 0, gone: 0, failed: 0 };
      const r = await binding.clearMarkBit(family, packTuples(entries), entries.length, bit >>> 0);
      return { cleared: r.cleared, gone: r.gone, failed: r.failed, ...(r.firstError ? { firstError: errnoName(r.firstError) } : {}) };
    },
  };
}

function errnoName(errno: number): string {
  const name = Object.entries(constants.errno).find(([, value]) => value === errno)?.[0];
  return name ? `${name} (errno ${errno})` : `errno ${errno}`;
}
