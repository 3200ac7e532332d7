// IPv4/IPv6 prefixes for ipBlock-style peers. A prefix is kept as a mask and
// a masked network in the same byte order the decision record uses, so a
// membership test is two or four loads, ANDs and compares.

import { JValue, JKind } from "./json";
import { PodAddress } from "./podinfo";

/** Why the last parseIP / CIDR.parse / IPBlock.parse returned null. */
export let cidrError: string = "";

function fail<T>(msg: string): T | null {
  cidrError = msg;
  return null;
}

function parseIPv4Into(text: string, start: i32, end: i32, out: StaticArray<u8>, at: i32): bool {
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = start; i <= end; i++) {
    const c = i < end ? text.charCodeAt(i) : 0x2e;
    if (c == 0x2e) {
      if (digits == 0 || part > 3) return false;
      out[at + part] = <u8>value;
      part++;
      value = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      // Leading zeros are refused, as Go's net/netip does: "010" is ambiguous (octal?).
      if (digits == 1 && value == 0) return false;
      value = value * 10 + (c - 0x30);
      digits++;
      if (value > 255) return false;
    } else return false;
  }
  return part == 4;
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

function parseIPv6Into(text: string, start: i32, end: i32, out: StaticArray<u8>): bool {
  const groups = new StaticArray<u16>(8);
  let n = 0;
  let gap = -1;
  let i = start;
  if (end - start >= 2 && text.charCodeAt(i) == 0x3a && text.charCodeAt(i + 1) == 0x3a) {
    gap = 0;
    i += 2;
  } else if (i < end && text.charCodeAt(i) == 0x3a) return false;
  while (i < end) {
    if (n >= 8) return false;
    let j = i;
    let value = 0;
    while (j < end && hexValue(text.charCodeAt(j)) >= 0 && j - i < 4) {
      value = (value << 4) | hexValue(text.charCodeAt(j));
      j++;
    }
    if (j < end && text.charCodeAt(j) == 0x2e) {
      // Embedded IPv4 tail (::ffff:10.0.0.1) takes the last two groups.
      if (n > 6) return false;
      const v4 = new StaticArray<u8>(4);
      if (!parseIPv4Into(text, i, end, v4, 0)) return false;
      groups[n++] = (<u16>v4[0] << 8) | v4[1];
      groups[n++] = (<u16>v4[2] << 8) | v4[3];
      i = end;
      break;
    }
    if (j == i) return false;
    groups[n++] = <u16>value;
    i = j;
    if (i == end) break;
    if (text.charCodeAt(i) != 0x3a) return false;
    i++;
    if (i < end && text.charCodeAt(i) == 0x3a) {
      if (gap >= 0) return false;
      gap = n;
      i++;
    } else if (i == end) return false;
  }
  if (gap < 0 && n != 8) return false;
  if (gap >= 0 && n > 7) return false;
  const full = new StaticArray<u16>(8);
  if (gap < 0) {
    for (let k = 0; k < 8; k++) full[k] = groups[k];
  } else {
    for (let k = 0; k < gap; k++) full[k] = groups[k];
    const tail = n - gap;
    for (let k = 0; k < tail; k++) full[8 - tail + k] = groups[gap + k];
  }
  for (let k = 0; k < 8; k++) {
    out[k << 1] = <u8>(full[k] >> 8);
    out[(k << 1) + 1] = <u8>(full[k] & 0xff);
  }
  return true;
}

function familyOf(text: string, start: i32, end: i32): u8 {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) == 0x3a) return 6;
  return 4;
}

/** Parses an IPv4 or IPv6 address into 16 bytes (IPv4 in the first 4); null and cidrError on bad input. */
export function parseIP(text: string): PodAddress | null {
  const bytes = new StaticArray<u8>(16);
  const family = familyOf(text, 0, text.length);
  const ok = family == 4 ? parseIPv4Into(text, 0, text.length, bytes, 0) : parseIPv6Into(text, 0, text.length, bytes);
  if (!ok) return fail<PodAddress>("\"" + text + "\" is not an IPv4 or IPv6 address");
  return new PodAddress(family, bytes);
}

export class CIDR {
  family: u8 = 4;
  prefixLength: i32 = 0;
  /** The address as written, before masking, for messages. */
  text: string = "";
  // Raw little-endian loads of the mask and of the masked network bytes.
  private mask0: u64 = 0;
  private mask1: u64 = 0;
  private net0: u64 = 0;
  private net1: u64 = 0;

  /** "10.0.0.0/8", "fd00::/64"; a bare address is a /32 or /128. Null and cidrError on bad input. */
  static parse(text: string): CIDR | null {
    const slash = text.indexOf("/");
    const addrEnd = slash < 0 ? text.length : slash;
    const family = familyOf(text, 0, addrEnd);
    const bytes = new StaticArray<u8>(16);
    const ok = family == 4 ? parseIPv4Into(text, 0, addrEnd, bytes, 0) : parseIPv6Into(text, 0, addrEnd, bytes);
    if (!ok) return fail<CIDR>("\"" + text + "\" is not a CIDR: the address part is not a valid IPv" + family.toString() + " address");
    const max: i32 = family == 4 ? 32 : 128;
    let prefix = max;
    if (slash >= 0) {
      const digits = text.length - slash - 1;
      if (digits < 1 || digits > 3) return fail<CIDR>("\"" + text + "\" is not a CIDR: the prefix length must be 0-" + max.toString());
      prefix = 0;
      for (let i = slash + 1; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c < 0x30 || c > 0x39) return fail<CIDR>("\"" + text + "\" is not a CIDR: the prefix length must be 0-" + max.toString());
        prefix = prefix * 10 + (c - 0x30);
      }
      if (prefix > max || (digits > 1 && text.charCodeAt(slash + 1) == 0x30))
        return fail<CIDR>("\"" + text + "\" is not a CIDR: the prefix length must be 0-" + max.toString());
    }
    const mask = new StaticArray<u8>(16);
    for (let i = 0; i < 16; i++) {
      const bits = prefix - i * 8;
      mask[i] = bits >= 8 ? <u8>0xff : bits <= 0 ? <u8>0 : <u8>((<i32>0xff << (8 - bits)) & 0xff);
      bytes[i] = bytes[i] & mask[i];
    }
    const c = new CIDR();
    c.family = family;
    c.prefixLength = prefix;
    c.text = text;
    const mp = changetype<usize>(mask);
    const bp = changetype<usize>(bytes);
    c.mask0 = load<u64>(mp);
    c.mask1 = load<u64>(mp + 8);
    c.net0 = load<u64>(bp);
    c.net1 = load<u64>(bp + 8);
    return c;
  }

  /** Whether the address at `addr` (16 bytes, IPv4 in the first 4) of `family` is inside. No allocation. */
  contains(family: u8, addr: usize): bool {
    if (family != this.family) return false;
    if (family == 4) return (<u64>load<u32>(addr) & this.mask0) == this.net0;
    return (load<u64>(addr) & this.mask0) == this.net0 && (load<u64>(addr + 8) & this.mask1) == this.net1;
  }

  /** For an IPv4 CIDR: its mask and masked network as one little-endian word each (what `contains` compares). */
  get v4Mask(): u32 { return <u32>this.mask0; }
  get v4Net(): u32 { return <u32>this.net0; }

  containsAddress(a: PodAddress): bool { return this.contains(a.family, changetype<usize>(a.bytes)); }

  toString(): string { return this.text; }
}

/** networking.k8s.io ipBlock: a CIDR minus a list of excepted CIDRs. */
const NO_CIDRS = new StaticArray<CIDR>(0);

export class IPBlock {
  constructor(public cidr: CIDR, public except: StaticArray<CIDR> = NO_CIDRS) {}

  /** Compiles `{"cidr": "...", "except": ["..."]}`; null and cidrError on bad input. */
  static parse(v: JValue): IPBlock | null {
    if (v.kind != JKind.Object) return fail<IPBlock>("ipBlock must be an object");
    const cidr = CIDR.parse(v.str("cidr"));
    if (cidr == null) return fail<IPBlock>("ipBlock.cidr: " + cidrError);
    const ex = v.get("except");
    const list = ex != null ? ex.array : new Array<JValue>(0);
    const except = list.length == 0 ? NO_CIDRS : new StaticArray<CIDR>(list.length);
    for (let i = 0; i < list.length; i++) {
      const c = list[i].kind == JKind.String ? CIDR.parse(list[i].s) : null;
      if (c == null) return fail<IPBlock>("ipBlock.except[" + i.toString() + "]: " + (list[i].kind == JKind.String ? cidrError : "must be a string"));
      if (c.family != cidr.family) return fail<IPBlock>("ipBlock.except[" + i.toString() + "]: \"" + c.text + "\" is not the same IP family as cidr \"" + cidr.text + "\"");
      except[i] = c;
    }
    return new IPBlock(cidr, except);
  }

  contains(family: u8, addr: usize): bool {
    if (!this.cidr.contains(family, addr)) return false;
    const ex = this.except;
    for (let i = 0, n = ex.length; i < n; i++) if (unchecked(ex[i]).contains(family, addr)) return false;
    return true;
  }
}
