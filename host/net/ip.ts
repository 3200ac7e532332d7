// Textual IP addresses to and from the byte form packets carry. Written by
// hand rather than with node:net because every index keyed by an address needs
// one canonical spelling (RFC 5952 for IPv6), and because the IPv4 lookup on
// the packet path must be able to work on bytes without building a string.

export interface ParsedIP {
  family: 4 | 6;
  /** 4 bytes for IPv4, 16 for IPv6. */
  bytes: Uint8Array;
}

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/**
 * Writes the dotted-quad IPv4 address `text` as 4 bytes at `out[offset]`;
 * false (and `out` partly written) when it is not one. Read character by
 * character, without a string or array on the way: the host encodes every
 * pod's addresses each time a stage is fed (10,000 pods a feed). Leading
 * zeros are refused: some parsers read them as octal, so "010" is ambiguous.
 */
export function writeIPv4(text: string, out: Uint8Array, offset: number): boolean {
  const n = text.length;
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || part === 4) return false;
      out[offset + part++] = value;
      value = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits === 1 && value === 0) return false;
      value = value * 10 + (c - 0x30);
      if (++digits > 3 || value > 255) return false;
    } else {
      return false;
    }
  }
  return part === 4;
}

function parseIPv6(text: string): Uint8Array | undefined {
  if (text.length === 0 || text.length > 45) return undefined;

  // An embedded IPv4 address (::ffff:192.0.2.1) may only come last; rewrite it as two groups.
  let hexText = text;
  const lastColon = text.lastIndexOf(':');
  const lastPart = text.slice(lastColon + 1);
  if (lastPart.includes('.')) {
    const quad = new Uint8Array(4);
    if (!writeIPv4(lastPart, quad, 0)) return undefined;
    hexText = `${text.slice(0, lastColon + 1)}${((quad[0] << 8) | quad[1]).toString(16)}:${((quad[2] << 8) | quad[3]).toString(16)}`;
  }

  const halves = hexText.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const head = groupsOf(halves[0]);
  const tail = halves.length === 2 ? groupsOf(halves[1]) : [];
  if (halves.length === 1 && head.length !== 8) return undefined;
  if (halves.length === 2 && head.length + tail.length > 7) return undefined;

  const bytes = new Uint8Array(16);
  const writeGroups = (groups: string[], startByte: number): boolean => {
    for (let i = 0; i < groups.length; i++) {
      if (!HEX_GROUP.test(groups[i])) return false;
      const value = parseInt(groups[i], 16);
      bytes[startByte + 2 * i] = value >> 8;
      bytes[startByte + 2 * i + 1] = value & 0xff;
    }
    return true;
  };
  if (!writeGroups(head, 0)) return undefined;
  if (!writeGroups(tail, 16 - tail.length * 2)) return undefined;
  return bytes;
}

/** Parses a dotted-quad IPv4 or an RFC 4291 IPv6 address; `undefined` when `text` is neither (CIDRs and zones included). */
export function parseIP(text: string): ParsedIP | undefined {
  if (typeof text !== 'string') return undefined;
  if (text.includes(':')) {
    const bytes = parseIPv6(text);
    return bytes ? { family: 6, bytes } : undefined;
  }
  const bytes = new Uint8Array(4);
  return writeIPv4(text, bytes, 0) ? { family: 4, bytes } : undefined;
}

/** The canonical text of a 4- or 16-byte address: dotted quad, or RFC 5952 IPv6. */
export function formatIP(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (bytes.length !== 16) throw new RangeError(`an IP address has 4 or 16 bytes, not ${bytes.length}`);

  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i] << 8) | bytes[i + 1]);

  // RFC 5952 §5: IPv4-mapped addresses keep the dotted quad.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  }

  // RFC 5952 §4.2: compress the longest run of two or more zero groups, the first on a tie.
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (list: number[]): string => list.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

/** The canonical text of `text` when it is an address, otherwise `undefined`. */
export function normalizeIP(text: string): string | undefined {
  const parsed = parseIP(text);
  return parsed ? formatIP(parsed.bytes) : undefined;
}

/** An IPv4 address as an unsigned 32-bit number, read without allocating. */
export function ipv4ToU32(bytes: Uint8Array, offset = 0): number {
  return ((bytes[offset] << 24) | (bytes[offset + 1] << 16) | (bytes[offset + 2] << 8) | bytes[offset + 3]) >>> 0;
}
