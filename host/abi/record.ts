// The ABI's 64-byte decision record (sdk/ABI.md, "The decision record"): its
// layout with a name for every field, and the packet encoders. A record is
// encoded once per packet and copied into each stage's batch area; only the
// direction byte changes between the egress and ingress walks. Every byte is
// written field by field: this runs once per packet, and `fill` plus
// `set(subarray)` cost more than the stores (the subarrays are allocations).
// The SDK reads the same offsets from `sdk/decision.ts`; test/abi-tables.test.ts
// holds both to the table in ABI.md.
import type { Packet } from '../contract.js';

export const RECORD_SIZE = 64;
/**
 * The most records the host puts in one `kwp_decide` call (fewer when the
 * module's kwp_batch_capacity is smaller): the call's fuel is fuelPerDecision
 * times the count, so the sandbox limits are checked against this many.
 */
export const MAX_RECORDS_PER_CALL = 64;
/** u8: 0 egress (the subject is the source pod), 1 ingress (the destination). */
export const OFF_DIRECTION = 0;
/** u8: 4 or 6. */
export const OFF_FAMILY = 1;
/** u8: IANA protocol number. */
export const OFF_PROTOCOL = 2;
/** u8: flag bits (RecordFlag), ABI 1.2; 0 before. */
export const OFF_FLAGS = 3;
/** u16: 0 when the protocol has no ports. */
export const OFF_SRC_PORT = 4;
export const OFF_DST_PORT = 6;
export const OFF_ICMP_TYPE = 8;
export const OFF_ICMP_CODE = 9;
/** u32: PodInfo id, 0 when the address is not a known pod. */
export const OFF_SRC_POD = 12;
export const OFF_DST_POD = 16;
/** u8[16]: IPv4 in the first 4 bytes. */
export const OFF_SRC_ADDR = 20;
export const OFF_DST_ADDR = 36;
/** Result, u8: the module's verdict (host/abi/verdict.ts). */
export const OFF_VERDICT = 52;
/** Result, u32: the module's reason code, 0 for none; kwp_explain turns it into text. */
export const OFF_REASON = 56;
/** Result, u32 (ABI 1.3): the module's rule code, 0 for none; kwp_attribution turns (reason, rule) into text. Reserved (0) before. */
export const OFF_RULE = 60;
/** Bytes of an address field. */
export const ADDRESS_SIZE = 16;

/** The bits of the flags byte. */
export const RecordFlag = {
  /** The source reached itself through a Service (docs/semantics.md, "Hairpin"). */
  ServiceHairpin: 1,
} as const;

/** The values of the direction byte. */
export const RecordDirection = { Egress: 0, Ingress: 1 } as const;

/**
 * ABI 1.4, `kwp_decide_pair` only: the direction byte's value asking for both
 * directions of the record (the egress answer in the record, the ingress
 * answer in the record's entry of the pair area). 0 and 1 mean what they mean
 * in `kwp_decide`.
 */
export const DIRECTION_BOTH = 2;
/** Bytes per entry of the pair area (`kwp_pair_results`): one per batch record. */
export const PAIR_RESULT_SIZE = 16;
/** In a pair area entry, u8: the ingress verdict. */
export const PAIR_OFF_VERDICT = 0;
/** In a pair area entry, u32: the ingress reason code. */
export const PAIR_OFF_REASON = 4;
/** In a pair area entry, u32: the ingress rule code. */
export const PAIR_OFF_RULE = 8;

/** The reason code of the record at `offset`, little-endian. */
export function readReason(bytes: Uint8Array, offset: number): number {
  const p = offset + OFF_REASON;
  return (bytes[p] | (bytes[p + 1] << 8) | (bytes[p + 2] << 16) | (bytes[p + 3] << 24)) >>> 0;
}

/** The rule code of the record at `offset`, little-endian (ABI 1.3; a record of an older module holds 0 or garbage here). */
export function readRule(bytes: Uint8Array, offset: number): number {
  const p = offset + OFF_RULE;
  return (bytes[p] | (bytes[p + 1] << 8) | (bytes[p + 2] << 16) | (bytes[p + 3] << 24)) >>> 0;
}

export function encodeRecord(out: Uint8Array, offset: number, packet: Packet, srcPodId: number, dstPodId: number): void {
  const o = offset;
  out[o + OFF_DIRECTION] = 0;
  out[o + OFF_FAMILY] = packet.family;
  out[o + OFF_PROTOCOL] = packet.protocol;
  out[o + OFF_FLAGS] = packet.serviceHairpin ? RecordFlag.ServiceHairpin : 0;
  out[o + OFF_SRC_PORT] = packet.srcPort & 0xff;
  out[o + OFF_SRC_PORT + 1] = packet.srcPort >>> 8;
  out[o + OFF_DST_PORT] = packet.dstPort & 0xff;
  out[o + OFF_DST_PORT + 1] = packet.dstPort >>> 8;
  out[o + OFF_ICMP_TYPE] = packet.icmpType;
  out[o + OFF_ICMP_CODE] = packet.icmpCode;
  out[o + OFF_ICMP_CODE + 1] = 0;
  out[o + OFF_ICMP_CODE + 2] = 0;
  writeU32(out, o + OFF_SRC_POD, srcPodId);
  writeU32(out, o + OFF_DST_POD, dstPodId);
  writeAddress(out, o + OFF_SRC_ADDR, packet.src);
  writeAddress(out, o + OFF_DST_ADDR, packet.dst);
  for (let p = o + OFF_VERDICT; p < o + RECORD_SIZE; p++) out[p] = 0;
}

/** 16 bytes: the address, zero-padded (IPv4 in the first 4). */
function writeAddress(out: Uint8Array, p: number, address: Uint8Array): void {
  const n = address.length < ADDRESS_SIZE ? address.length : ADDRESS_SIZE;
  let i = 0;
  for (; i < n; i++) out[p + i] = address[i];
  for (; i < ADDRESS_SIZE; i++) out[p + i] = 0;
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
  // Word k holds bytes 4k..4k+3: direction, family, protocol, flags.
  out[w + (OFF_DIRECTION >> 2)] = (packet.family << ((OFF_FAMILY & 3) << 3)) | (packet.protocol << ((OFF_PROTOCOL & 3) << 3))
    | (packet.serviceHairpin ? RecordFlag.ServiceHairpin << ((OFF_FLAGS & 3) << 3) : 0);
  out[w + (OFF_SRC_PORT >> 2)] = (packet.srcPort & 0xffff) | ((packet.dstPort & 0xffff) << ((OFF_DST_PORT & 3) << 3));
  out[w + (OFF_ICMP_TYPE >> 2)] = (packet.icmpType & 0xff) | ((packet.icmpCode & 0xff) << ((OFF_ICMP_CODE & 3) << 3));
  out[w + (OFF_SRC_POD >> 2)] = srcPodId;
  out[w + (OFF_DST_POD >> 2)] = dstPodId;
  writeAddressWords(out, w + (OFF_SRC_ADDR >> 2), packet.src);
  writeAddressWords(out, w + (OFF_DST_ADDR >> 2), packet.dst);
  // The results and the reserved tail.
  for (let i = OFF_VERDICT >> 2; i < RECORD_SIZE >> 2; i++) out[w + i] = 0;
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
