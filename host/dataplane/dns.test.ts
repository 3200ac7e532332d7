import { describe, it, expect } from 'vitest';
import { parseDnsResponse } from './dns.js';
import { buildDnsResponse, queryName, type DnsResponseSpec } from './dns-builder.js';
import { seededRandom, randomBytes } from './seeded-random.js';

describe('parseDnsResponse', () => {
  it('reports an A record under its owner name', () => {
    const message = buildDnsResponse({
      question: { name: 'api.example.com', type: 'A' },
      answers: [{ name: 'api.example.com', type: 'A', address: '203.0.113.9', ttl: 300 }],
    });
    expect(parseDnsResponse(message)).toEqual([{ name: 'api.example.com', address: '203.0.113.9', ttl: 300 }]);
  });

  it('reports AAAA records in canonical IPv6 text', () => {
    const message = buildDnsResponse({
      question: { name: 'v6.example.com', type: 'AAAA' },
      answers: [{ name: 'v6.example.com', type: 'AAAA', address: '2001:0db8:0:0:0:0:0:0001', ttl: 60 }],
    });
    expect(parseDnsResponse(message)).toEqual([{ name: 'v6.example.com', address: '2001:db8::1', ttl: 60 }]);
  });

  it('lower-cases names so lookups do not depend on the resolver spelling', () => {
    const message = buildDnsResponse({
      question: { name: 'WWW.Example.COM', type: 'A' },
      answers: [{ name: 'WWW.Example.COM', type: 'A', address: '192.0.2.1', ttl: 5 }],
      compress: false,
    });
    expect(parseDnsResponse(message)?.[0].name).toBe('www.example.com');
  });

  it('also reports an address reached through a CNAME under the question name with the smallest TTL', () => {
    const message = buildDnsResponse({
      question: { name: 'www.example.com', type: 'A' },
      answers: [
        { name: 'www.example.com', type: 'CNAME', target: 'edge.cdn.example.net', ttl: 30 },
        { name: 'edge.cdn.example.net', type: 'A', address: '198.51.100.4', ttl: 600 },
        { name: 'edge.cdn.example.net', type: 'A', address: '198.51.100.5', ttl: 10 },
      ],
    });
    expect(parseDnsResponse(message)).toEqual([
      { name: 'edge.cdn.example.net', address: '198.51.100.4', ttl: 600 },
      { name: 'edge.cdn.example.net', address: '198.51.100.5', ttl: 10 },
      { name: 'www.example.com', address: '198.51.100.4', ttl: 30 },
      { name: 'www.example.com', address: '198.51.100.5', ttl: 10 },
    ]);
  });

  it('returns no answers for an NXDOMAIN response', () => {
    const message = buildDnsResponse({ question: { name: 'nope.example.com', type: 'A' }, answers: [], rcode: 3 });
    expect(parseDnsResponse(message)).toEqual([]);
  });

  it('returns undefined for a query (QR bit clear)', () => {
    const message = buildDnsResponse({ question: { name: 'a.example.com', type: 'A' }, answers: [] });
    message[2] &= 0x7f;
    expect(parseDnsResponse(message)).toBeUndefined();
  });

  it('returns undefined for a compression pointer that points at itself', () => {
    const message = buildDnsResponse({
      question: { name: 'a.example.com', type: 'A' },
      answers: [{ name: 'a.example.com', type: 'A', address: '192.0.2.1', ttl: 1 }],
    });
    // The answer's owner is a pointer right after the question; aim it at itself.
    const pointerAt = 12 + 'a.example.com'.length + 2 + 4;
    message[pointerAt] = 0xc0 | (pointerAt >> 8);
    message[pointerAt + 1] = pointerAt & 0xff;
    expect(parseDnsResponse(message)).toBeUndefined();
  });

  it('returns undefined when the answer count promises more records than the message holds', () => {
    const message = buildDnsResponse({
      question: { name: 'a.example.com', type: 'A' },
      answers: [{ name: 'a.example.com', type: 'A', address: '192.0.2.1', ttl: 1 }],
    });
    message[7] = 2;
    expect(parseDnsResponse(message)).toBeUndefined();
  });

  it('skips records of another class and A records of the wrong length', () => {
    const message = buildDnsResponse({
      question: { name: 'a.example.com', type: 'A' },
      answers: [
        { name: 'a.example.com', type: 'A', address: '192.0.2.1', ttl: 1 },
        { name: 'a.example.com', type: 'A', address: '192.0.2.2', ttl: 1 },
      ],
    });
    // First answer starts right after the question; its class field follows the 2-byte pointer and type.
    const firstAnswer = 12 + 'a.example.com'.length + 2 + 4;
    message[firstAnswer + 4] = 3; // class CH
    expect(parseDnsResponse(message)).toEqual([{ name: 'a.example.com', address: '192.0.2.2', ttl: 1 }]);
  });
});

describe('queryName', () => {
  it('reads the id, name and type of a query', () => {
    const message = buildDnsResponse({ id: 77, question: { name: 'svc.lab', type: 'AAAA' }, answers: [] });
    expect(queryName(message)).toEqual({ id: 77, name: 'svc.lab', type: 28 });
  });
});

describe('parseDnsResponse under fuzzing', () => {
  function randomSpec(random: () => number): DnsResponseSpec {
    const names = ['a.example.com', 'b.example.com', 'cdn.example.net', 'x.y'];
    const pick = () => names[Math.floor(random() * names.length)];
    const question = pick();
    const count = Math.floor(random() * 5);
    const answers: DnsResponseSpec['answers'] = [];
    for (let i = 0; i < count; i++) {
      const kind = random();
      const ttl = Math.floor(random() * 100000);
      if (kind < 0.4) answers.push({ name: i === 0 ? question : pick(), type: 'A', address: `10.0.${i}.${Math.floor(random() * 255)}`, ttl });
      else if (kind < 0.7) answers.push({ name: pick(), type: 'AAAA', address: `fd00::${i + 1}`, ttl });
      else answers.push({ name: pick(), type: 'CNAME', target: pick(), ttl });
    }
    return { question: { name: question, type: 'A' }, answers, compress: random() < 0.5 };
  }

  it('parses 5000 generated responses to exactly their address records', () => {
    const random = seededRandom(1234);
    for (let i = 0; i < 5000; i++) {
      const spec = randomSpec(random);
      const parsed = parseDnsResponse(buildDnsResponse(spec))!;
      const addressRecords = spec.answers.filter((a) => a.type !== 'CNAME');
      // The first records are the direct ones, in message order; aliases follow.
      expect(parsed.slice(0, addressRecords.length).map((a) => a.name)).toEqual(addressRecords.map((a) => a.name));
    }
  });

  it('never throws on 30000 random, truncated or corrupted messages', () => {
    const random = seededRandom(99);
    let wellFormed = 0;
    for (let i = 0; i < 30_000; i++) {
      let message: Uint8Array;
      const mode = i % 3;
      if (mode === 0) message = randomBytes(random, Math.floor(random() * 200));
      else {
        const valid = buildDnsResponse(randomSpec(random));
        if (mode === 1) message = valid.subarray(0, Math.floor(random() * valid.length));
        else {
          message = valid.slice();
          for (let flips = 0; flips < 3; flips++) message[Math.floor(random() * message.length)] = Math.floor(random() * 256);
        }
      }
      const parsed = parseDnsResponse(message);
      if (parsed) {
        wellFormed++;
        for (const answer of parsed) expect(answer.name.length).toBeLessThanOrEqual(255);
      }
    }
    expect(wellFormed).toBeGreaterThan(100);
  });
});
