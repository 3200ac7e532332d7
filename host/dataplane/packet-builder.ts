// Builds raw IPv4/IPv6 packets from header fields. The kernel here has no SCTP
// sockets and tests should not depend on what a live stack sends, so the
// parser's tests, the fuzzers and the benchmarks craft their packets with this.

import { parseIP } from '../net/ip.js';

export interface PacketSpec {
  src: string;
  dst: string;
  /** IANA protocol number of the transport header. */
  protocol: number;
  srcPort?: number;
  dstPort?: number;
  icmpType?: number;
  icmpCode?: number;
  /** IPv6 only: extension headers to insert, by IANA number (0, 43, 44, 51, 60), in order. */
  extensions?: number[];
  /** Set a non-zero fragment offset (IPv4 header, or the IPv6 fragment header). */
  laterFragment?: boolean;
  /** Bytes after the transport header. */
  payload?: Uint8Array;
}

function ipBytes(text: string): Uint8Array {
  const parsed = parseIP(text);
  if (!parsed) throw new Error(`packet-builder: not an IP address: ${text}`);
  return parsed.bytes;
}

function transportHeader(spec: PacketSpec): Uint8Array {
  const { protocol } = spec;
  const header = new Uint8Array(protocol === 6 ? 20 : protocol === 132 ? 12 : 8);
  if (protocol === 6 || protocol === 17 || protocol === 132) {
    const view = new DataView(header.buffer);
    view.setUint16(0, spec.srcPort ?? 0);
    view.setUint16(2, spec.dstPort ?? 0);
    if (protocol === 6) header[12] = 5 << 4; // data offset
  } else {
    header[0] = spec.icmpType ?? 0;
    header[1] = spec.icmpCode ?? 0;
  }
  return header;
}

export function buildPacket(spec: PacketSpec): Uint8Array {
  const src = ipBytes(spec.src);
  const dst = ipBytes(spec.dst);
  if (src.length !== dst.length) throw new Error('packet-builder: src and dst are of different families');
  const transport = transportHeader(spec);
  const payload = spec.payload ?? new Uint8Array(0);
  if (src.length === 4) return buildIPv4(spec, src, dst, transport, payload);
  return buildIPv6(spec, src, dst, transport, payload);
}

function buildIPv4(spec: PacketSpec, src: Uint8Array, dst: Uint8Array, transport: Uint8Array, payload: Uint8Array): Uint8Array {
  const total = 20 + transport.length + payload.length;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out[0] = 0x45;
  view.setUint16(2, total);
  if (spec.laterFragment) view.setUint16(6, 185); // offset 1480 bytes
  out[8] = 64;
  out[9] = spec.protocol;
  out.set(src, 12);
  out.set(dst, 16);
  out.set(transport, 20);
  out.set(payload, 20 + transport.length);
  return out;
}

function extensionHeader(kind: number, next: number, laterFragment: boolean): Uint8Array {
  if (kind === 44) {
    const header = new Uint8Array(8);
    header[0] = next;
    if (laterFragment) new DataView(header.buffer).setUint16(2, 185 << 3);
    return header;
  }
  if (kind === 51) {
    // AH with a 12-byte ICV: (payload length + 2) * 4 = 24 bytes.
    const header = new Uint8Array(24);
    header[0] = next;
    header[1] = 4;
    return header;
  }
  // Hop-by-hop, routing, destination options: 16 bytes, padded with PadN.
  const header = new Uint8Array(16);
  header[0] = next;
  header[1] = 1;
  header[2] = 1;
  header[3] = 12;
  return header;
}

function buildIPv6(spec: PacketSpec, src: Uint8Array, dst: Uint8Array, transport: Uint8Array, payload: Uint8Array): Uint8Array {
  const kinds = spec.extensions ?? [];
  const headers: Uint8Array[] = [];
  for (let i = 0; i < kinds.length; i++) {
    const next = i + 1 < kinds.length ? kinds[i + 1] : spec.protocol;
    headers.push(extensionHeader(kinds[i], next, spec.laterFragment ?? false));
  }
  const extLength = headers.reduce((sum, h) => sum + h.length, 0);
  const payloadLength = extLength + transport.length + payload.length;
  const out = new Uint8Array(40 + payloadLength);
  const view = new DataView(out.buffer);
  out[0] = 0x60;
  view.setUint16(4, payloadLength);
  out[6] = kinds.length > 0 ? kinds[0] : spec.protocol;
  out[7] = 64;
  out.set(src, 8);
  out.set(dst, 24);
  let offset = 40;
  for (const h of headers) {
    out.set(h, offset);
    offset += h.length;
  }
  out.set(transport, offset);
  out.set(payload, offset + transport.length);
  return out;
}
