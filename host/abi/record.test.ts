import { describe, it, expect } from 'vitest';
import { encodeRecord, encodeRecordWords, RECORD_SIZE } from './record.js';
import type { Packet } from '../contract.js';

const v4: Packet = { family: 4, protocol: 6, src: new Uint8Array([10, 1, 2, 3]), dst: new Uint8Array([192, 168, 200, 254]), srcPort: 54321, dstPort: 8080, icmpType: 0, icmpCode: 0 };
const v6: Packet = {
  family: 6, protocol: 17, src: Uint8Array.from({ length: 16 }, (_, i) => 0xf0 + i), dst: Uint8Array.from({ length: 16 }, (_, i) => 255 - i),
  srcPort: 1, dstPort: 65535, icmpType: 0, icmpCode: 0,
};
const ping: Packet = { ...v4, protocol: 1, srcPort: 0, dstPort: 0, icmpType: 8, icmpCode: 3 };
const hairpin: Packet = { ...v4, dst: v4.src, serviceHairpin: true };

describe('the batched record encoder', () => {
  it.each([['IPv4 TCP', v4], ['IPv6 UDP', v6], ['ICMP', ping], ['a Service hairpin', hairpin]])('writes the same 64 bytes as the byte encoder for %s, over whatever was there', (_, packet) => {
    const bytes = new Uint8Array(RECORD_SIZE * 2).fill(0xaa);
    const words = new Uint32Array(bytes.buffer);
    encodeRecordWords(words, bytes, RECORD_SIZE >> 2, packet, 0xdeadbeef, 7);
    const expected = new Uint8Array(RECORD_SIZE).fill(0x55);
    encodeRecord(expected, 0, packet, 0xdeadbeef, 7);
    expect([...bytes.subarray(RECORD_SIZE)]).toEqual([...expected]);
    expect(bytes.subarray(0, RECORD_SIZE).every((b) => b === 0xaa)).toBe(true);
  });
});

describe('the record flags byte', () => {
  it('carries the Service hairpin bit at offset 3 and nothing for a pod reaching its own address', () => {
    const rec = new Uint8Array(RECORD_SIZE);
    encodeRecord(rec, 0, hairpin, 5, 5);
    expect(rec[3]).toBe(1);
    encodeRecord(rec, 0, { ...hairpin, serviceHairpin: false }, 5, 5);
    expect(rec[3]).toBe(0);
  });
});
