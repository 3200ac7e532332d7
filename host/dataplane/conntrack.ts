// Strict mode's view of the connection table: the entries the agent once
// accepted (conntrack mark bit set), read from `conntrack -L`, and the command
// that clears the bit again. The entry itself stays, with its original tuple,
// so whichever side speaks next, the classify chain queues the packet and
// flags a reply-direction one; the agent judges the original direction and
// drops it. (Deleting the entry instead would let the responder's next packet
// open a new entry in the reverse direction, judged the wrong way round.)

import { parseIP } from '../net/ip.js';
import type { Packet } from '../contract.js';
import { Protocol } from '../contract.js';

export interface ConntrackEntry {
  family: 4 | 6;
  protocol: number;
  /** The original direction's tuple: who opened the connection, and the address it dialled (a Service IP for a Service connection). */
  src: string;
  dst: string;
  srcPort: number;
  dstPort: number;
  /**
   * The reply direction's source: who answers. After a Service proxy's DNAT
   * this is the endpoint the connection was rewritten to, and its port the
   * target port; without NAT it equals dst and dstPort.
   */
  replySrc: string;
  replySrcPort: number;
  icmpType: number;
  icmpCode: number;
  icmpId: number;
  mark: number;
  /** The netlink addon's packed record of this entry, when its dump listed it (conntrack-netlink.ts). */
  record?: Uint8Array;
  /** src, dst and replySrc as bytes, when the listing had them so: the packet is then built without parsing text. */
  addressBytes?: { src: Uint8Array; dst: Uint8Array; replySrc: Uint8Array };
}

/** The `occurrence`-th (0: the original tuple, 1: the reply tuple, which repeats the keys) value of `key`. */
function field(tokens: string[], key: string, occurrence = 0): string | undefined {
  const prefix = `${key}=`;
  let seen = 0;
  for (const token of tokens) if (token.startsWith(prefix) && seen++ === occurrence) return token.slice(prefix.length);
  return undefined;
}

/** One line of `conntrack -L` (plain or `-o extended`), or undefined when it is not an entry. */
export function parseConntrackLine(line: string): ConntrackEntry | undefined {
  const tokens = line.trim().split(/\s+/);
  if (tokens.length < 4) return undefined;
  // Extended output starts with "ipv4 2"; the protocol name and number follow either way.
  let at = 0;
  if (tokens[0] === 'ipv4' || tokens[0] === 'ipv6') at = 2;
  const protocol = Number(tokens[at + 1]);
  if (!Number.isInteger(protocol) || protocol < 0 || protocol > 255) return undefined;
  const src = field(tokens, 'src');
  const dst = field(tokens, 'dst');
  if (!src || !dst) return undefined;
  const parsedSrc = parseIP(src);
  const parsedDst = parseIP(dst);
  if (!parsedSrc || !parsedDst || parsedSrc.family !== parsedDst.family) return undefined;
  const num = (key: string, occurrence = 0) => Number(field(tokens, key, occurrence) ?? 0) || 0;
  const replySrc = field(tokens, 'src', 1);
  const parsedReply = replySrc ? parseIP(replySrc) : undefined;
  const reply = parsedReply && parsedReply.family === parsedSrc.family ? replySrc! : dst;
  return {
    family: parsedSrc.family,
    protocol,
    src,
    dst,
    srcPort: num('sport'),
    dstPort: num('dport'),
    replySrc: reply,
    replySrcPort: reply === replySrc ? num('sport', 1) : num('dport'),
    icmpType: num('type'),
    icmpCode: num('code'),
    icmpId: num('id'),
    mark: num('mark'),
  };
}

export function parseConntrackListing(text: string): ConntrackEntry[] {
  const entries: ConntrackEntry[] = [];
  for (const line of text.split('\n')) {
    const entry = parseConntrackLine(line);
    if (entry) entries.push(entry);
  }
  return entries;
}

/**
 * The packet that opened the connection as it reached the pod, which is what
 * the packet path judged: the source as dialled, the destination as the
 * reply direction names it (after a Service proxy's DNAT, the endpoint and its
 * target port, not the Service IP), before any source rewrite (the hairpin
 * SNAT only changes the reply's destination). kube-network-policies builds
 * the same tuple from Forward.SrcIP and Reverse.SrcIP (pkg/dataplane/conntrack).
 */
export function entryPacket(entry: ConntrackEntry): Packet {
  const bytes = entry.addressBytes ?? { src: parseIP(entry.src)!.bytes, dst: parseIP(entry.dst)!.bytes, replySrc: parseIP(entry.replySrc)!.bytes };
  const rewritten = !sameBytes(bytes.replySrc, bytes.dst) || entry.replySrcPort !== entry.dstPort;
  const packet: Packet = {
    family: entry.family,
    protocol: entry.protocol,
    src: bytes.src,
    dst: bytes.replySrc,
    srcPort: entry.srcPort,
    dstPort: entry.replySrcPort,
    icmpType: entry.icmpType,
    icmpCode: entry.icmpCode,
  };
  // A connection a Service proxy sent back to the pod that opened it.
  if (rewritten && sameBytes(bytes.replySrc, bytes.src)) packet.serviceHairpin = true;
  return packet;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `conntrack -L` arguments for the connections `src` opened to `dst` (a Service IP, say) on `dstPort`. */
export function dialledArgs(family: 4 | 6, protocol: number, src: string, dst: string, dstPort: number): string[] {
  return ['-L', '-f', family === 4 ? 'ipv4' : 'ipv6', '-p', PROTOCOL_NAMES[protocol] ?? String(protocol), '--orig-src', src, '--orig-dst', dst, '--dport', String(dstPort)];
}

export function listArgs(family: 4 | 6, acceptedBit: number): string[] {
  const mark = `0x${acceptedBit.toString(16)}`;
  return ['-L', '-f', family === 4 ? 'ipv4' : 'ipv6', '--mark', `${mark}/${mark}`];
}

const PROTOCOL_NAMES: Record<number, string> = { [Protocol.TCP]: 'tcp', [Protocol.UDP]: 'udp', [Protocol.SCTP]: 'sctp', [Protocol.ICMP]: 'icmp', [Protocol.ICMPv6]: 'icmpv6' };

/** `conntrack -U` arguments clearing `bit` from the mark of exactly this entry, other bits kept. */
export function clearMarkArgs(entry: ConntrackEntry, bit: number): string[] {
  return ['-U', ...tupleArgs(entry), '--mark', `0/0x${bit.toString(16)}`];
}

function tupleArgs(entry: ConntrackEntry): string[] {
  const args = ['-f', entry.family === 4 ? 'ipv4' : 'ipv6', '-s', entry.src, '-d', entry.dst];
  const name = PROTOCOL_NAMES[entry.protocol];
  args.push('-p', name ?? String(entry.protocol));
  if (entry.protocol === Protocol.TCP || entry.protocol === Protocol.UDP || entry.protocol === Protocol.SCTP) {
    args.push('--sport', String(entry.srcPort), '--dport', String(entry.dstPort));
  } else if (entry.protocol === Protocol.ICMP || entry.protocol === Protocol.ICMPv6) {
    const prefix = entry.protocol === Protocol.ICMP ? '--icmp' : '--icmpv6';
    args.push(`${prefix}-type`, String(entry.icmpType), `${prefix}-code`, String(entry.icmpCode), `${prefix}-id`, String(entry.icmpId));
  }
  return args;
}
