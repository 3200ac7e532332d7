// Builds DNS response messages: for the DNS parser's tests and fuzzer, and for
// the lab's tiny DNS responder that the end-to-end tests query.

import { parseIP } from '../net/ip.js';

export type DnsRecordSpec =
  | { name: string; type: 'A' | 'AAAA'; address: string; ttl: number }
  | { name: string; type: 'CNAME'; target: string; ttl: number };

export interface DnsResponseSpec {
  id?: number;
  question: { name: string; type: 'A' | 'AAAA' };
  answers: DnsRecordSpec[];
  rcode?: number;
  /** Write owner names as a pointer to the question's name when they match (default true). */
  compress?: boolean;
}

const TYPE_CODES = { A: 1, CNAME: 5, AAAA: 28 } as const;

function encodeName(name: string): number[] {
  const out: number[] = [];
  for (const label of name.split('.').filter((l) => l.length > 0)) {
    out.push(label.length, ...Array.from(label, (c) => c.charCodeAt(0)));
  }
  out.push(0);
  return out;
}

const u16 = (n: number) => [(n >> 8) & 0xff, n & 0xff];
const u32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];

export function buildDnsResponse(spec: DnsResponseSpec): Uint8Array {
  const compress = spec.compress ?? true;
  const bytes: number[] = [
    ...u16(spec.id ?? 0x1234),
    0x81, 0x80 | (spec.rcode ?? 0), // QR, RD, RA
    ...u16(1),
    ...u16(spec.answers.length),
    ...u16(0),
    ...u16(0),
  ];
  const questionOffset = bytes.length;
  bytes.push(...encodeName(spec.question.name), ...u16(TYPE_CODES[spec.question.type]), ...u16(1));
  for (const record of spec.answers) {
    if (compress && record.name.toLowerCase() === spec.question.name.toLowerCase()) bytes.push(0xc0 | (questionOffset >> 8), questionOffset & 0xff);
    else bytes.push(...encodeName(record.name));
    let data: number[];
    if (record.type === 'CNAME') data = encodeName(record.target);
    else {
      const parsed = parseIP(record.address);
      if (!parsed) throw new Error(`dns-builder: not an IP address: ${record.address}`);
      data = Array.from(parsed.bytes);
    }
    bytes.push(...u16(TYPE_CODES[record.type]), ...u16(1), ...u32(record.ttl), ...u16(data.length), ...data);
  }
  return Uint8Array.from(bytes);
}

/** The question name of a DNS query, for the lab responder; undefined when unreadable. */
export function queryName(message: Uint8Array): { id: number; name: string; type: number } | undefined {
  if (message.length < 17) return undefined;
  const labels: string[] = [];
  let offset = 12;
  while (offset < message.length && message[offset] !== 0) {
    const size = message[offset];
    if (size > 63 || offset + 1 + size > message.length) return undefined;
    labels.push(String.fromCharCode(...message.subarray(offset + 1, offset + 1 + size)));
    offset += size + 1;
  }
  if (offset + 4 >= message.length) return undefined;
  return { id: (message[0] << 8) | message[1], name: labels.join('.'), type: (message[offset + 1] << 8) | message[offset + 2] };
}
