import { describe, it, expect } from 'vitest';
import {
  DEFAULT_MARKS,
  marksAt,
  nftClassifyReplacement,
  nftInterestUpdate,
  nftQueueProbe,
  nftRuleset,
  ruleOptionProblems,
  xtablesCommands,
  xtablesChainName,
  xtablesQueueProbe,
  type RuleOptions,
} from './rules.js';

const base: RuleOptions = { tableName: 'kwp', queueId: 100, dnsQueueId: 101, failOpen: true, marks: DEFAULT_MARKS };
const someIps = { all: false, ips: ['10.244.1.2', 'fd00::5', '10.244.2.3'] };

function chain(script: string, name: string): string[] {
  const start = script.indexOf(`chain ${name} {`);
  expect(start).toBeGreaterThanOrEqual(0);
  const end = script.indexOf('\n  }', start);
  return script
    .slice(start, end)
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
}

describe('nftRuleset', () => {
  it('queues directly in nft mode, with bypass when failing open', () => {
    const rules = chain(nftRuleset(base, 'nft', someIps), 'classify_postrouting');
    expect(rules).toContain('ip saddr @interest4 queue num 100 bypass');
    expect(rules).toContain('ip6 daddr @interest6 queue num 100 bypass');
    expect(rules).toContain('udp sport 53 queue num 101 bypass');
  });

  it('drops the bypass flag on the policy queue, not the DNS queue, when failing closed', () => {
    const rules = chain(nftRuleset({ ...base, failOpen: false }, 'nft', someIps), 'classify_input');
    expect(rules).toContain('ip daddr @interest4 queue num 100');
    expect(rules).toContain('udp sport 53 queue num 101 bypass');
  });

  it('only marks packets in xtables mode, leaving the queueing to iptables', () => {
    const script = nftRuleset(base, 'xtables', someIps);
    expect(script).not.toContain('queue num');
    const rules = chain(script, 'classify_postrouting');
    expect(rules).toContain('ip saddr @interest4 meta mark set meta mark | 0x00200000');
    expect(rules).toContain('udp sport 53 meta mark set meta mark | 0x00400000');
  });

  it('lets connections already accepted stay in the kernel before any queue rule', () => {
    for (const mode of ['nft', 'xtables'] as const) {
      const rules = chain(nftRuleset(base, mode, someIps), 'classify_input');
      const acceptedCheck = rules.indexOf('ct mark & 0x00100000 == 0x00100000 return');
      const firstInterest = rules.findIndex((r) => r.includes('@interest4'));
      expect(acceptedCheck).toBeGreaterThan(0);
      expect(acceptedCheck).toBeLessThan(firstInterest);
    }
  });

  it('copies the accepted packet bit to the conntrack mark and clears its own packet bits after the queue in nft mode, returning packets without its bits at the first rule', () => {
    const rules = chain(nftRuleset(base, 'nft', someIps), 'commit_postrouting');
    expect(rules[0]).toBe('type filter hook postrouting priority mangle + 10; policy accept;');
    expect(rules[1]).toBe('meta mark & 0x00f00000 == 0 return');
    expect(rules.slice(2)).toEqual(['meta mark & 0x00100000 == 0x00100000 ct mark set ct mark | 0x00100000', 'meta mark set meta mark & 0xff0fffff']);
  });

  it('has no commit chains in xtables mode, where the mangle chains commit, so a packet passes two base chains', () => {
    const script = nftRuleset(base, 'xtables', someIps);
    expect(script).not.toContain('commit_');
    expect(script.match(/type filter hook/g)).toHaveLength(2);
  });

  it('splits interest IPs into the IPv4 and IPv6 sets', () => {
    const script = nftRuleset(base, 'nft', someIps);
    expect(script).toMatch(/set interest4 \{\s+type ipv4_addr;\s+elements = \{ 10\.244\.1\.2, 10\.244\.2\.3 \}/);
    expect(script).toMatch(/set interest6 \{\s+type ipv6_addr;\s+elements = \{ fd00::5 \}/);
  });

  it('queues every packet without set lookups when interest is all', () => {
    const rules = chain(nftRuleset(base, 'nft', { all: true, ips: [] }), 'classify_postrouting');
    expect(rules.some((r) => r.includes('@interest'))).toBe(false);
    expect(rules.at(-1)).toBe('queue num 100 bypass');
  });

  it('flags packets of the reply direction before queueing them', () => {
    const rules = chain(nftRuleset(base, 'nft', someIps), 'classify_postrouting');
    const flag = rules.indexOf('ct direction reply meta mark set meta mark | 0x00800000');
    expect(flag).toBeGreaterThan(rules.indexOf('ct mark & 0x00100000 == 0x00100000 return'));
    expect(flag).toBeLessThan(rules.findIndex((r) => r.includes('@interest4')));
  });

  it('skips loopback and neighbour discovery', () => {
    const post = chain(nftRuleset(base, 'nft', someIps), 'classify_postrouting');
    const input = chain(nftRuleset(base, 'nft', someIps), 'classify_input');
    expect(post[2]).toBe('oifname "lo" return');
    expect(input[2]).toBe('iifname "lo" return');
    expect(input[3]).toMatch(/^icmpv6 type \{ nd-router-solicit.*nd-neighbor-advert.* \} return$/);
  });

  it('returns the packets of accepted connections at the first rule, all but DNS answers, which still reach the DNS queue', () => {
    for (const mode of ['nft', 'xtables'] as const) {
      const rules = chain(nftRuleset(base, mode, someIps), 'classify_postrouting');
      expect(rules[1]).toBe('ct mark & 0x00100000 == 0x00100000 th sport != 53 return');
      const dns = rules.findIndex((r) => r.startsWith('udp sport 53 '));
      expect(dns).toBeGreaterThan(1);
      expect(dns).toBeLessThan(rules.indexOf('ct mark & 0x00100000 == 0x00100000 return'));
    }
  });

  it('replaces a leftover table atomically by declaring then deleting it first', () => {
    const script = nftRuleset({ ...base, tableName: 'embedder' }, 'nft', someIps);
    expect(script.split('\n').slice(0, 3)).toEqual(['table inet embedder', 'delete table inet embedder', 'table inet embedder {']);
  });
});

describe('interest updates', () => {
  it('flushes and refills both sets in one script', () => {
    expect(nftInterestUpdate(base, someIps)).toBe(
      'flush set inet kwp interest4\nflush set inet kwp interest6\nadd element inet kwp interest4 { 10.244.1.2, 10.244.2.3 }\nadd element inet kwp interest6 { fd00::5 }\n',
    );
  });

  it('rewrites the classify chains when switching to all', () => {
    const script = nftClassifyReplacement(base, 'nft', { all: true, ips: [] });
    expect(script).toContain('flush chain inet kwp classify_postrouting');
    expect(script).toContain('flush chain inet kwp classify_input');
    expect(script).not.toContain('@interest4');
  });
});

describe('xtablesCommands', () => {
  it('queues marked packets from a chain of its own jumped to first from mangle', () => {
    const { install } = xtablesCommands(base);
    expect(install).toContainEqual(['-t', 'mangle', '-N', 'KWP-POST']);
    expect(install).toContainEqual(['-t', 'mangle', '-I', 'POSTROUTING', '1', '-m', 'mark', '!', '--mark', '0/0x00f00000', '-j', 'KWP-POST']);
    expect(install).toContainEqual(['-t', 'mangle', '-I', 'INPUT', '1', '-m', 'mark', '!', '--mark', '0/0x00f00000', '-j', 'KWP-IN']);
    expect(install).toContainEqual(['-t', 'mangle', '-A', 'KWP-POST', '-m', 'mark', '--mark', '0x00200000/0x00200000', '-j', 'NFQUEUE', '--queue-num', '100', '--queue-bypass']);
  });

  it('jumps to its chain only for packets with one of its bits, so the packets of accepted connections cost one rule', () => {
    const { install } = xtablesCommands({ ...base, fastPath: { timeoutSeconds: 60, maxEntries: 100 } });
    expect(install.at(-1)).toEqual(['-t', 'mangle', '-I', 'INPUT', '1', '-m', 'mark', '!', '--mark', '0/0x00f00000', '-j', 'KWP-IN']);
    const post = install.filter((a) => a[2] === '-A' && a[3] === 'KWP-POST');
    // Every rule but the last (which clears the bits) needs one of them, so the condition on the jump skips nothing that could match.
    for (const rule of post.slice(0, -1)) expect(rule.join(' ')).toMatch(/--mark 0x00(1|2|4)00000\/0x00(1|2|4|a)00000/);
  });

  it('commits in its mangle chain after the queue rule: the accepted bit goes to the conntrack mark, then its packet bits are cleared', () => {
    const { install } = xtablesCommands({ ...base, fastPath: { timeoutSeconds: 60, maxEntries: 100 } }, 6);
    const post = install.filter((a) => a[2] === '-A' && a[3] === 'KWP-POST').map((a) => a.slice(4).join(' '));
    const queue = post.findIndex((r) => r.includes('--queue-num 100'));
    const fastPathAccept = post.findIndex((r) => r.includes('--match-set kwp-fpa6'));
    expect(fastPathAccept).toBeGreaterThanOrEqual(0);
    expect(fastPathAccept).toBeLessThan(queue);
    expect(post.slice(queue + 1)).toEqual(['-m mark --mark 0x00100000/0x00100000 -j CONNMARK --or-mark 0x00100000', '-j MARK --and-mark 0xff0fffff']);
  });

  it('fails closed by leaving out --queue-bypass on the policy queue only', () => {
    const { install } = xtablesCommands({ ...base, failOpen: false });
    const policy = install.find((a) => a.includes('0x00200000/0x00200000'))!;
    const dns = install.find((a) => a.includes('0x00400000/0x00400000'))!;
    expect(policy).not.toContain('--queue-bypass');
    expect(dns).toContain('--queue-bypass');
  });

  it('removes the jump before the chain it jumps to', () => {
    const { remove } = xtablesCommands(base);
    const del = remove.findIndex((a) => a.join(' ') === '-t mangle -X KWP-POST');
    // Both the conditional jump and an older agent's unconditional one.
    for (const spec of ['-t mangle -D POSTROUTING -m mark ! --mark 0/0x00f00000 -j KWP-POST', '-t mangle -D POSTROUTING -j KWP-POST']) {
      const jump = remove.findIndex((a) => a.join(' ') === spec);
      expect(jump).toBeGreaterThanOrEqual(0);
      expect(jump).toBeLessThan(del);
    }
  });

  it('names chains after the table so two agents do not collide', () => {
    expect(xtablesChainName({ ...base, tableName: 'embedder' }, 'input')).toBe('EMBEDDER-IN');
  });
});

describe('probes and options', () => {
  it('probes the nft queue statement on a protocol no real packet carries', () => {
    expect(nftQueueProbe(base).create).toContain('meta l4proto 253 queue num 100 bypass');
  });

  it.each([
    [{ tableName: 'bad name' }, 'tableName'],
    [{ queueId: 70000 }, 'queueId'],
    [{ dnsQueueId: 100 }, 'must differ'],
    [{ marks: { ...DEFAULT_MARKS, queue: 3 } }, 'single bit'],
    [{ marks: { ...DEFAULT_MARKS, dns: DEFAULT_MARKS.accepted } }, 'four different bits'],
  ] as const)('rejects %j naming %s', (override, word) => {
    expect(ruleOptionProblems({ ...base, ...override } as RuleOptions).join('; ')).toContain(word);
  });

  it('lays out four consecutive mark bits from a starting bit, the defaults at bit 20', () => {
    expect(marksAt(20)).toEqual({ accepted: 0x00100000, queue: 0x00200000, dns: 0x00400000, reply: 0x00800000 });
    expect(marksAt(28)).toEqual({ accepted: 0x10000000, queue: 0x20000000, dns: 0x40000000, reply: 0x80000000 });
    expect(ruleOptionProblems({ ...base, marks: marksAt(28) })).toEqual([]);
    expect(() => marksAt(29)).toThrow(RangeError);
  });

  it('accepts the defaults and the agent\'s hyphenated table name', () => {
    expect(ruleOptionProblems(base)).toEqual([]);
    expect(ruleOptionProblems({ ...base, tableName: 'kube-wasm-policies' })).toEqual([]);
  });

  it('keeps every xtables chain name within the 28 characters iptables allows', () => {
    const longest = { ...base, tableName: 'a'.repeat(22) };
    expect(ruleOptionProblems(longest)).toEqual([]);
    for (const args of [...xtablesCommands(longest).install, ...xtablesQueueProbe(longest).create]) {
      const chain = args[args.indexOf('-N') + 1] ?? '';
      expect(chain.length).toBeLessThanOrEqual(28);
    }
    expect(ruleOptionProblems({ ...base, tableName: 'a'.repeat(23) })).not.toEqual([]);
  });
});
