// Reads the address records out of DNS responses seen on the DNS queue, so
// policies that name hosts (FQDN rules) can learn which IPs a name resolved to.
// Input comes straight off the wire from any pod, so it never throws and
// bounds every loop: compression pointers may only point backwards and a name
// may follow at most a fixed number of them.

import { formatIP } from '../net/ip.js';

export interface DnsAnswer {
  /** Lower-case, without the trailing dot. */
  name: string;
  /** Canonical text form of the A or AAAA record. */
  address: string;
  /** Seconds. */
  ttl: number;
}

const TYPE_A = 1;
const TYPE_CNAME = 5;
const TYPE_AAAA = 28;
const CLASS_IN = 1;
const HEADER_LENGTH = 12;
const MAX_NAME_LENGTH = 255;
const MAX_POINTER_JUMPS = 64;
/** No legitimate CNAME chain is longer; it bounds the alias walk on hostile input. */
const MAX_CNAME_CHAIN = 16;

interface NameRead {
  name: string;
  /** Offset just after the name in the record that holds it. */
  next: number;
}

function readName(message: Uint8Array, start: number): NameRead | undefined {
  const labels: string[] = [];
  let offset = start;
  let next = -1;
  let length = 0;
  let jumps = 0;
  for (;;) {
    if (offset >= message.length) return undefined;
    const size = message[offset];
    if (size === 0) {
      if (next < 0) next = offset + 1;
      break;
    }
    const kind = size & 0xc0;
    if (kind === 0xc0) {
      if (offset + 1 >= message.length) return undefined;
      const target = ((size & 0x3f) << 8) | message[offset + 1];
      // Pointers must go strictly backwards, which with the jump cap rules out loops.
      if (target >= offset || ++jumps > MAX_POINTER_JUMPS) return undefined;
      if (next < 0) next = offset + 2;
      offset = target;
      continue;
    }
    if (kind !== 0) return undefined; // 0x40 and 0x80 label types are obsolete or reserved
    if (offset + 1 + size > message.length) return undefined;
    length += size + 1;
    if (length > MAX_NAME_LENGTH) return undefined;
    let label = '';
    for (let i = offset + 1; i <= offset + size; i++) label += String.fromCharCode(message[i]);
    labels.push(label.toLowerCase());
    offset += size + 1;
  }
  return { name: labels.join('.'), next };
}

/**
 * The A/AAAA answers of a DNS response, or `undefined` when `message` is not a
 * well-formed response. When the question's name reaches an address through
 * CNAMEs in the same message, the address is also reported under the question's
 * name, with the smallest TTL along the chain.
 */
export function parseDnsResponse(message: Uint8Array): DnsAnswer[] | undefined {
  if (message.length < HEADER_LENGTH) return undefined;
  const isResponse = (message[2] & 0x80) !== 0;
  if (!isResponse) return undefined;
  const rcode = message[3] & 0x0f;
  if (rcode !== 0) return [];
  const questionCount = (message[4] << 8) | message[5];
  const answerCount = (message[6] << 8) | message[7];

  let offset = HEADER_LENGTH;
  const questions: string[] = [];
  for (let i = 0; i < questionCount; i++) {
    const read = readName(message, offset);
    if (!read || read.next + 4 > message.length) return undefined;
    questions.push(read.name);
    offset = read.next + 4;
  }

  const answers: DnsAnswer[] = [];
  const aliases = new Map<string, { target: string; ttl: number }>();
  for (let i = 0; i < answerCount; i++) {
    const read = readName(message, offset);
    if (!read || read.next + 10 > message.length) return undefined;
    const at = read.next;
    const type = (message[at] << 8) | message[at + 1];
    const klass = (message[at + 2] << 8) | message[at + 3];
    const ttl = ((message[at + 4] << 24) | (message[at + 5] << 16) | (message[at + 6] << 8) | message[at + 7]) >>> 0;
    const dataLength = (message[at + 8] << 8) | message[at + 9];
    const data = at + 10;
    if (data + dataLength > message.length) return undefined;
    offset = data + dataLength;
    if (klass !== CLASS_IN) continue;
    if ((type === TYPE_A && dataLength === 4) || (type === TYPE_AAAA && dataLength === 16)) {
      answers.push({ name: read.name, address: formatIP(message.subarray(data, data + dataLength)), ttl });
    } else if (type === TYPE_CNAME) {
      const target = readName(message, data);
      if (!target || target.next > offset) return undefined;
      aliases.set(read.name, { target: target.name, ttl });
    }
  }

  const direct = answers.length;
  for (const question of questions) {
    let name = question;
    let ttl = Number.MAX_SAFE_INTEGER;
    for (let hop = 0; hop < MAX_CNAME_CHAIN; hop++) {
      const alias = aliases.get(name);
      if (!alias) break;
      ttl = Math.min(ttl, alias.ttl);
      name = alias.target;
    }
    if (name === question) continue;
    for (let i = 0; i < direct; i++) {
      const answer = answers[i];
      if (answer.name === name) answers.push({ name: question, address: answer.address, ttl: Math.min(ttl, answer.ttl) });
    }
  }
  return answers;
}
