import { describe, it, expect } from 'vitest';
import { parsePacket } from './packet-parser.js';
import { buildPacket, type PacketSpec } from './packet-builder.js';
import { seededRandom, randomBytes } from './seeded-random.js';
import { formatIP } from '../net/ip.js';
import type { Packet } from '../contract.js';

function summary(packet: Packet | undefined) {
  if (!packet) return undefined;
  return {
    family: packet.family,
    protocol: packet.protocol,
    src: formatIP(packet.src),
    dst: formatIP(packet.dst),
    srcPort: packet.srcPort,
    dstPort: packet.dstPort,
    icmpType: packet.icmpType,
    icmpCode: packet.icmpCode,
  };
}

const cases: Array<{ name: string; spec: PacketSpec; expected: Partial<NonNullable<ReturnType<typeof summary>>> }> = [
  {
    name: 'an IPv4 TCP SYN yields its addresses and ports',
    spec: { src: '10.244.1.2', dst: '10.244.2.3', protocol: 6, srcPort: 40000, dstPort: 80 },
    expected: { family: 4, protocol: 6, src: '10.244.1.2', dst: '10.244.2.3', srcPort: 40000, dstPort: 80 },
  },
  {
    name: 'an IPv4 UDP datagram yields its ports',
    spec: { src: '192.0.2.1', dst: '198.51.100.7', protocol: 17, srcPort: 53, dstPort: 65535 },
    expected: { family: 4, protocol: 17, srcPort: 53, dstPort: 65535 },
  },
  {
    name: 'an IPv4 SCTP packet yields the ports of its common header',
    spec: { src: '10.0.0.1', dst: '10.0.0.2', protocol: 132, srcPort: 3868, dstPort: 36412 },
    expected: { family: 4, protocol: 132, srcPort: 3868, dstPort: 36412 },
  },
  {
    name: 'an IPv6 SCTP packet behind a destination-options header yields its ports',
    spec: { src: 'fd00::1', dst: 'fd00::2', protocol: 132, srcPort: 2905, dstPort: 9899, extensions: [60] },
    expected: { family: 6, protocol: 132, src: 'fd00::1', dst: 'fd00::2', srcPort: 2905, dstPort: 9899 },
  },
  {
    name: 'an ICMP echo request yields type 8 code 0 and no ports',
    spec: { src: '10.0.0.1', dst: '10.0.0.2', protocol: 1, icmpType: 8, icmpCode: 0 },
    expected: { protocol: 1, icmpType: 8, icmpCode: 0, srcPort: 0, dstPort: 0 },
  },
  {
    name: 'an ICMP port-unreachable yields type 3 code 3',
    spec: { src: '10.0.0.1', dst: '10.0.0.2', protocol: 1, icmpType: 3, icmpCode: 3 },
    expected: { icmpType: 3, icmpCode: 3 },
  },
  {
    name: 'an ICMPv6 echo request yields type 128',
    spec: { src: 'fd00::1', dst: 'fd00::2', protocol: 58, icmpType: 128, icmpCode: 0 },
    expected: { family: 6, protocol: 58, icmpType: 128 },
  },
  {
    name: 'an IPv6 TCP packet behind every kind of extension header yields its ports',
    spec: { src: '2001:db8::a', dst: '2001:db8::b', protocol: 6, srcPort: 1234, dstPort: 443, extensions: [0, 43, 51, 44, 60] },
    expected: { family: 6, protocol: 6, srcPort: 1234, dstPort: 443 },
  },
  {
    name: 'a later IPv4 fragment keeps its protocol but reports no ports',
    spec: { src: '10.0.0.1', dst: '10.0.0.2', protocol: 17, srcPort: 5, dstPort: 6, laterFragment: true },
    expected: { protocol: 17, srcPort: 0, dstPort: 0 },
  },
  {
    name: 'a later IPv6 fragment keeps its protocol but reports no ports',
    spec: { src: 'fd00::1', dst: 'fd00::2', protocol: 6, srcPort: 5, dstPort: 6, extensions: [44], laterFragment: true },
    expected: { protocol: 6, srcPort: 0, dstPort: 0 },
  },
  {
    name: 'an IPv4 packet of an unknown protocol yields the protocol number and zeros',
    spec: { src: '10.0.0.1', dst: '10.0.0.2', protocol: 47 },
    expected: { protocol: 47, srcPort: 0, dstPort: 0, icmpType: 0, icmpCode: 0 },
  },
];

describe('parsePacket', () => {
  it.each(cases)('$name', ({ spec, expected }) => {
    expect(summary(parsePacket(buildPacket(spec)))).toMatchObject(expected);
  });

  it('returns address views into the input instead of copies', () => {
    const bytes = buildPacket({ src: '10.0.0.1', dst: '10.0.0.2', protocol: 6, srcPort: 1, dstPort: 2 });
    const packet = parsePacket(bytes)!;
    expect(packet.src.buffer).toBe(bytes.buffer);
    expect(packet.dst.byteOffset).toBe(bytes.byteOffset + 16);
  });

  it('honours IPv4 options when finding the transport header', () => {
    const plain = buildPacket({ src: '10.0.0.1', dst: '10.0.0.2', protocol: 17, srcPort: 7, dstPort: 9 });
    const withOptions = new Uint8Array(plain.length + 4);
    withOptions.set(plain.subarray(0, 20), 0);
    withOptions.set([1, 1, 1, 0], 20); // NOP NOP NOP EOL
    withOptions.set(plain.subarray(20), 24);
    withOptions[0] = 0x46;
    new DataView(withOptions.buffer).setUint16(2, withOptions.length);
    expect(summary(parsePacket(withOptions))).toMatchObject({ srcPort: 7, dstPort: 9 });
  });

  it('ignores trailing bytes beyond the IPv4 total length', () => {
    const bytes = buildPacket({ src: '10.0.0.1', dst: '10.0.0.2', protocol: 6, srcPort: 1, dstPort: 2 });
    // Cut the total length to the IP header only: the ports lie beyond it.
    const clipped = bytes.slice();
    new DataView(clipped.buffer).setUint16(2, 20);
    expect(summary(parsePacket(clipped))).toMatchObject({ protocol: 6, srcPort: 0, dstPort: 0 });
  });

  it.each([
    ['an empty buffer', new Uint8Array(0)],
    ['a version 5 header', Uint8Array.from([0x50, ...new Array(39).fill(0)])],
    ['an IPv4 header shorter than 20 bytes', buildPacket({ src: '10.0.0.1', dst: '10.0.0.2', protocol: 6 }).subarray(0, 19)],
    ['an IPv4 header length below 5 words', Uint8Array.from([0x44, ...new Array(39).fill(0)])],
    ['an IPv6 header shorter than 40 bytes', buildPacket({ src: 'fd00::1', dst: 'fd00::2', protocol: 6 }).subarray(0, 39)],
  ])('returns undefined for %s', (_name, bytes) => {
    expect(parsePacket(bytes)).toBeUndefined();
  });

  it('returns undefined for an IPv6 chain of extension headers that runs past the packet', () => {
    const bytes = buildPacket({ src: 'fd00::1', dst: 'fd00::2', protocol: 6, srcPort: 1, dstPort: 2, extensions: [0] });
    bytes[41] = 200; // hop-by-hop length far beyond the buffer
    expect(parsePacket(bytes)).toBeUndefined();
  });

  it('returns undefined for an endless chain of extension headers', () => {
    const bytes = buildPacket({ src: 'fd00::1', dst: 'fd00::2', protocol: 60, extensions: new Array(20).fill(60) });
    expect(parsePacket(bytes)).toBeUndefined();
  });
});

describe('parsePacket under fuzzing', () => {
  const protocols = [1, 6, 17, 58, 132, 47];
  const extensionKinds = [0, 43, 44, 51, 60];

  function randomSpec(random: () => number): PacketSpec {
    const v6 = random() < 0.5;
    const protocol = protocols[Math.floor(random() * protocols.length)];
    const port = () => Math.floor(random() * 65536);
    const extensions = v6 ? Array.from({ length: Math.floor(random() * 4) }, () => extensionKinds[Math.floor(random() * 5)]) : undefined;
    return {
      src: v6 ? 'fd00::10' : '10.244.0.10',
      dst: v6 ? 'fd00::20' : '10.244.0.20',
      protocol: v6 && protocol === 1 ? 58 : !v6 && protocol === 58 ? 1 : protocol,
      srcPort: port(),
      dstPort: port(),
      icmpType: Math.floor(random() * 256),
      icmpCode: Math.floor(random() * 256),
      extensions,
      payload: randomBytes(random, Math.floor(random() * 64)),
    };
  }

  it('never throws on 30000 random buffers and returns well-formed packets when it accepts one', () => {
    const random = seededRandom(0x5eed);
    let accepted = 0;
    for (let i = 0; i < 30_000; i++) {
      const bytes = randomBytes(random, Math.floor(random() * 120));
      // Bias half the cases towards a valid version nibble so the deeper paths get exercised.
      if (bytes.length > 0 && i % 2 === 0) bytes[0] = (i % 4 === 0 ? 0x40 : 0x60) | (bytes[0] & 0x0f);
      const packet = parsePacket(bytes);
      if (packet) {
        accepted++;
        expect(packet.src.length).toBe(packet.family === 4 ? 4 : 16);
        expect(packet.dst.length).toBe(packet.family === 4 ? 4 : 16);
        expect(packet.srcPort).toBeGreaterThanOrEqual(0);
        expect(packet.dstPort).toBeLessThan(65536);
      }
    }
    // The biased half must reach the accepting paths, or this fuzzer tests nothing.
    expect(accepted).toBeGreaterThan(1000);
  });

  it('parses every prefix of 3000 valid packets as either undefined or the same addresses and protocol', () => {
    const random = seededRandom(42);
    for (let i = 0; i < 3000; i++) {
      const spec = randomSpec(random);
      const bytes = buildPacket(spec);
      const full = summary(parsePacket(bytes))!;
      expect(full.srcPort).toBe([6, 17, 132].includes(spec.protocol) && !spec.laterFragment ? spec.srcPort : 0);
      for (let cut = 0; cut < bytes.length; cut += 1 + Math.floor(random() * 6)) {
        const prefix = summary(parsePacket(bytes.subarray(0, cut)));
        if (prefix === undefined) continue;
        expect(prefix.src).toBe(full.src);
        expect(prefix.protocol).toBe(full.protocol);
        // A cut transport header is all or nothing: never half a port.
        expect([0, full.dstPort]).toContain(prefix.dstPort);
      }
    }
  });

  it('survives 20000 single-byte corruptions of valid packets', () => {
    const random = seededRandom(7);
    let parsed = 0;
    for (let i = 0; i < 20_000; i++) {
      const bytes = buildPacket(randomSpec(random));
      bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
      if (parsePacket(bytes)) parsed++;
    }
    expect(parsed).toBeGreaterThan(0);
  });
});
