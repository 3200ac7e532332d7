import { describe, it, expect } from 'vitest';
import { Dataplane, type DataplaneOptions } from './dataplane.js';
import type { CommandResult, CommandRunner } from './command-runner.js';
import type { PacketJudge } from './judge.js';
import { NF_ACCEPT, NF_DROP, NF_REPEAT, loadNfqueue, type QueueOpener } from './nfqueue.js';
import { buildPacket } from './packet-builder.js';
import { buildDnsResponse } from './dns-builder.js';
import { DEFAULT_MARKS } from './rules.js';
import { formatIP } from '../net/ip.js';
import { isKwpError } from '../errors.js';
import type { Packet } from '../contract.js';

interface Recorded {
  command: string;
  args: string[];
  stdin?: string;
}

/** A kernel without the nft queue statement, like this machine's; conntrack answers from `conntrackListing`. */
function fakeKernel(conntrackListing = '', hasNftQueue = false) {
  const commands: Recorded[] = [];
  const runner: CommandRunner = async (command, args, stdin) => {
    commands.push({ command, args, stdin });
    const ok: CommandResult = { code: 0, stdout: '', stderr: '' };
    if (!hasNftQueue && command === 'nft' && stdin?.includes('queue num') && stdin.includes('_probe')) return { code: 1, stdout: '', stderr: 'Error: No such file or directory' };
    if (command === 'conntrack' && args[0] === '-L') return args.includes('ipv4') ? { ...ok, stdout: conntrackListing } : ok;
    return ok;
  };
  return { commands, runner };
}

function fakeQueues() {
  const handlers = new Map<number, (id: number, mark: number, payload: Buffer) => void>();
  const verdicts: Array<{ queue: number; id: number; verdict: number; mark?: number }> = [];
  const opener: QueueOpener = (queueId, onPacket) => {
    handlers.set(queueId, onPacket);
    return { verdict: (id, verdict, mark) => verdicts.push({ queue: queueId, id, verdict, mark }) };
  };
  const deliver = (queueId: number, id: number, bytes: Uint8Array, mark = 0) => handlers.get(queueId)!(id, mark, Buffer.from(bytes));
  return { opener, verdicts, deliver };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/** Denies traffic from `deniedSrc`, and only cares about the IPs it was given. */
class DenySourceJudge implements PacketJudge {
  seen: Packet[] = [];
  constructor(
    public deniedSrc: string,
    public ips: string[] = ['10.244.0.2', '10.244.0.3'],
  ) {}
  allows(packet: Packet): boolean {
    this.seen.push(packet);
    return formatIP(packet.src) !== this.deniedSrc;
  }
  interest() {
    return { all: false, ips: this.ips };
  }
}

function setup(overrides: Partial<DataplaneOptions> = {}, conntrackListing = '', hasNftQueue = false) {
  const kernel = fakeKernel(conntrackListing, hasNftQueue);
  const queues = fakeQueues();
  const dataplane = new Dataplane({
    tableName: 'kwptest',
    queueId: 10,
    dnsQueueId: 11,
    failOpen: true,
    strict: true,
    logger: silent,
    runner: kernel.runner,
    queueOpener: queues.opener,
    ...overrides,
  });
  return { dataplane, kernel, queues };
}

const tcpSyn = (src: string, dst: string) => buildPacket({ src, dst, protocol: 6, srcPort: 40000, dstPort: 80 });

describe('Dataplane', () => {
  it('falls back to the xtables queue target when the nft queue statement is refused', async () => {
    const { dataplane, kernel } = setup();
    await dataplane.start(new DenySourceJudge('10.244.0.9'));
    expect(dataplane.queueMode).toBe('xtables');
    const ruleset = kernel.commands.find((c) => c.command === 'nft' && c.stdin?.includes('table inet kwptest {'));
    expect(ruleset?.stdin).toContain('elements = { 10.244.0.2, 10.244.0.3 }');
    expect(kernel.commands.some((c) => c.command === 'iptables' && c.args.includes('NFQUEUE') && c.args.includes('10'))).toBe(true);
  });

  it('accepts an allowed packet with the accepted bit and drops a denied one', async () => {
    const { dataplane, queues } = setup({}, '', true);
    await dataplane.start(new DenySourceJudge('10.244.0.3'));
    expect(dataplane.queueMode).toBe('nft');
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'), DEFAULT_MARKS.queue | 0x1);
    queues.deliver(10, 2, tcpSyn('10.244.0.3', '10.244.0.2'));
    expect(queues.verdicts).toEqual([
      // The queue bit is cleared, a foreign bit (0x1) kept, the accepted bit set.
      { queue: 10, id: 1, verdict: NF_ACCEPT, mark: DEFAULT_MARKS.accepted | 0x1 },
      { queue: 10, id: 2, verdict: NF_DROP, mark: undefined },
    ]);
    expect(dataplane.counters).toMatchObject({ packets: 2, accepted: 1, dropped: 1 });
    expect(dataplane.decisionMicros.count).toBe(2);
  });

  it('keeps polling for the busy-poll window after answering a packet, and not at all without one', async () => {
    const { dataplane, queues } = setup({ busyPollMicros: 50_000 }, '', true);
    await dataplane.start(new DenySourceJudge('10.244.0.3'));
    expect(dataplane.busyPoll.active).toBe(false);
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(dataplane.busyPoll.active).toBe(true);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(dataplane.busyPoll.turns).toBeGreaterThan(0);
    await dataplane.stop();

    const idle = setup({}, '', true);
    await idle.dataplane.start(new DenySourceJudge('10.244.0.3'));
    idle.queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(idle.dataplane.busyPoll.active).toBe(false);
    await idle.dataplane.stop();
  });

  it('in xtables mode repeats the mangle hook instead of accepting, so agents queued after it still see the packet', async () => {
    const { dataplane, queues } = setup();
    await dataplane.start(new DenySourceJudge('none'));
    // Another agent's queue bit (0x02000000) must survive for its own iptables rule.
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'), DEFAULT_MARKS.queue | 0x02000000);
    expect(queues.verdicts).toEqual([{ queue: 10, id: 1, verdict: NF_REPEAT, mark: DEFAULT_MARKS.accepted | 0x02000000 }]);
  });

  it.each([
    [true, NF_REPEAT],
    [false, NF_DROP],
  ])('answers an unparsable packet by the failure policy (failOpen %s)', async (failOpen, expected) => {
    const { dataplane, queues } = setup({ failOpen });
    await dataplane.start(new DenySourceJudge('none'));
    queues.deliver(10, 7, Uint8Array.from([0x45, 0, 0]));
    expect(queues.verdicts[0].verdict).toBe(expected);
    expect(dataplane.counters.parseErrors).toBe(1);
  });

  it('answers the packets of one read wakeup with one allowsBatch call when the judge has it, each as allows would', async () => {
    const { dataplane, queues } = setup({}, '', true);
    const judge = new (class extends DenySourceJudge {
      batches: number[] = [];
      allowsBatch(packets: readonly Packet[], out: Uint8Array) {
        this.batches.push(packets.length);
        packets.forEach((p, i) => { out[i] = this.allows(p) ? 1 : 0; });
      }
    })('10.244.0.3');
    await dataplane.start(judge);
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'), DEFAULT_MARKS.queue | 0x1);
    queues.deliver(10, 2, tcpSyn('10.244.0.3', '10.244.0.2'));
    queues.deliver(10, 3, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(queues.verdicts).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(judge.batches).toEqual([3]);
    expect(queues.verdicts).toEqual([
      { queue: 10, id: 1, verdict: NF_ACCEPT, mark: DEFAULT_MARKS.accepted | 0x1 },
      { queue: 10, id: 2, verdict: NF_DROP, mark: undefined },
      { queue: 10, id: 3, verdict: NF_ACCEPT, mark: DEFAULT_MARKS.accepted },
    ]);
    expect(dataplane.decisionMicros.count).toBe(3);
  });

  it('gives the verdicts of a batch by packet id once an asynchronous judge has them, reading on meanwhile', async () => {
    const { dataplane, queues } = setup({}, '', true);
    const answers: Array<() => void> = [];
    const judge = new (class extends DenySourceJudge {
      allowsBatch(): void { throw new Error('a judge that answers later is not asked synchronously'); }
      allowsBatchAsync(packets: readonly Packet[], out: Uint8Array) {
        return new Promise<void>((resolve) => answers.push(() => { packets.forEach((p, i) => { out[i] = this.allows(p) ? 1 : 0; }); resolve(); }));
      }
    })('10.244.0.3');
    await dataplane.start(judge);
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'));
    queues.deliver(10, 2, tcpSyn('10.244.0.3', '10.244.0.2'));
    await new Promise((r) => setImmediate(r));
    // The first wakeup's batch is with the judge; the next wakeup is read and batched on its own.
    queues.deliver(10, 3, tcpSyn('10.244.0.2', '10.244.0.3'));
    await new Promise((r) => setImmediate(r));
    expect(answers).toHaveLength(2);
    expect(queues.verdicts).toEqual([]);
    answers[1]();
    answers[0]();
    await new Promise((r) => setImmediate(r));
    expect(queues.verdicts).toEqual([
      { queue: 10, id: 3, verdict: NF_ACCEPT, mark: DEFAULT_MARKS.accepted },
      { queue: 10, id: 1, verdict: NF_ACCEPT, mark: DEFAULT_MARKS.accepted },
      { queue: 10, id: 2, verdict: NF_DROP, mark: undefined },
    ]);
    expect(dataplane.counters.judgeErrors).toBe(0);
  });

  it('answers a batch by the failure policy when an asynchronous judge rejects it', async () => {
    const { dataplane, queues } = setup({ failOpen: false });
    await dataplane.start({ allows: () => true, allowsBatch: () => undefined, allowsBatchAsync: () => Promise.reject(new Error('boom')), interest: () => ({ all: true, ips: [] }) });
    queues.deliver(10, 3, tcpSyn('10.244.0.2', '10.244.0.3'));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(queues.verdicts.map((v) => v.verdict)).toEqual([NF_DROP]);
    expect(dataplane.counters.judgeErrors).toBe(1);
  });

  it('answers a whole batch by the failure policy when allowsBatch throws', async () => {
    const { dataplane, queues } = setup({ failOpen: false });
    await dataplane.start({ allows: () => true, allowsBatch: () => { throw new Error('boom'); }, interest: () => ({ all: true, ips: [] }) });
    queues.deliver(10, 3, tcpSyn('10.244.0.2', '10.244.0.3'));
    queues.deliver(10, 4, tcpSyn('10.244.0.2', '10.244.0.3'));
    await new Promise((r) => setImmediate(r));
    expect(queues.verdicts.map((v) => v.verdict)).toEqual([NF_DROP, NF_DROP]);
    expect(dataplane.counters.judgeErrors).toBe(2);
  });

  it('answers by the failure policy when the judge throws', async () => {
    const { dataplane, queues } = setup({ failOpen: false });
    await dataplane.start({ allows: () => { throw new Error('boom'); }, interest: () => ({ all: true, ips: [] }) });
    queues.deliver(10, 3, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(queues.verdicts[0].verdict).toBe(NF_DROP);
    expect(dataplane.counters.judgeErrors).toBe(1);
  });

  it('always accepts DNS answers and reports their records', async () => {
    const answers: Array<[string, string, number]> = [];
    const { dataplane, queues } = setup({ onDnsAnswer: (name, address, ttl) => answers.push([name, address, ttl]) });
    await dataplane.start(new DenySourceJudge('10.244.0.53'));
    const dns = buildDnsResponse({
      question: { name: 'db.prod.svc', type: 'A' },
      answers: [{ name: 'db.prod.svc', type: 'A', address: '10.96.0.20', ttl: 30 }],
    });
    queues.deliver(11, 5, buildPacket({ src: '10.244.0.53', dst: '10.244.0.2', protocol: 17, srcPort: 53, dstPort: 33333, payload: dns }), DEFAULT_MARKS.dns);
    // Our DNS bit is cleared, or repeating the hook would queue the answer again.
    expect(queues.verdicts).toEqual([{ queue: 11, id: 5, verdict: NF_REPEAT, mark: 0 }]);
    expect(answers).toEqual([['db.prod.svc', '10.96.0.20', 30]]);
  });

  it('updates the interest sets on refresh only when they changed', async () => {
    const judge = new DenySourceJudge('none');
    const { dataplane, kernel } = setup({ strict: false });
    await dataplane.start(judge);
    const before = kernel.commands.length;
    await dataplane.refresh();
    expect(kernel.commands.length).toBe(before);
    judge.ips = ['10.244.0.2', '10.244.0.7'];
    await dataplane.refresh();
    expect(kernel.commands.at(-1)?.stdin).toContain('add element inet kwptest interest4 { 10.244.0.2, 10.244.0.7 }');
  });

  it('in strict mode clears the accepted bit of connections the judge now denies, and only those', async () => {
    const listing = [
      'tcp      6 431999 ESTABLISHED src=10.244.0.2 dst=10.244.0.3 sport=41000 dport=80 src=10.244.0.3 dst=10.244.0.2 sport=80 dport=41000 [ASSURED] mark=1048576 use=1',
      'tcp      6 431999 ESTABLISHED src=10.244.0.3 dst=10.244.0.2 sport=42000 dport=80 src=10.244.0.2 dst=10.244.0.3 sport=80 dport=42000 [ASSURED] mark=1048577 use=1',
      'udp      17 25 src=10.244.0.3 dst=10.244.0.2 sport=5000 dport=53 src=10.244.0.2 dst=10.244.0.3 sport=53 dport=5000 mark=0 use=1',
    ].join('\n');
    const judge = new DenySourceJudge('none');
    const { dataplane, kernel } = setup({}, listing);
    await dataplane.start(judge);
    judge.deniedSrc = '10.244.0.3';
    await dataplane.refresh();
    const updates = kernel.commands.filter((c) => c.command === 'conntrack' && c.args[0] === '-U');
    expect(updates.map((d) => d.args)).toEqual([
      ['-U', '-f', 'ipv4', '-s', '10.244.0.3', '-d', '10.244.0.2', '-p', 'tcp', '--sport', '42000', '--dport', '80', '--mark', '0/0x100000'],
    ]);
    expect(dataplane.counters.strictCut).toBe(1);
  });

  it('in strict mode judges a Service connection by its endpoint and cuts it when the endpoint is now denied', async () => {
    // 10.244.0.2 dialled the Service IP 10.96.0.10:8000; kube-proxy sent it to 10.244.0.3:80.
    const listing = 'tcp      6 431999 ESTABLISHED src=10.244.0.2 dst=10.96.0.10 sport=41000 dport=8000 src=10.244.0.3 dst=10.244.0.2 sport=80 dport=41000 [ASSURED] mark=1048576 use=1';
    const judge = { seen: [] as Packet[], allows(p: Packet) { this.seen.push(p); return formatIP(p.dst) !== '10.244.0.3'; }, interest: () => ({ all: true, ips: [] }) };
    const { dataplane, kernel } = setup({}, listing);
    await dataplane.start(judge);
    await dataplane.refresh();
    expect(judge.seen.map((p) => `${formatIP(p.src)}:${p.srcPort} -> ${formatIP(p.dst)}:${p.dstPort}`)).toEqual(['10.244.0.2:41000 -> 10.244.0.3:80']);
    const updates = kernel.commands.filter((c) => c.command === 'conntrack' && c.args[0] === '-U');
    expect(updates.map((u) => u.args.slice(3, 7))).toEqual([['-s', '10.244.0.2', '-d', '10.96.0.10']]);
  });

  it('flags a packet with the same pod address on both ends as a Service hairpin', async () => {
    const judge = new DenySourceJudge('none');
    const { dataplane, queues } = setup();
    await dataplane.start(judge);
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.2'));
    queues.deliver(10, 2, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(judge.seen.map((p) => p.serviceHairpin === true)).toEqual([true, false]);
  });

  it('judges a packet flagged as reply direction as the connection it answers', async () => {
    const judge = new DenySourceJudge('10.244.0.2');
    const { dataplane, queues } = setup();
    await dataplane.start(judge);
    // 10.244.0.3:80 answering 10.244.0.2:40000: the connection was opened by the denied source.
    const reply = buildPacket({ src: '10.244.0.3', dst: '10.244.0.2', protocol: 6, srcPort: 80, dstPort: 40000 });
    queues.deliver(10, 9, reply, DEFAULT_MARKS.queue | DEFAULT_MARKS.reply);
    expect(queues.verdicts).toEqual([{ queue: 10, id: 9, verdict: NF_DROP, mark: undefined }]);
    expect([formatIP(judge.seen[0].src), judge.seen[0].srcPort, judge.seen[0].dstPort]).toEqual(['10.244.0.2', 40000, 80]);
    expect(dataplane.counters.replyDirection).toBe(1);
  });

  it('clears the reply flag along with the queue bit on an accepted packet', async () => {
    const { dataplane, queues } = setup();
    await dataplane.start(new DenySourceJudge('none'));
    queues.deliver(10, 4, tcpSyn('10.244.0.3', '10.244.0.2'), DEFAULT_MARKS.queue | DEFAULT_MARKS.reply);
    expect(queues.verdicts[0]).toMatchObject({ verdict: NF_REPEAT, mark: DEFAULT_MARKS.accepted });
  });

  it('removes its nft table and xtables chains on stop', async () => {
    const { dataplane, kernel } = setup();
    await dataplane.start(new DenySourceJudge('none'));
    kernel.commands.length = 0;
    await dataplane.stop();
    expect(kernel.commands.some((c) => c.command === 'nft' && c.stdin?.includes('delete table inet kwptest'))).toBe(true);
    for (const tool of ['iptables', 'ip6tables']) {
      expect(kernel.commands.some((c) => c.command === tool && c.args.join(' ') === '-t mangle -X KWPTEST-POST')).toBe(true);
    }
  });

  it('raises the packet thread to the nice value it was given before binding the queues', async () => {
    const order: string[] = [];
    const queues = fakeQueues();
    const { dataplane } = setup({
      packetThreadNice: -10,
      setThreadPriority: (nice) => order.push(`nice ${nice}`),
      queueOpener: (queueId, onPacket) => {
        order.push(`open ${queueId}`);
        return queues.opener(queueId, onPacket);
      },
    });
    await dataplane.start(new DenySourceJudge('none'));
    expect(order).toEqual(['nice -10', 'open 10', 'open 11']);
    expect(dataplane.packetThreadNice).toBe(-10);
  });

  it('leaves the thread priority alone when no nice value is given', async () => {
    const calls: number[] = [];
    const { dataplane } = setup({ setThreadPriority: (nice) => calls.push(nice) });
    await dataplane.start(new DenySourceJudge('none'));
    expect(calls).toEqual([]);
    expect(dataplane.packetThreadNice).toBeUndefined();
  });

  it('logs a refused nice value and still runs the packet path', async () => {
    const warnings: string[] = [];
    const { dataplane, queues } = setup({
      packetThreadNice: -10,
      setThreadPriority: () => {
        throw new Error('EACCES: permission denied');
      },
      logger: { ...silent, warn: (_obj, msg) => warnings.push(msg) },
    });
    await dataplane.start(new DenySourceJudge('none'));
    expect(warnings).toEqual([expect.stringMatching(/packet thread priority/)]);
    expect(dataplane.packetThreadNice).toBeUndefined();
    queues.deliver(10, 1, tcpSyn('10.244.0.2', '10.244.0.3'));
    expect(queues.verdicts).toHaveLength(1);
  });

  it('rejects options that would collide in the kernel before touching it', () => {
    expect(() => setup({ queueId: 11 })).toThrow(/must differ/);
  });
});

describe('loadNfqueue', () => {
  it('turns a missing binding into one KWP_ERR_NFQUEUE_UNAVAILABLE line saying what to install', () => {
    let caught: unknown;
    try {
      loadNfqueue('nfqueue-that-is-not-installed');
    } catch (err) {
      caught = err;
    }
    expect(isKwpError(caught) && caught.code).toBe('KWP_ERR_NFQUEUE_UNAVAILABLE');
    expect((caught as Error).message).toMatch(/npm install nfqueue@0\.3\.2/);
    expect((caught as Error).message).not.toContain('\n');
  });
});
