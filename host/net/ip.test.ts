import { describe, it, expect } from 'vitest';
import { formatIP, ipv4ToU32, normalizeIP, parseIP } from './ip.js';

describe('parseIP', () => {
  it.each([
    ['10.0.0.1', 4, [10, 0, 0, 1]],
    ['0.0.0.0', 4, [0, 0, 0, 0]],
    ['255.255.255.255', 4, [255, 255, 255, 255]],
    ['::', 6, new Array(16).fill(0)],
    ['::1', 6, [...new Array(15).fill(0), 1]],
    ['2001:db8::1', 6, [0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 1]],
    ['fe80::', 6, [0xfe, 0x80, ...new Array(14).fill(0)]],
    ['1:2:3:4:5:6:7:8', 6, [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]],
    ['::ffff:192.0.2.1', 6, [...new Array(10).fill(0), 0xff, 0xff, 192, 0, 2, 1]],
    ['64:ff9b::10.1.2.3', 6, [0, 0x64, 0xff, 0x9b, ...new Array(8).fill(0), 10, 1, 2, 3]],
    ['2001:DB8::A', 6, [0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 10]],
  ])('%s parses as IPv%s with the expected bytes', (text, family, bytes) => {
    const parsed = parseIP(text);
    expect(parsed?.family).toBe(family);
    expect(Array.from(parsed!.bytes)).toEqual(bytes);
  });

  it.each([
    '',
    '10.0.0',
    '10.0.0.256',
    '10.0.0.01',
    '10.0.0.1/32',
    '10.0.0.1.2',
    'a.b.c.d',
    ':::',
    '1::2::3',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4::5:6:7:8',
    '12345::1',
    'fe80::1%eth0',
    '::ffff:1.2.3',
    '1.2.3.4::',
    '2001:db8::/64',
    'default/web',
  ])('%j is not an address', (text) => {
    expect(parseIP(text)).toBeUndefined();
  });
});

describe('formatIP', () => {
  it.each([
    ['10.1.2.3', '10.1.2.3'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
    ['::FFFF:10.0.0.1', '::ffff:10.0.0.1'],
    ['fe80:0:0:0:0:0:0:0', 'fe80::'],
  ])('%s is written as %s (RFC 5952)', (input, expected) => {
    expect(formatIP(parseIP(input)!.bytes)).toBe(expected);
    expect(normalizeIP(input)).toBe(expected);
  });

  it('refuses a byte array that is neither 4 nor 16 long', () => {
    expect(() => formatIP(new Uint8Array(5))).toThrow(/4 or 16 bytes/);
  });
});

describe('ipv4ToU32', () => {
  it('reads the address big-endian as an unsigned number', () => {
    expect(ipv4ToU32(Uint8Array.of(192, 168, 1, 2))).toBe(0xc0a80102);
    expect(ipv4ToU32(Uint8Array.of(255, 255, 255, 255))).toBe(0xffffffff);
  });

  it('reads at an offset inside a larger buffer', () => {
    expect(ipv4ToU32(Uint8Array.of(9, 9, 10, 0, 0, 7), 2)).toBe(0x0a000007);
  });
});
