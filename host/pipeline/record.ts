// Packet → the ABI's 64-byte decision record (ABI.md). Encoded once per packet
// and copied into each stage's batch area; only the direction byte changes
// between the egress and ingress walks.
import type { Packet } from '../contract.js';

export const RECORD_SIZE = 64;

export function encodeRecord(out: Uint8Array, offset: number, packet: Packet, srcPodId: number, dstPodId: number): void {
  out.fill(0, offset, offset + RECORD_SIZE);
  out[offset + 1] = packet.family;
  out[offset + 2] = packet.protocol;
  out[offset + 4] = packet.srcPort & 0xff;
  out[offset + 5] = packet.srcPort >>> 8;
  out[offset + 6] = packet.dstPort & 0xff;
  out[offset + 7] = packet.dstPort >>> 8;
  out[offset + 8] = packet.icmpType;
  out[offset + 9] = packet.icmpCode;
  writeU32(out, offset + 12, srcPodId);
  writeU32(out, offset + 16, dstPodId);
  out.set(packet.src.subarray(0, 16), offset + 20);
  out.set(packet.dst.subarray(0, 16), offset + 36);
}

function writeU32(out: Uint8Array, p: number, v: number): void {
  out[p] = v & 0xff;
  out[p + 1] = (v >>> 8) & 0xff;
  out[p + 2] = (v >>> 16) & 0xff;
  out[p + 3] = v >>> 24;
}
