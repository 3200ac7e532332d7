// The kernel rules the dataplane installs, as text: an nftables script and, in
// xtables mode, iptables/ip6tables argument lists. Pure functions of the
// options, so tests can read exactly what goes into the kernel. docs/dataplane.md
// explains the design; in short:
//
//   classify chains (priority mangle-10, postrouting and input):
//     skip loopback and IPv6 neighbour discovery;
//     DNS answers (udp sport 53) go to the DNS queue;
//     connections whose conntrack entry carries the ACCEPTED bit stay in the kernel;
//     packets to/from an interesting IP (or all) go to the policy queue.
//   queue: in nft mode the classify chain queues directly; in xtables mode it only
//     sets a packet-mark bit and an iptables mangle chain (priority mangle) queues.
//   commit: a packet the agent (or the fast path) accepted carries the
//     ACCEPTED bit in its packet mark; copy it to the conntrack mark so the rest
//     of the connection bypasses the queue, then clear our packet bits. nft
//     mode: commit chains at priority mangle+10 (an accepted packet moves on to
//     the next base chain). xtables mode: the last rules of the mangle chains
//     (an accepted packet is repeated, i.e. comes back to the same mangle
//     chain), so a packet passes two base chains instead of three.

import { nftFastPathRules, nftFastPathSets, xtablesFastPathRules, type FastPathRuleOptions } from './fast-path-rules.js';

export type QueueMode = 'nft' | 'xtables';

/** Packet-mark and conntrack-mark bits the dataplane owns; a second agent must use other bits. */
export interface MarkBits {
  /** Conntrack (and returning packet) bit: the agent accepted this connection. */
  accepted: number;
  /** xtables mode: the packet must go to the policy queue. */
  queue: number;
  /** xtables mode: the packet is a DNS answer for the DNS queue. */
  dns: number;
  /** The packet travels in the reply direction of its connection: judge it as the original direction. */
  reply: number;
}

/** Four consecutive bits starting at bit `first` (0..28): one knob for a second agent on the node. */
export function marksAt(first: number): MarkBits {
  if (!Number.isInteger(first) || first < 0 || first > 28) throw new RangeError(`mark bits must start at 0..28, not ${first}`);
  const bit = (n: number) => (2 ** (first + n)) >>> 0;
  return { accepted: bit(0), queue: bit(1), dns: bit(2), reply: bit(3) };
}

export const DEFAULT_MARKS: MarkBits = marksAt(20);

export interface RuleOptions {
  /** nftables table (family inet); xtables chains are named after it. */
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  /** Let packets through when no process listens on the queue (`bypass`). */
  failOpen: boolean;
  marks: MarkBits;
  /** The kernel fast path's sets and rules (fast-path-rules.ts); absent: none. */
  fastPath?: FastPathRuleOptions;
}

export interface Interest {
  all: boolean;
  ips: string[];
}

// Letters, digits, '-' and '_': valid for nft tables and iptables chains; 22 characters
// leave room for the '-POST' and '-PROBE' suffixes within iptables' 28.
const TABLE_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,21}$/;

/** Reasons the options cannot be turned into rules, or none. */
export function ruleOptionProblems(options: RuleOptions): string[] {
  const problems: string[] = [];
  if (!TABLE_NAME.test(options.tableName)) problems.push(`tableName "${options.tableName}" must be a letter then up to 21 letters, digits, '-' or '_'`);
  for (const [field, value] of [['queueId', options.queueId], ['dnsQueueId', options.dnsQueueId]] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 65535) problems.push(`${field} ${value} must be an integer in 0..65535`);
  }
  if (options.queueId === options.dnsQueueId) problems.push(`queueId and dnsQueueId must differ (both ${options.queueId})`);
  const bits = Object.values(options.marks);
  for (const [field, bit] of Object.entries(options.marks)) {
    if (!Number.isInteger(bit) || bit <= 0 || bit > 0xffffffff || (bit & (bit - 1)) !== 0) problems.push(`marks.${field} must be a single bit`);
  }
  if (new Set(bits).size !== bits.length) problems.push('marks.accepted, marks.queue, marks.dns and marks.reply must be four different bits');
  return problems;
}

const hex = (n: number) => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

function ownBits(marks: MarkBits): number {
  return (marks.accepted | marks.queue | marks.dns | marks.reply) >>> 0;
}

const ND_TYPES = 'nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect';

type Hook = 'postrouting' | 'input';

function classifyChain(options: RuleOptions, mode: QueueMode, hook: Hook, interest: Interest): string {
  const { marks } = options;
  const bypass = options.failOpen ? ' bypass' : '';
  const toPolicy = mode === 'nft' ? `queue num ${options.queueId}${bypass}` : `meta mark set meta mark | ${hex(marks.queue)}`;
  // DNS answers are always accepted, so their queue always bypasses.
  const toDns = mode === 'nft' ? `queue num ${options.dnsQueueId} bypass` : `meta mark set meta mark | ${hex(marks.dns)}`;
  const loopback = hook === 'postrouting' ? 'oifname "lo" return' : 'iifname "lo" return';
  const accepted = `ct mark & ${hex(marks.accepted)} == ${hex(marks.accepted)}`;
  const lines = [
    `type filter hook ${hook} priority mangle - 10; policy accept;`,
    // Most packets belong to accepted connections: they leave at the first
    // rule. Every packet this returns, the rules below would return too; only
    // a DNS answer (sport 53), which must still reach the DNS queue, is left to them.
    `${accepted} th sport != 53 return`,
    loopback,
    `icmpv6 type { ${ND_TYPES} } return`,
    `udp sport 53 ${toDns}`,
    // In xtables mode a DNS answer must not also pick up the policy bit.
    ...(mode === 'xtables' ? [`meta mark & ${hex(marks.dns)} == ${hex(marks.dns)} return`] : []),
    `${accepted} return`,
    // In nft mode the classify chain queues, so the decided tuples are consulted here (xtables: in the mangle chains).
    ...(mode === 'nft' && options.fastPath ? nftFastPathRules(hex(marks.accepted)) : []),
    // A connection not (or no longer) accepted may speak first from its responder's side:
    // tell the agent, so it judges the connection's original direction, not this packet's.
    `ct direction reply meta mark set meta mark | ${hex(marks.reply)}`,
  ];
  if (interest.all) lines.push(toPolicy);
  else {
    lines.push(`ip saddr @interest4 ${toPolicy}`, `ip daddr @interest4 ${toPolicy}`);
    lines.push(`ip6 saddr @interest6 ${toPolicy}`, `ip6 daddr @interest6 ${toPolicy}`);
  }
  return `  chain classify_${hook} {\n${lines.map((l) => `    ${l}`).join('\n')}\n  }`;
}

function commitChain(options: RuleOptions, hook: Hook): string {
  const { accepted } = options.marks;
  const own = ownBits(options.marks);
  const lines = [
    `type filter hook ${hook} priority mangle + 10; policy accept;`,
    // Most packets carry none of our bits (the classify chain returned them at its first rule): they leave here.
    `meta mark & ${hex(own)} == 0 return`,
    `meta mark & ${hex(accepted)} == ${hex(accepted)} ct mark set ct mark | ${hex(accepted)}`,
    `meta mark set meta mark & ${hex(~own)}`,
  ];
  return `  chain commit_${hook} {\n${lines.map((l) => `    ${l}`).join('\n')}\n  }`;
}

function elementList(ips: string[], family: 4 | 6): string[] {
  return ips.filter((ip) => (family === 6 ? ip.includes(':') : !ip.includes(':')));
}

function setDefinition(name: string, type: string, elements: string[]): string {
  const body = [`type ${type};`];
  if (elements.length > 0) body.push(`elements = { ${elements.join(', ')} }`);
  return `  set ${name} {\n${body.map((l) => `    ${l}`).join('\n')}\n  }`;
}

/**
 * The whole nftables table as one `nft -f` script. It first creates then
 * deletes the table, so installing replaces any leftover from a crashed run in
 * one atomic transaction. The commit chains are nft mode's; in xtables mode
 * the mangle chains commit (xtablesCommands).
 */
export function nftRuleset(options: RuleOptions, mode: QueueMode, interest: Interest): string {
  const t = options.tableName;
  const body = [
    setDefinition('interest4', 'ipv4_addr', elementList(interest.ips, 4)),
    setDefinition('interest6', 'ipv6_addr', elementList(interest.ips, 6)),
    ...(mode === 'nft' && options.fastPath ? nftFastPathSets(options.fastPath) : []),
    classifyChain(options, mode, 'postrouting', interest),
    classifyChain(options, mode, 'input', interest),
    ...(mode === 'nft' ? [commitChain(options, 'postrouting'), commitChain(options, 'input')] : []),
  ];
  return [`table inet ${t}`, `delete table inet ${t}`, `table inet ${t} {`, ...body, '}', ''].join('\n');
}

/**
 * The commit chains added to an installed xtables-mode table, for when
 * ip6tables refused its chains: then nothing in mangle clears our bits on
 * IPv6 packets (the classify chains still set them), so these do, for both
 * families (on IPv4 packets the iptables chains have already cleared them).
 */
export function nftCommitChains(options: RuleOptions): string {
  return `table inet ${options.tableName} {\n${commitChain(options, 'postrouting')}\n${commitChain(options, 'input')}\n}\n`;
}

/** Replace the interest sets' contents in one transaction. */
export function nftInterestUpdate(options: RuleOptions, interest: Interest): string {
  const t = options.tableName;
  const lines = [`flush set inet ${t} interest4`, `flush set inet ${t} interest6`];
  const v4 = elementList(interest.ips, 4);
  const v6 = elementList(interest.ips, 6);
  if (v4.length > 0) lines.push(`add element inet ${t} interest4 { ${v4.join(', ')} }`);
  if (v6.length > 0) lines.push(`add element inet ${t} interest6 { ${v6.join(', ')} }`);
  return lines.join('\n') + '\n';
}

/** Switching between "all" and a set of IPs changes the chains, not just the sets. */
export function nftClassifyReplacement(options: RuleOptions, mode: QueueMode, interest: Interest): string {
  const t = options.tableName;
  const lines: string[] = [];
  for (const hook of ['postrouting', 'input'] as const) {
    lines.push(`flush chain inet ${t} classify_${hook}`);
    lines.push(`table inet ${t} {\n${classifyChain(options, mode, hook, interest)}\n}`);
  }
  return lines.join('\n') + '\n' + nftInterestUpdate(options, interest);
}

export function nftTableRemoval(options: RuleOptions): string {
  return `table inet ${options.tableName}\ndelete table inet ${options.tableName}\n`;
}

/** The xtables chain name for one hook: iptables limits names to 28 characters. */
export function xtablesChainName(options: RuleOptions, hook: Hook): string {
  return `${options.tableName.toUpperCase()}-${hook === 'postrouting' ? 'POST' : 'IN'}`;
}

export interface XtablesCommands {
  /** Run in order with the family's tool (iptables for 4, ip6tables for 6). */
  install: string[][];
  /** Run in order; each may fail harmlessly when the rule is already gone. */
  remove: string[][];
}

const BUILTIN_OF: Record<Hook, string> = { postrouting: 'POSTROUTING', input: 'INPUT' };

/**
 * The iptables (family 4) or ip6tables (6) mangle chains that queue packets
 * the nftables classify chains marked; with the fast path, its set matches
 * come just before the queue rule. They also commit: a packet the agent
 * accepted is repeated (NF_REPEAT), so it comes back here with the ACCEPTED
 * bit, and one the fast path accepted carries it on; the last two rules copy
 * the bit to the conntrack mark and clear our packet bits. The jump from the
 * built-in chain matches only packets with one of our bits, so the packets of
 * accepted connections (which have none) cost this chain one rule.
 */
export function xtablesCommands(options: RuleOptions, family: 4 | 6 = 4): XtablesCommands {
  const install: string[][] = [];
  const remove: string[][] = [];
  const { marks } = options;
  const own = ownBits(marks);
  const ours = ['-m', 'mark', '!', '--mark', `0/${hex(own)}`];
  for (const hook of ['postrouting', 'input'] as const) {
    const chain = xtablesChainName(options, hook);
    const builtin = BUILTIN_OF[hook];
    const bypass = options.failOpen ? ['--queue-bypass'] : [];
    install.push(
      ['-t', 'mangle', '-N', chain],
      ['-t', 'mangle', '-A', chain, '-m', 'mark', '--mark', `${hex(marks.dns)}/${hex(marks.dns)}`, '-j', 'NFQUEUE', '--queue-num', String(options.dnsQueueId), '--queue-bypass'],
      ...(options.fastPath ? xtablesFastPathRules(chain, options.tableName, family, {
        accepted: hex(marks.accepted), queue: hex(marks.queue), queueOrReply: hex(marks.queue | marks.reply), acceptedOrQueue: hex(marks.accepted | marks.queue),
      }) : []),
      ['-t', 'mangle', '-A', chain, '-m', 'mark', '--mark', `${hex(marks.queue)}/${hex(marks.queue)}`, '-j', 'NFQUEUE', '--queue-num', String(options.queueId), ...bypass],
      ['-t', 'mangle', '-A', chain, '-m', 'mark', '--mark', `${hex(marks.accepted)}/${hex(marks.accepted)}`, '-j', 'CONNMARK', '--or-mark', hex(marks.accepted)],
      ['-t', 'mangle', '-A', chain, '-j', 'MARK', '--and-mark', hex(~own)],
      ['-t', 'mangle', '-I', builtin, '1', ...ours, '-j', chain],
    );
    // The unconditional jump is an older agent's (before the commit moved here), left by a crash.
    remove.push(['-t', 'mangle', '-D', builtin, ...ours, '-j', chain], ['-t', 'mangle', '-D', builtin, '-j', chain], ['-t', 'mangle', '-F', chain], ['-t', 'mangle', '-X', chain]);
  }
  return { install, remove };
}

/** A throwaway table with one queue rule: accepted only when the kernel has the nft queue statement. */
export function nftQueueProbe(options: RuleOptions): { create: string; remove: string } {
  const t = `${options.tableName.slice(0, 14)}_probe`;
  // Protocol 253 is reserved for experiments: no real packet can hit this rule during the probe.
  const create = `table inet ${t} {\n  chain probe {\n    type filter hook postrouting priority 0; policy accept;\n    meta l4proto 253 queue num ${options.queueId} bypass\n  }\n}\n`;
  return { create, remove: `delete table inet ${t}\n` };
}

export function xtablesQueueProbe(options: RuleOptions): { create: string[][]; remove: string[][] } {
  const chain = `${options.tableName.toUpperCase()}-PROBE`;
  return {
    create: [['-t', 'mangle', '-N', chain], ['-t', 'mangle', '-A', chain, '-p', '253', '-j', 'NFQUEUE', '--queue-num', String(options.queueId), '--queue-bypass']],
    remove: [['-t', 'mangle', '-F', chain], ['-t', 'mangle', '-X', chain]],
  };
}
