// The kernel fast path as text: the sets that hold decided tuples, the rules
// that consult them, and the scripts that fill and invalidate them. Pure
// functions, so tests read exactly what goes into the kernel.
//
// A tuple is (source IP, destination IP, L4 protocol, destination port): a
// new connection that differs from a decided one only in its source port gets
// the same verdict (the decision caches make the same assumption, which is
// why only pipelines of caching evaluators use the fast path; fast-path.ts).
//
//   xtables mode (the NFQUEUE target in iptables' mangle table): ipset sets of
//     type hash:ip,port,ip, matched `src,dst,dst` by -m set in the agent's
//     mangle chains just before the NFQUEUE rule. Every live set has a spare
//     of the same type: invalidating swaps the (empty) spare in with
//     `ipset swap`, O(1) and atomic per set, and flushes the old contents
//     once they are out of the rules' way.
//   nft mode (the nftables queue statement): nft sets with concatenated keys
//     `ipv4_addr . ipv4_addr . inet_proto . inet_service` in the agent's own
//     table, matched in the classify chains; invalidating flushes all four in
//     one `nft -f` transaction.
//
// Both kinds carry a timeout per entry (the set's default): a tuple nobody
// re-decides leaves by itself.

import type { Packet } from '../contract.js';
import { formatIP } from '../net/ip.js';

export type FastPathVerdict = 'accept' | 'deny';

export interface FastPathRuleOptions {
  /** Seconds an entry lives in its set (the set's default timeout). */
  timeoutSeconds: number;
  /** Entries each set holds at most; a full set refuses more until entries time out or are invalidated. */
  maxEntries: number;
}

export const DEFAULT_FAST_PATH: FastPathRuleOptions = { timeoutSeconds: 120, maxEntries: 131072 };

/** The four live sets: accepted and denied tuples, per IP family. */
export interface FastPathSets {
  accept4: string;
  deny4: string;
  accept6: string;
  deny6: string;
}

export const SET_KEYS = ['accept4', 'deny4', 'accept6', 'deny6'] as const;
export type SetKey = (typeof SET_KEYS)[number];

/** Protocols whose packets carry a destination port the sets can key on. */
const PORT_PROTOCOLS: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

/** Whether a packet's tuple can be kept in the sets at all (TCP, UDP and SCTP only). */
export function hasTupleKey(packet: Packet): boolean {
  return PORT_PROTOCOLS[packet.protocol] !== undefined && packet.dstPort > 0;
}

/**
 * nft mode: sets inside the agent's table. xtables mode: ipset names, which
 * are global to the network namespace, so they carry the table name (at most
 * 22 characters; with `-fpa4x` 28, within ipset's 31).
 */
export function fastPathSetNames(tableName: string, mode: 'nft' | 'xtables'): FastPathSets {
  if (mode === 'nft') return { accept4: 'fp_accept4', deny4: 'fp_deny4', accept6: 'fp_accept6', deny6: 'fp_deny6' };
  return { accept4: `${tableName}-fpa4`, deny4: `${tableName}-fpd4`, accept6: `${tableName}-fpa6`, deny6: `${tableName}-fpd6` };
}

/** The spare each xtables set is swapped with on invalidation. */
export function spareSetName(live: string): string {
  return `${live}x`;
}

export function setKeyOf(verdict: FastPathVerdict, family: 4 | 6): SetKey {
  return verdict === 'accept' ? (family === 4 ? 'accept4' : 'accept6') : family === 4 ? 'deny4' : 'deny6';
}

// ---- nft mode ----

/** The set definitions that go into the agent's nft table. */
export function nftFastPathSets(options: FastPathRuleOptions): string[] {
  const names = fastPathSetNames('', 'nft');
  return SET_KEYS.map((key) => {
    const addr = key.endsWith('4') ? 'ipv4_addr' : 'ipv6_addr';
    const body = [`type ${addr} . ${addr} . inet_proto . inet_service;`, 'flags timeout;', `timeout ${options.timeoutSeconds}s;`, `size ${options.maxEntries};`];
    return `  set ${names[key]} {\n${body.map((l) => `    ${l}`).join('\n')}\n  }`;
  });
}

/**
 * The classify-chain rules that decide a connection's first packet in the
 * kernel. Original direction only: a reply-direction packet is judged as the
 * direction it answers (strict mode, connections older than the agent), which
 * is not the tuple it carries. An accepted packet gets the ACCEPTED bit, so
 * the commit chain marks its connection exactly as an agent verdict would.
 * Each rule counts what it decides (kwp_fastpath_kernel_decided_total).
 */
export function nftFastPathRules(acceptedMark: string): string[] {
  const names = fastPathSetNames('', 'nft');
  const lines: string[] = [];
  for (const family of [4, 6] as const) {
    const ip = family === 4 ? 'ip' : 'ip6';
    const key = `meta l4proto { tcp, udp, sctp } ct direction original ${ip} saddr . ${ip} daddr . meta l4proto . th dport`;
    lines.push(`${key} @${names[setKeyOf('accept', family)]} counter meta mark set meta mark | ${acceptedMark} return`);
    lines.push(`${key} @${names[setKeyOf('deny', family)]} counter drop`);
  }
  return lines;
}

function nftElement(packet: Packet): string {
  return `${formatIP(packet.src)} . ${formatIP(packet.dst)} . ${PORT_PROTOCOLS[packet.protocol]} . ${packet.dstPort}`;
}

// ---- xtables mode (ipset) ----

function ipsetCreate(name: string, family: 4 | 6, options: FastPathRuleOptions): string {
  return `create ${name} hash:ip,port,ip family ${family === 4 ? 'inet' : 'inet6'} timeout ${options.timeoutSeconds} counters maxelem ${options.maxEntries}`;
}

/** Every live and spare set, created empty (an `ipset restore` script). */
export function ipsetCreateScript(tableName: string, options: FastPathRuleOptions): string {
  const names = fastPathSetNames(tableName, 'xtables');
  const lines: string[] = [];
  for (const key of SET_KEYS) {
    const family = key.endsWith('4') ? 4 : 6;
    lines.push(ipsetCreate(names[key], family, options), ipsetCreate(spareSetName(names[key]), family, options));
  }
  return lines.join('\n') + '\n';
}

/** Every live and spare set name, for destroying them. */
export function ipsetAllNames(tableName: string): string[] {
  const names = fastPathSetNames(tableName, 'xtables');
  return SET_KEYS.flatMap((key) => [names[key], spareSetName(names[key])]);
}

/**
 * The mangle-chain rules (before the policy NFQUEUE rule) for one family: a
 * packet marked for the queue, not in the reply direction, whose tuple is in
 * the accept set gets the ACCEPTED bit and loses the QUEUE bit (so the NFQUEUE
 * rule no longer matches and the commit chain marks the connection); one in
 * the deny set is dropped.
 */
export function xtablesFastPathRules(chain: string, tableName: string, family: 4 | 6, marks: { accepted: string; queue: string; queueOrReply: string; acceptedOrQueue: string }): string[][] {
  const names = fastPathSetNames(tableName, 'xtables');
  const queued = ['-m', 'mark', '--mark', `${marks.queue}/${marks.queueOrReply}`];
  return [
    ['-t', 'mangle', '-A', chain, ...queued, '-m', 'set', '--match-set', names[setKeyOf('accept', family)], 'src,dst,dst', '-j', 'MARK', '--set-xmark', `${marks.accepted}/${marks.acceptedOrQueue}`],
    ['-t', 'mangle', '-A', chain, ...queued, '-m', 'set', '--match-set', names[setKeyOf('deny', family)], 'src,dst,dst', '-j', 'DROP'],
  ];
}

function ipsetEntry(packet: Packet): string {
  return `${formatIP(packet.src)},${PORT_PROTOCOLS[packet.protocol]}:${packet.dstPort},${formatIP(packet.dst)}`;
}

// ---- filling and invalidating ----

export interface DecidedTuple {
  packet: Packet;
  verdict: FastPathVerdict;
}

/**
 * One batch of decided tuples as one script: `ipset restore -exist` lines
 * (xtables; -exist refreshes an entry that is already there) or one `nft -f`
 * transaction. Duplicates within the batch are written once. Returns the
 * script and how many distinct entries it adds, by verdict.
 */
export function fillScript(mode: 'nft' | 'xtables', tableName: string, tuples: readonly DecidedTuple[]): { script: string; accept: number; deny: number } {
  const names = fastPathSetNames(tableName, mode);
  const bySet = new Map<SetKey, Set<string>>();
  for (const { packet, verdict } of tuples) {
    if (!hasTupleKey(packet)) continue;
    const key = setKeyOf(verdict, packet.family);
    let entries = bySet.get(key);
    if (!entries) bySet.set(key, (entries = new Set()));
    entries.add(mode === 'nft' ? nftElement(packet) : ipsetEntry(packet));
  }
  const lines: string[] = [];
  let accept = 0;
  let deny = 0;
  for (const key of SET_KEYS) {
    const entries = bySet.get(key);
    if (!entries) continue;
    if (key.startsWith('accept')) accept += entries.size;
    else deny += entries.size;
    if (mode === 'nft') lines.push(`add element inet ${tableName} ${names[key]} { ${[...entries].join(', ')} }`);
    else for (const e of entries) lines.push(`add ${names[key]} ${e}`);
  }
  return { script: lines.length ? lines.join('\n') + '\n' : '', accept, deny };
}

/**
 * Empty every live set at once. nft: one transaction flushing all four.
 * xtables: swap each live set with its empty spare (the rules follow the
 * name, so from the swap on they consult an empty set), then flush the
 * spares, which now hold the old entries.
 */
export function invalidateScript(mode: 'nft' | 'xtables', tableName: string): string {
  const names = fastPathSetNames(tableName, mode);
  if (mode === 'nft') return SET_KEYS.map((key) => `flush set inet ${tableName} ${names[key]}`).join('\n') + '\n';
  const swaps = SET_KEYS.map((key) => `swap ${names[key]} ${spareSetName(names[key])}`);
  const flushes = SET_KEYS.map((key) => `flush ${spareSetName(names[key])}`);
  return [...swaps, ...flushes].join('\n') + '\n';
}

/**
 * The packets each fast-path rule decided, from `iptables -t mangle -L CHAIN
 * -v -x -n` or `nft list chain` output: summed by verdict.
 */
export function kernelDecidedCounts(mode: 'nft' | 'xtables', tableName: string, listing: string): { accept: number; deny: number } {
  const names = fastPathSetNames(tableName, mode);
  const out = { accept: 0, deny: 0 };
  for (const line of listing.split('\n')) {
    for (const key of SET_KEYS) {
      const name = names[key];
      let packets: number | undefined;
      if (mode === 'nft') {
        const m = new RegExp(`@${name} counter packets (\\d+)`).exec(line);
        if (m) packets = Number(m[1]);
      } else if (new RegExp(`match-set ${name.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} src,dst,dst`).test(line)) {
        const m = /^\s*(\d+)\s+\d+/.exec(line);
        if (m) packets = Number(m[1]);
      }
      if (packets !== undefined) out[key.startsWith('accept') ? 'accept' : 'deny'] += packets;
    }
  }
  return out;
}
