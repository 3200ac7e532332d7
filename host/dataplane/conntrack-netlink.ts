// Strict mode's table access over netlink: the optional `kwp-conntrack-netlink`
// addon (host/dataplane/conntrack-netlink/, built by node-gyp during `npm ci`
// when libnetfilter-conntrack-dev is installed) lists the entries carrying the
// accepted bit in one kernel-filtered dump, as packed records, and clears the
// bit of many entries in batches of acknowledged update messages, both on
// libuv's thread pool.
// Like `nfqueue`, it is loaded lazily and its absence is an answer, not a
// crash: the strict cut then falls back to one `conntrack` process per entry.

import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { formatIP, parseIP } from '../net/ip.js';
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
  /** The entries of `family` whose mark has `bit`; without it, strict mode reads `conntrack -L`. */
  list?(family: 4 | 6, bit: number): Promise<ConntrackEntry[]>;
  clear(family: 4 | 6, entries: readonly ConntrackEntry[], bit: number): Promise<ClearResult>;
}

interface ConntrackNetlinkBinding {
  listMarked(family: 4 | 6, bit: number): Promise<Buffer>;
  clearMarkBit(family: 4 | 6, tuples: Buffer, count: number, bit: number): Promise<{ cleared: number; gone: number; failed: number; firstError: number }>;
  recordBytes: number;
}

/**
 * The packed record the addon lists and reads (its src/conntrack_netlink.c):
 * the original tuple in the first 44 bytes (all an update needs), then the
 * reply direction's source and the mark. Ports, ICMP id and mark in network order.
 */
export const RECORD_BYTES = 64;
/** Where each field starts in a record (the addon's conntrack_netlink.c, OFF_* there). */
const AT = {
  icmpType: 1,
  icmpCode: 2,
  srcPort: 4,
  dstPort: 6,
  icmpId: 8,
  replySrcPort: 10,
  src: 12,
  dst: 28,
  replySrc: 44,
  mark: 60,
} as const;

/** `entries` as packed records; an entry the dump produced is copied as it came. */
export function packRecords(entries: readonly ConntrackEntry[]): Buffer {
  const out = Buffer.alloc(entries.length * RECORD_BYTES);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const o = i * RECORD_BYTES;
    if (e.record !== undefined) {
      out.set(e.record, o);
      continue;
    }
    out[o] = e.protocol;
    if (e.protocol === Protocol.ICMP || e.protocol === Protocol.ICMPv6) {
      out[o + AT.icmpType] = e.icmpType;
      out[o + AT.icmpCode] = e.icmpCode;
      out.writeUInt16BE(e.icmpId & 0xffff, o + AT.icmpId);
    } else {
      out.writeUInt16BE(e.srcPort & 0xffff, o + AT.srcPort);
      out.writeUInt16BE(e.dstPort & 0xffff, o + AT.dstPort);
      out.writeUInt16BE(e.replySrcPort & 0xffff, o + AT.replySrcPort);
    }
    out.set(addressBytes(e.src), o + AT.src);
    out.set(addressBytes(e.dst), o + AT.dst);
    out.set(addressBytes(e.replySrc), o + AT.replySrc);
    out.writeUInt32BE(e.mark >>> 0, o + AT.mark);
  }
  return out;
}

/**
 * One entry of the dump, read from its record: numbers eagerly, the address
 * texts only when asked (logs), since strict mode judges from the bytes.
 */
class DumpedEntry implements ConntrackEntry {
  readonly protocol: number;
  readonly srcPort: number;
  readonly dstPort: number;
  readonly replySrcPort: number;
  readonly icmpType: number;
  readonly icmpCode: number;
  readonly icmpId: number;
  readonly mark: number;
  readonly record: Uint8Array;
  readonly addressBytes: { src: Uint8Array; dst: Uint8Array; replySrc: Uint8Array };

  constructor(readonly family: 4 | 6, records: Buffer, o: number) {
    const size = family === 4 ? 4 : 16;
    const protocol = records[o];
    const icmp = protocol === Protocol.ICMP || protocol === Protocol.ICMPv6;
    this.protocol = protocol;
    this.srcPort = icmp ? 0 : records.readUInt16BE(o + AT.srcPort);
    this.dstPort = icmp ? 0 : records.readUInt16BE(o + AT.dstPort);
    this.replySrcPort = icmp ? 0 : records.readUInt16BE(o + AT.replySrcPort);
    this.icmpType = icmp ? records[o + AT.icmpType] : 0;
    this.icmpCode = icmp ? records[o + AT.icmpCode] : 0;
    this.icmpId = icmp ? records.readUInt16BE(o + AT.icmpId) : 0;
    this.mark = records.readUInt32BE(o + AT.mark);
    this.record = records.subarray(o, o + RECORD_BYTES);
    this.addressBytes = {
      src: records.subarray(o + AT.src, o + AT.src + size),
      dst: records.subarray(o + AT.dst, o + AT.dst + size),
      replySrc: records.subarray(o + AT.replySrc, o + AT.replySrc + size),
    };
  }

  get src(): string { return formatIP(this.addressBytes.src); }
  get dst(): string { return formatIP(this.addressBytes.dst); }
  get replySrc(): string { return formatIP(this.addressBytes.replySrc); }
}

/** The dump's records as entries (each keeps its record, so the cut sends it back unchanged). */
export function unpackRecords(family: 4 | 6, records: Buffer): ConntrackEntry[] {
  const n = Math.floor(records.length / RECORD_BYTES);
  const entries: ConntrackEntry[] = new Array(n);
  for (let i = 0; i < n; i++) entries[i] = new DumpedEntry(family, records, i * RECORD_BYTES);
  return entries;
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
    if (binding.recordBytes !== RECORD_BYTES || typeof binding.listMarked !== 'function') {
      return { reason: `${moduleName} is another version (${binding.recordBytes}-byte records, this agent packs ${RECORD_BYTES}): rebuild it (npm rebuild ${PACKAGE})` };
    }
    return { binding };
  } catch (err) {
    return { reason: err instanceof Error ? err.message.split('\n')[0] : String(err) };
  }
}

/** Lists and clears through the addon: one call per family each, which the caller may run in parallel. */
export function netlinkMarkClearer(binding: ConntrackNetlinkBinding): MarkClearer {
  return {
    path: 'netlink',
    async list(family, bit) {
      return unpackRecords(family, await binding.listMarked(family, bit >>> 0));
    },
    async clear(family, entries, bit) {
      if (entries.length === 0) return { cleared: 0, gone: 0, failed: 0 };
      const r = await binding.clearMarkBit(family, packRecords(entries), entries.length, bit >>> 0);
      return { cleared: r.cleared, gone: r.gone, failed: r.failed, ...(r.firstError ? { firstError: errnoName(r.firstError) } : {}) };
    },
  };
}

function errnoName(errno: number): string {
  const name = Object.entries(constants.errno).find(([, value]) => value === errno)?.[0];
  return name ? `${name} (errno ${errno})` : `errno ${errno}`;
}
