import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import type { Packet } from '../contract.js';
import {
  DEFAULT_FAST_PATH,
  fastPathSetNames,
  fillScript,
  invalidateScript,
  ipsetAllNames,
  ipsetCreateScript,
  kernelDecidedCounts,
  spareSetName,
} from './fast-path-rules.js';
import { DEFAULT_MARKS, nftClassifyReplacement, nftRuleset, xtablesCommands, type RuleOptions } from './rules.js';

const options: RuleOptions = { tableName: 'kube-wasm-policies', queueId: 100, dnsQueueId: 101, failOpen: true, marks: DEFAULT_MARKS, fastPath: DEFAULT_FAST_PATH };
function nftCanCheck(): boolean {
  if (process.getuid?.() !== 0) return false;
  try { execFileSync('nft', ['--version']); return true; } catch { return false; }
}
const someIps = { all: false, ips: ['10.244.1.2', 'fd00::5'] };

function packet(src: number[], dst: number[], protocol: number, dstPort: number, srcPort = 40000): Packet {
  return { family: src.length === 4 ? 4 : 6, protocol, src: Uint8Array.from(src), dst: Uint8Array.from(dst), srcPort, dstPort, icmpType: 0, icmpCode: 0 };
}
const v6 = (last: number) => [0xfd, 0, ...new Array(13).fill(0), last];

describe('fast path set names', () => {
  it('names the ipsets after the table, with a spare each, all within ipset\'s 31 characters', () => {
    const longest = 'a'.repeat(22);
    const names = ipsetAllNames(longest);
    expect(names).toHaveLength(8);
    expect(new Set(names).size).toBe(8);
    for (const n of names) expect(n.length).toBeLessThanOrEqual(31);
    const live = fastPathSetNames('kube-wasm-policies', 'xtables');
    expect(live).toEqual({ accept4: 'kube-wasm-policies-fpa4', deny4: 'kube-wasm-policies-fpd4', accept6: 'kube-wasm-policies-fpa6', deny6: 'kube-wasm-policies-fpd6' });
    expect(spareSetName(live.accept4)).toBe('kube-wasm-policies-fpa4x');
  });

  it('creates every ipset as hash:ip,port,ip of its family, with the timeout, counters and size limit', () => {
    const lines = ipsetCreateScript('kwp', { timeoutSeconds: 30, maxEntries: 1000 }).trim().split('\n');
    expect(lines).toContain('create kwp-fpa4 hash:ip,port,ip family inet timeout 30 counters maxelem 1000');
    expect(lines).toContain('create kwp-fpd6x hash:ip,port,ip family inet6 timeout 30 counters maxelem 1000');
    expect(lines).toHaveLength(8);
  });
});

describe('fast path rules', () => {
  it('adds the nft sets with concatenated keys and a timeout to the table, and consults them before the queue (nft mode)', () => {
    const script = nftRuleset(options, 'nft', someIps);
    expect(script).toContain('set fp_accept4 {\n    type ipv4_addr . ipv4_addr . inet_proto . inet_service;\n    flags timeout;\n    timeout 120s;\n    size 131072;');
    expect(script).toContain('set fp_deny6 {\n    type ipv6_addr . ipv6_addr . inet_proto . inet_service;');
    const classify = script.slice(script.indexOf('chain classify_postrouting'));
    const accept = classify.indexOf('ct direction original ip saddr . ip daddr . meta l4proto . th dport @fp_accept4 counter meta mark set meta mark | 0x00100000 return');
    const deny = classify.indexOf('@fp_deny4 counter drop');
    const queue = classify.indexOf('queue num 100');
    expect(accept).toBeGreaterThan(classify.indexOf('ct mark & 0x00100000 == 0x00100000 return'));
    expect(deny).toBeGreaterThan(accept);
    expect(queue).toBeGreaterThan(deny);
    expect(classify).toContain('ip6 saddr . ip6 daddr . meta l4proto . th dport @fp_accept6');
    // The classify chain rewritten when interest switches to all keeps them.
    expect(nftClassifyReplacement(options, 'nft', { all: true, ips: [] })).toContain('@fp_deny6 counter drop');
  });

  it('leaves the nft table without sets or set matches in xtables mode and without the option', () => {
    expect(nftRuleset(options, 'xtables', someIps)).not.toContain('fp_');
    expect(nftRuleset({ ...options, fastPath: undefined }, 'nft', someIps)).not.toContain('fp_');
  });

  it('matches the family\'s ipsets src,dst,dst between the DNS and the policy NFQUEUE rules, for original-direction queued packets only (xtables mode)', () => {
    for (const family of [4, 6] as const) {
      const rules = xtablesCommands(options, family).install.filter((args) => args.includes('KUBE-WASM-POLICIES-POST'));
      const texts = rules.map((r) => r.join(' '));
      const accept = texts.findIndex((t) => t.includes(`--match-set kube-wasm-policies-fpa${family} src,dst,dst`));
      const deny = texts.findIndex((t) => t.includes(`--match-set kube-wasm-policies-fpd${family} src,dst,dst -j DROP`));
      const dnsQueue = texts.findIndex((t) => t.includes('--queue-num 101'));
      const policyQueue = texts.findIndex((t) => t.includes('--queue-num 100'));
      expect(dnsQueue).toBeLessThan(accept);
      expect(accept).toBeLessThan(deny);
      expect(deny).toBeLessThan(policyQueue);
      // QUEUE set and REPLY clear; accepting sets ACCEPTED and clears QUEUE, so the NFQUEUE rule no longer matches.
      expect(texts[accept]).toContain('-m mark --mark 0x00200000/0x00a00000');
      expect(texts[accept]).toContain('-j MARK --set-xmark 0x00100000/0x00300000');
    }
    expect(xtablesCommands({ ...options, fastPath: undefined }, 4).install.flat()).not.toContain('--match-set');
  });

  // nft -c checks against the running kernel without committing: it needs the binary and CAP_NET_ADMIN (CI runs as root).
  // This kernel lacks the queue statement, so the queue rules are left out; the sets, the fast-path rules, a fill and an invalidation go in.
  it.skipIf(!nftCanCheck())('is accepted by nft -c in nft mode: table, sets and rules, a fill and an invalidation in one transaction', () => {
    const withoutQueue = (script: string) => script.split('\n').filter((l) => !l.includes('queue num')).join('\n');
    const fill = fillScript('nft', options.tableName, [
      { packet: packet([10, 0, 0, 1], [10, 0, 0, 2], 6, 80), verdict: 'accept' },
      { packet: packet(v6(1), v6(2), 17, 53), verdict: 'deny' },
    ]).script;
    for (const interest of [someIps, { all: true, ips: [] }]) {
      execFileSync('nft', ['-c', '-f', '-'], { input: withoutQueue(nftRuleset(options, 'nft', interest)) + fill + invalidateScript('nft', options.tableName) });
    }
  });
});

describe('fill and invalidation scripts', () => {
  const web = [10, 244, 1, 2];
  const db = [10, 244, 1, 3];

  it('writes each distinct tuple once, the source port left out, into the set of its verdict and family', () => {
    const { script, accept, deny } = fillScript('xtables', 'kwp', [
      { packet: packet(web, db, 6, 5432, 40001), verdict: 'accept' },
      { packet: packet(web, db, 6, 5432, 40002), verdict: 'accept' },
      { packet: packet(web, db, 17, 53), verdict: 'deny' },
      { packet: packet(v6(2), v6(3), 132, 80), verdict: 'accept' },
      { packet: packet(web, db, 1, 0), verdict: 'deny' },
    ]);
    expect(script.trim().split('\n')).toEqual([
      'add kwp-fpa4 10.244.1.2,tcp:5432,10.244.1.3',
      'add kwp-fpd4 10.244.1.2,udp:53,10.244.1.3',
      'add kwp-fpa6 fd00::2,sctp:80,fd00::3',
    ]);
    expect({ accept, deny }).toEqual({ accept: 2, deny: 1 });
  });

  it('writes one nft transaction adding the elements of each set', () => {
    const { script } = fillScript('nft', 'kwp', [
      { packet: packet(web, db, 6, 80), verdict: 'accept' },
      { packet: packet(db, web, 6, 80), verdict: 'accept' },
      { packet: packet(v6(2), v6(3), 17, 53), verdict: 'deny' },
    ]);
    expect(script.trim().split('\n')).toEqual([
      'add element inet kwp fp_accept4 { 10.244.1.2 . 10.244.1.3 . tcp . 80, 10.244.1.3 . 10.244.1.2 . tcp . 80 }',
      'add element inet kwp fp_deny6 { fd00::2 . fd00::3 . udp . 53 }',
    ]);
  });

  it('is empty when no tuple has a port to key on', () => {
    expect(fillScript('nft', 'kwp', [{ packet: packet(web, db, 1, 0), verdict: 'deny' }]).script).toBe('');
  });

  it('invalidates by swapping every ipset with its empty spare before flushing the old contents', () => {
    const lines = invalidateScript('xtables', 'kwp').trim().split('\n');
    expect(lines.slice(0, 4)).toEqual(['swap kwp-fpa4 kwp-fpa4x', 'swap kwp-fpd4 kwp-fpd4x', 'swap kwp-fpa6 kwp-fpa6x', 'swap kwp-fpd6 kwp-fpd6x']);
    expect(lines.slice(4)).toEqual(['flush kwp-fpa4x', 'flush kwp-fpd4x', 'flush kwp-fpa6x', 'flush kwp-fpd6x']);
  });

  it('invalidates the nft sets in one transaction', () => {
    expect(invalidateScript('nft', 'kwp')).toBe('flush set inet kwp fp_accept4\nflush set inet kwp fp_deny4\nflush set inet kwp fp_accept6\nflush set inet kwp fp_deny6\n');
  });
});

describe('kernelDecidedCounts', () => {
  it('sums the xtables rule counters of the live sets by verdict, not the spares', () => {
    const listing = [
      'Chain KWP-POST (1 references)',
      '    pkts      bytes target     prot opt in     out     source               destination',
      '       3      180 NFQUEUE    0    --  *      *       0.0.0.0/0            0.0.0.0/0            mark match 0x400000/0x400000 NFQUEUE num 101 bypass',
      '      41     2460 MARK       0    --  *      *       0.0.0.0/0            0.0.0.0/0            mark match 0x200000/0xa00000 match-set kwp-fpa4 src,dst,dst MARK xset 0x100000/0x300000',
      '       2      120 DROP       0    --  *      *       0.0.0.0/0            0.0.0.0/0            mark match 0x200000/0xa00000 match-set kwp-fpd4 src,dst,dst',
      '       9      540 MARK       0    --  *      *       0.0.0.0/0            0.0.0.0/0            match-set kwp-fpa4x src,dst,dst',
    ].join('\n');
    expect(kernelDecidedCounts('xtables', 'kwp', listing)).toEqual({ accept: 41, deny: 2 });
  });

  it('reads the nft rule counters', () => {
    const listing = [
      '\t\tmeta l4proto { tcp, udp, sctp } ct direction original ip saddr . ip daddr . meta l4proto . th dport @fp_accept4 counter packets 7 bytes 420 meta mark set meta mark | 0x00100000 return',
      '\t\tmeta l4proto { tcp, udp, sctp } ct direction original ip6 saddr . ip6 daddr . meta l4proto . th dport @fp_deny6 counter packets 5 bytes 400 drop',
    ].join('\n');
    expect(kernelDecidedCounts('nft', 'kwp', listing)).toEqual({ accept: 7, deny: 5 });
  });
});
