// Packet → the ABI's 64-byte decision record (ABI.md). Encoded once per packet
// and copied into each stage's batch area; only the direction byte changes
// between the egress and ingress walks. Every byte is written field by field:
// this runs once per packet, and `fill` plus `set(subarray)` cost more than
// the stores (the subarrays are allocations).
import type { Packet } from '../contract.js';

export const RECORD_SIZE = 64;

export function encodeRecord(out: Uint8Array, offset: number, packet: Packet, srcPodId: number, dstPodId: number): void {
  const o = offset;
  out[o] = 0;
  out[o + 1] = packet.family;
  out[o + 2] = packet.protocol;
  out[o + 3] = 0;
  out[o + 4] = packet.srcPort & 0xff;
  out[o + 5] = packet.srcPort >>> 8;
  out[o + 6] = packet.dstPort & 0xff;
  out[o + 7] = packet.dstPort >>> 8;
  out[o + 8] = packet.icmpType;
  out[o + 9] = packet.icmpCode;
  out[o + 10] = 0;
  out[o + 11] = 0;
  writeU32(out, o + 12, srcPodId);
  writeU32(out, o + 16, dstPodId);
  writeAddress(out, o + 20, packet.src);
  writeAddress(out, o + 36, packet.dst);
  for (let p = o + 52; p < o + RECORD_SIZE; p++) out[p] = 0;
}

/** 16 bytes: the address, zero-padded (IPv4 in the first 4). */
function writeAddress(out: Uint8Array, p: number, address: Uint8Array): void {
  const n = address.length < 16 ? address.length : 16;
  let i = 0;
  for (; i < n; i++) out[p + i] = address[i];
  for (; i < 16; i++) out[p + i] = 0;
}

function writeU32(out: Uint8Array, p: number, v: number): void {
  out[p] = v & 0xff;
  out[p + 1] = (v >>> 8) & 0xff;
  out[p + 2] = (v >>> 16) & 0xff;
  out[p + 3] = v >>> 24;
}
