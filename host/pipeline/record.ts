// Packet → the ABI's 64-byte decision record (ABI.md). Encoded once per packet
// and copied into each stage's batch area; only the direction byte changes
// between the egress and ingress walks. Every byte is written field by field:
// this runs once per packet, and `fill` plus `set(subarray)` cost more than
// the stores (the subarrays are allocations).
import { RecordFlag, type Packet } from '../contract.js';

export const RECORD_SIZE = 64;

export function encodeRecord(out: Uint8Array, offset: number, packet: Packet, srcPodId: number, dstPodId: number): void {
  const o = offset;
  out[o] = 0;
  out[o + 1] = packet.family;
  out[o + 2] = packet.protocol;
  out[o + 3] = packet.serviceHairpin ? RecordFlag.ServiceHairpin : 0;
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

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * `encodeRecord` for the batched path, through a 32-bit view of the same
 * buffer (`wordOffset` = byte offset / 4): sixteen word stores instead of
 * sixty-four byte stores. The ABI is little-endian, so on a big-endian host
 * it falls back to the byte-wise encoder.
 */
export function encodeRecordWords(out: Uint32Array, bytes: Uint8Array, wordOffset: number, packet: Packet, srcPodId: number, dstPodId: number): void {
  if (!LITTLE_ENDIAN) {
    encodeRecord(bytes, wordOffset * 4, packet, srcPodId, dstPodId);
    return;
  }
  const w = wordOffset;
  out[w] = (packet.family << 8) | (packet.protocol << 16) | (packet.serviceHairpin ? RecordFlag.ServiceHairpin << 24 : 0);
  out[w + 1] = (packet.srcPort & 0xffff) | ((packet.dstPort & 0xffff) << 16);
  out[w + 2] = (packet.icmpType & 0xff) | ((packet.icmpCode & 0xff) << 8);
  out[w + 3] = srcPodId;
  out[w + 4] = dstPodId;
  writeAddressWords(out, w + 5, packet.src);
  writeAddressWords(out, w + 9, packet.dst);
  out[w + 13] = 0;
  out[w + 14] = 0;
  out[w + 15] = 0;
}

function writeAddressWords(out: Uint32Array, w: number, a: Uint8Array): void {
  if (a.length === 4) {
    out[w] = a[0] | (a[1] << 8) | (a[2] << 16) | (a[3] << 24);
    out[w + 1] = 0;
    out[w + 2] = 0;
    out[w + 3] = 0;
    return;
  }
  for (let i = 0; i < 4; i++) {
    const p = i * 4;
    out[w + i] = p + 3 < a.length ? a[p] | (a[p + 1] << 8) | (a[p + 2] << 16) | (a[p + 3] << 24) : 0;
  }
}
