// Raw IP packet bytes, as NFQUEUE hands them over, to the header fields the
// pipeline decides on. It sits on the per-packet path, so it never throws and
// never allocates more than the Packet itself: addresses are views into the
// caller's buffer, which must stay untouched until the verdict is given.

import { Protocol, type Packet } from '../contract.js';

const IPV6_HEADER_LENGTH = 40;

// IPv6 extension headers that may sit between the fixed header and the
// transport header. ESP (50) is not listed: what follows it is encrypted.
const EXT_HOP_BY_HOP = 0;
const EXT_ROUTING = 43;
const EXT_FRAGMENT = 44;
const EXT_AUTHENTICATION = 51;
const EXT_DESTINATION_OPTIONS = 60;

/** More extension headers than this is not a packet any sane stack sends. */
const MAX_EXTENSION_HEADERS = 16;

/**
 * Parse an IPv4 or IPv6 packet. Returns `undefined` for anything truncated or
 * malformed in the IP header; a transport header that is missing or cut short
 * (a non-first fragment, a runt) leaves ports and ICMP fields at 0, since the
 * addresses and protocol alone still let the pipeline decide.
 */
export function parsePacket(bytes: Uint8Array): Packet | undefined {
  if (bytes.length < 1) return undefined;
  const version = bytes[0] >> 4;
  if (version === 4) return parseIPv4(bytes);
  if (version === 6) return parseIPv6(bytes);
  return undefined;
}

function parseIPv4(bytes: Uint8Array): Packet | undefined {
  if (bytes.length < 20) return undefined;
  const headerLength = (bytes[0] & 0x0f) * 4;
  if (headerLength < 20 || headerLength > bytes.length) return undefined;
  const totalLength = (bytes[2] << 8) | bytes[3];
  if (totalLength < headerLength) return undefined;
  // NFQUEUE may deliver fewer bytes than the total length (copy range); trust what is there.
  const end = totalLength < bytes.length ? totalLength : bytes.length;
  const protocol = bytes[9];
  const fragmentOffset = ((bytes[6] & 0x1f) << 8) | bytes[7];
  const packet = newPacket(4, protocol, bytes.subarray(12, 16), bytes.subarray(16, 20));
  // Only the first fragment carries the transport header.
  if (fragmentOffset === 0) fillTransport(packet, bytes, headerLength, end, false);
  return packet;
}

// Results of the last walkIPv6 call: module state rather than a returned
// object, so the per-packet path allocates nothing for them.
let walkedProtocol = 0;
let walkedFirstFragment = true;

/** Walk the IPv6 extension headers; returns the transport header's offset or -1. */
function walkIPv6(bytes: Uint8Array, end: number): number {
  let next = bytes[6];
  let offset = IPV6_HEADER_LENGTH;
  walkedFirstFragment = true;
  for (let hops = 0; ; hops++) {
    if (hops > MAX_EXTENSION_HEADERS) return -1;
    if (next === EXT_HOP_BY_HOP || next === EXT_ROUTING || next === EXT_DESTINATION_OPTIONS) {
      if (offset + 2 > end) return -1;
      const following = bytes[offset];
      offset += (bytes[offset + 1] + 1) * 8;
      next = following;
    } else if (next === EXT_FRAGMENT) {
      if (offset + 8 > end) return -1;
      const following = bytes[offset];
      const fragmentOffset = (bytes[offset + 2] << 5) | (bytes[offset + 3] >> 3);
      if (fragmentOffset !== 0) walkedFirstFragment = false;
      offset += 8;
      next = following;
    } else if (next === EXT_AUTHENTICATION) {
      if (offset + 2 > end) return -1;
      const following = bytes[offset];
      // AH counts its length in 4-byte units minus 2, unlike the others.
      offset += (bytes[offset + 1] + 2) * 4;
      next = following;
    } else {
      break;
    }
    if (offset > end) return -1;
  }
  walkedProtocol = next;
  return offset;
}

function ipv6End(bytes: Uint8Array): number {
  const payloadLength = (bytes[4] << 8) | bytes[5];
  // A payload length of 0 means a jumbogram (hop-by-hop option); then the buffer length rules.
  const declaredEnd = IPV6_HEADER_LENGTH + payloadLength;
  return payloadLength !== 0 && declaredEnd < bytes.length ? declaredEnd : bytes.length;
}

function parseIPv6(bytes: Uint8Array): Packet | undefined {
  if (bytes.length < IPV6_HEADER_LENGTH) return undefined;
  const end = ipv6End(bytes);
  const offset = walkIPv6(bytes, end);
  if (offset < 0) return undefined;
  const packet = newPacket(6, walkedProtocol, bytes.subarray(8, 24), bytes.subarray(24, 40));
  if (walkedFirstFragment) fillTransport(packet, bytes, offset, end, true);
  return packet;
}

/**
 * The transport payload of a packet, e.g. the DNS message of a UDP datagram:
 * the bytes after a transport header of `transportHeaderLength` bytes, or
 * `undefined` when the packet is malformed, a later fragment, or too short.
 */
export function transportPayload(bytes: Uint8Array, transportHeaderLength: number): Uint8Array | undefined {
  if (bytes.length < 1) return undefined;
  const version = bytes[0] >> 4;
  let offset: number;
  let end: number;
  if (version === 4) {
    if (bytes.length < 20) return undefined;
    offset = (bytes[0] & 0x0f) * 4;
    const totalLength = (bytes[2] << 8) | bytes[3];
    if (offset < 20 || totalLength < offset) return undefined;
    if ((((bytes[6] & 0x1f) << 8) | bytes[7]) !== 0) return undefined;
    end = totalLength < bytes.length ? totalLength : bytes.length;
  } else if (version === 6) {
    if (bytes.length < IPV6_HEADER_LENGTH) return undefined;
    end = ipv6End(bytes);
    offset = walkIPv6(bytes, end);
    if (offset < 0 || !walkedFirstFragment) return undefined;
  } else {
    return undefined;
  }
  if (offset + transportHeaderLength > end) return undefined;
  return bytes.subarray(offset + transportHeaderLength, end);
}

function newPacket(family: 4 | 6, protocol: number, src: Uint8Array, dst: Uint8Array): Packet {
  // One literal with every field, so all packets share a single hidden class.
  return { family, protocol, src, dst, srcPort: 0, dstPort: 0, icmpType: 0, icmpCode: 0 };
}

function fillTransport(packet: Packet, bytes: Uint8Array, offset: number, end: number, v6: boolean): void {
  const protocol = packet.protocol;
  if (protocol === Protocol.TCP || protocol === Protocol.UDP || protocol === Protocol.SCTP) {
    // The three share the layout of their first four bytes: source port, destination port.
    if (offset + 4 > end) return;
    packet.srcPort = (bytes[offset] << 8) | bytes[offset + 1];
    packet.dstPort = (bytes[offset + 2] << 8) | bytes[offset + 3];
  } else if ((protocol === Protocol.ICMP && !v6) || (protocol === Protocol.ICMPv6 && v6)) {
    if (offset + 2 > end) return;
    packet.icmpType = bytes[offset];
    packet.icmpCode = bytes[offset + 1];
  }
}
