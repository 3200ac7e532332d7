import { describe, it, expect } from 'vitest';
import type { CommandResult, CommandRunner } from './command-runner.js';
import { entryPacket, parseConntrackLine, type ConntrackEntry } from './conntrack.js';
import { loadConntrackNetlink, netlinkMarkClearer, packRecords, unpackRecords, RECORD_BYTES, type MarkClearer } from './conntrack-netlink.js';
import { chooseMarkClearer, processMarkClearer, StrictCut } from './strict-cut.js';
import { formatIP } from '../net/ip.js';
import type { Packet } from '../contract.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const BIT = 0x100000;

function tcpLine(src: string, dst: string, sport: number, mark = BIT): string {
  const family = src.includes(':') ? 'ipv6 10' : 'ipv4 2';
  return `${family} tcp      6 431999 ESTABLISHED src=${src} dst=${dst} sport=${sport} dport=80 src=${dst} dst=${src} sport=80 dport=${sport} [ASSURED] mark=${mark} use=1`;
}

/** A conntrack whose `-L` answers wait until both families were asked, so only a parallel sweep finishes. */
function parallelListings(v4: string[], v6: string[]) {
  const asked: string[] = [];
  let release: () => void = () => {};
  const bothAsked = new Promise<void>((resolve) => (release = resolve));
  const runner: CommandRunner = async (command, args) => {
    if (command !== 'conntrack' || args[0] !== '-L') return { code: 0, stdout: '', stderr: '' };
    asked.push(args[2]);
    if (asked.length === 2) release();
    await bothAsked;
    return { code: 0, stdout: (args[2] === 'ipv4' ? v4 : v6).join('\n'), stderr: '' };
  };
  return { runner, asked };
}

/** Records each clear call: one per family is the batching under test. */
function recordingClearer(gone = 0): MarkClearer & { calls: Array<{ family: number; tuples: string[]; bit: number }> } {
  const calls: Array<{ family: number; tuples: string[]; bit: number }> = [];
  return {
    path: 'netlink',
    calls,
    async clear(family, entries, bit) {
      calls.push({ family, bit, tuples: entries.map((e) => `${e.src}:${e.srcPort}`) });
      return { cleared: entries.length - gone, gone, failed: 0 };
    },
  };
}

const denySources = (denied: Set<string>) => ({
  allows: (p: Packet) => !denied.has(formatIP(p.src)),
  interest: () => ({ all: true, ips: [] }),
});

describe('StrictCut', () => {
  it('lists both families at once and hands each family\'s denied connections to the clearer in one call', async () => {
    const v4 = Array.from({ length: 3000 }, (_, i) => tcpLine(`10.1.${i >> 8}.${i & 255}`, '10.2.0.1', 20000 + i));
    const v6 = Array.from({ length: 2000 }, (_, i) => tcpLine(`fd00::${(i + 1).toString(16)}`, 'fd00::ffff', 30000 + i));
    const { runner, asked } = parallelListings(v4, v6);
    const clearer = recordingClearer();
    const denied = new Set<string>();
    for (let i = 0; i < 3000; i += 2) denied.add(`10.1.${i >> 8}.${i & 255}`);
    for (let i = 0; i < 2000; i += 4) denied.add(`fd00::${(i + 1).toString(16)}`);
    const cut = new StrictCut({ run: runner, acceptedBit: BIT, failOpen: true, logger: silent, clearer });
    const result = await cut.sweep(denySources(denied));
    expect(asked.sort()).toEqual(['ipv4', 'ipv6']);
    const calls = [...clearer.calls].sort((a, b) => a.family - b.family);
    expect(calls.map((c) => [c.family, c.tuples.length, c.bit])).toEqual([[4, 1500, BIT], [6, 500, BIT]]);
    expect(calls[0].tuples.slice(0, 2)).toEqual(['10.1.0.0:20000', '10.1.0.2:20002']);
    expect(result).toMatchObject({ cut: 2000, gone: 0, failed: 0 });
  });

  it('skips entries without the accepted bit and counts connections that ended before the cut as gone', async () => {
    const { runner } = parallelListings([tcpLine('10.1.0.1', '10.2.0.1', 1000), tcpLine('10.1.0.2', '10.2.0.1', 1001, 1)], []);
    const clearer = recordingClearer(1);
    const cut = new StrictCut({ run: runner, acceptedBit: BIT, failOpen: true, logger: silent, clearer });
    const result = await cut.sweep(denySources(new Set(['10.1.0.1', '10.1.0.2'])));
    expect(clearer.calls.map((c) => c.tuples)).toEqual([['10.1.0.1:1000']]);
    expect(result).toMatchObject({ cut: 0, gone: 1, failed: 0 });
  });

  it('lists through the clearer when it can (the netlink dump), without running conntrack -L', async () => {
    const commands: string[] = [];
    const run: CommandRunner = async (command) => {
      commands.push(command);
      return { code: 0, stdout: '', stderr: '' };
    };
    const listed = new Map<number, ConntrackEntry[]>([
      [4, [parseConntrackLine(tcpLine('10.1.0.1', '10.2.0.1', 1000))!, parseConntrackLine(tcpLine('10.1.0.2', '10.2.0.1', 1001))!]],
      [6, [parseConntrackLine(tcpLine('fd00::1', 'fd00::ffff', 1002))!]],
    ]);
    const clearer = { ...recordingClearer(), list: async (family: 4 | 6) => listed.get(family)! };
    const cut = new StrictCut({ run, acceptedBit: BIT, failOpen: true, logger: silent, clearer });
    const result = await cut.sweep(denySources(new Set(['10.1.0.2', 'fd00::1'])));
    expect(commands).toEqual([]);
    expect(clearer.calls.map((c) => c.tuples).sort()).toEqual([['10.1.0.2:1001'], ['fd00::1:1002']]);
    expect(result.cut).toBe(2);
  });

  it('judges through allowsBatch when the judge has it, with the same verdicts as one by one', async () => {
    const lines = Array.from({ length: 2500 }, (_, i) => tcpLine(`10.3.${i >> 8}.${i & 255}`, '10.2.0.1', 10000 + i));
    const { runner } = parallelListings(lines, []);
    const clearer = recordingClearer();
    const denied = new Set(lines.filter((_, i) => i % 3 === 0).map((l) => /src=(\S+)/.exec(l)![1]));
    let batches = 0;
    const judge = {
      ...denySources(denied),
      allowsBatch(packets: readonly Packet[], out: Uint8Array) {
        batches++;
        packets.forEach((p, i) => (out[i] = denied.has(formatIP(p.src)) ? 0 : 1));
      },
    };
    const cut = new StrictCut({ run: runner, acceptedBit: BIT, failOpen: true, logger: silent, clearer });
    expect((await cut.sweep(judge)).cut).toBe(denied.size);
    expect(batches).toBe(3);
    expect(new Set(clearer.calls[0].tuples.map((t) => t.split(':')[0]))).toEqual(denied);
  });
});

describe('the mark clearers', () => {
  const entry = (line: string): ConntrackEntry => parseConntrackLine(line)!;

  it('pack each entry into 64 bytes: protocol, ports or ICMP type/code/id, the reply source port, both addresses, the reply source, the mark', () => {
    const tcp = entry('tcp      6 431999 ESTABLISHED src=10.1.2.3 dst=10.96.0.1 sport=4660 dport=80 src=10.4.5.6 dst=10.1.2.3 sport=8080 dport=4660 [ASSURED] mark=1048577 use=1');
    const icmp = entry('icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=4660 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=4660 mark=1048576 use=1');
    const v6 = entry(tcpLine('fd00::1', 'fd00::2', 443));
    const packed = packRecords([tcp, icmp, v6]);
    expect(packed.length).toBe(3 * RECORD_BYTES);
    expect([...packed.subarray(0, 12)]).toEqual([6, 0, 0, 0, 0x12, 0x34, 0, 80, 0, 0, 0x1f, 0x90]);
    expect([...packed.subarray(12, 16)]).toEqual([10, 1, 2, 3]);
    expect([...packed.subarray(28, 32)]).toEqual([10, 96, 0, 1]);
    expect([...packed.subarray(44, 48)]).toEqual([10, 4, 5, 6]);
    expect([...packed.subarray(60, 64)]).toEqual([0, 0x10, 0, 1]);
    expect([...packed.subarray(64, 74)]).toEqual([1, 8, 0, 0, 0, 0, 0, 0, 0x12, 0x34]);
    expect(packed[128 + 12]).toBe(0xfd);
    expect(packed[128 + 27]).toBe(1);
    expect(packed[128 + 43]).toBe(2);
  });

  it('read the dump\'s records back as the entries conntrack -L would print, each keeping its record for the cut', () => {
    const lines = [
      'tcp      6 431999 ESTABLISHED src=10.1.2.3 dst=10.96.0.1 sport=4660 dport=80 src=10.4.5.6 dst=10.1.2.3 sport=8080 dport=4660 [ASSURED] mark=1048577 use=1',
      'icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=4660 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=4660 mark=1048576 use=1',
    ];
    const entries = lines.map(entry);
    const fields = (e: ConntrackEntry) => ({ family: e.family, protocol: e.protocol, src: e.src, dst: e.dst, srcPort: e.srcPort, dstPort: e.dstPort, replySrc: e.replySrc, replySrcPort: e.replySrcPort, icmpType: e.icmpType, icmpCode: e.icmpCode, icmpId: e.icmpId, mark: e.mark });
    const back = unpackRecords(4, packRecords(entries));
    expect(back.map(fields)).toEqual(entries.map(fields));
    expect(back[0].record).toEqual(packRecords([entries[0]]));
    // The packet strict mode judges is the same whether the entry came from text or from the dump.
    const packet = (e: ConntrackEntry) => { const p = entryPacket(e); return { ...p, src: [...p.src], dst: [...p.dst] }; };
    expect(back.map(packet)).toEqual(entries.map(packet));
    const six = [entry(tcpLine('fd00::1', 'fd00::2', 443))];
    expect(unpackRecords(6, packRecords(six)).map(fields)).toEqual(six.map(fields));
  });

  it('hand the addon one packed buffer per family and name the errno of a failure', async () => {
    const calls: Array<{ family: number; bytes: number; count: number; bit: number }> = [];
    const binding = {
      recordBytes: RECORD_BYTES,
      async listMarked() { return Buffer.alloc(0); },
      async clearMarkBit(family: 4 | 6, tuples: Buffer, count: number, bit: number) {
        calls.push({ family, bytes: tuples.length, count, bit });
        return { cleared: count - 1, gone: 0, failed: 1, firstError: 1 };
      },
    };
    const clearer = netlinkMarkClearer(binding);
    const entries = [entry(tcpLine('10.1.0.1', '10.2.0.1', 1)), entry(tcpLine('10.1.0.2', '10.2.0.1', 2))];
    expect(await clearer.clear(4, entries, BIT)).toEqual({ cleared: 1, gone: 0, failed: 1, firstError: 'EPERM (errno 1)' });
    expect(calls).toEqual([{ family: 4, bytes: 2 * RECORD_BYTES, count: 2, bit: BIT }]);
  });

  it('fall back to one conntrack -U per connection, an ended connection counted as gone', async () => {
    const commands: string[][] = [];
    const run: CommandRunner = async (_command, args): Promise<CommandResult> => {
      commands.push(args);
      return args.includes('2') ? { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been updated.' } : { code: 0, stdout: '', stderr: '' };
    };
    const entries = [entry(tcpLine('10.1.0.1', '10.2.0.1', 1)), entry(tcpLine('10.1.0.2', '10.2.0.1', 2))];
    expect(await processMarkClearer(run).clear(4, entries, BIT)).toEqual({ cleared: 1, gone: 1, failed: 0 });
    expect(commands.map((a) => a[0])).toEqual(['-U', '-U']);
  });

  it('are the per-process one over a substitute runner, so tests never reach the kernel', () => {
    const run: CommandRunner = async () => ({ code: 0, stdout: '', stderr: '' });
    expect(chooseMarkClearer(run, true, silent).path).toBe('conntrack-process');
  });

  it('fall back to the per-process path with a warning naming what to install when the addon does not load', () => {
    const run: CommandRunner = async () => ({ code: 0, stdout: '', stderr: '' });
    const warnings: Array<{ obj: Record<string, unknown>; msg: string }> = [];
    const logger = { ...silent, warn: (obj: Record<string, unknown>, msg: string) => warnings.push({ obj, msg }) };
    const clearer = chooseMarkClearer(run, false, logger, () => loadConntrackNetlink('kwp-no-such-addon'));
    expect(clearer.path).toBe('conntrack-process');
    expect(warnings).toHaveLength(1);
    expect(warnings[0].obj).toMatchObject({ strictCut: 'conntrack-process' });
    expect(warnings[0].msg).toMatch(/libnetfilter-conntrack-dev.*npm rebuild kwp-conntrack-netlink/);
  });

  it('report why the addon is missing instead of throwing', () => {
    const loaded = loadConntrackNetlink('kwp-no-such-addon');
    expect('reason' in loaded && loaded.reason).toMatch(/kwp-no-such-addon/);
  });
});
