import { describe, it, expect } from 'vitest';
import { Dataplane } from './dataplane.js';
import type { CommandRunner } from './command-runner.js';
import type { PacketJudge } from './judge.js';
import { NF_ACCEPT, NF_DROP } from './nfqueue.js';
import { batchQueueOpener, loadNfqueueBatch, MAX_BATCH_PACKETS, queueReaderOpener } from './nfqueue-batch.js';
import { buildPacket } from './packet-builder.js';
import { DEFAULT_MARKS } from './rules.js';
import { formatIP } from '../net/ip.js';
import type { Packet } from '../contract.js';

const SLOT_WORDS = 4;
const VERDICT_WORDS = 4;

/**
 * The addon as the JavaScript side sees it (src/nfqueue_batch.c): `wake`
 * writes packets into the receive buffer's slots and payload area as the C
 * reader does and calls that queue's callback once with their count; `verdicts`
 * records each datagram's verdict slots. `refuse` makes the next datagrams
 * fail (a negative errno), as a full socket would.
 */
function fakeAddon() {
  const datagrams: Array<Array<{ id: number; verdict: number; mark?: number }>> = [];
  const opened = new Map<number, { receive: ArrayBuffer; callback: (count: number) => void }>();
  let refuse = 0;
  const addon = {
    slotWords: SLOT_WORDS,
    verdictWords: VERDICT_WORDS,
    open(queueId: number, _socketBytes: number, _copyBytes: number, buffer: ArrayBuffer, maxPackets: number, onPackets: (count: number) => void) {
      expect(maxPackets).toBe(MAX_BATCH_PACKETS);
      opened.set(queueId, { receive: buffer, callback: onPackets });
      return { queueId };
    },
    verdicts(_reader: unknown, slots: ArrayBuffer, count: number): number {
      if (refuse > 0) {
        refuse--;
        return -105;
      }
      const words = new Uint32Array(slots);
      const sent = [];
      for (let i = 0; i < count; i++) {
        const v = words.subarray(i * VERDICT_WORDS, (i + 1) * VERDICT_WORDS);
        sent.push({ id: v[0], verdict: v[1], ...(v[3] & 1 ? { mark: v[2] } : {}) });
      }
      datagrams.push(sent);
      return 0;
    },
    close() {},
  };
  /** A wakeup of queue `queueId` (default 10, the tests' policy queue) with these packets. */
  const wake = (packets: Array<{ id: number; mark?: number; bytes: Uint8Array }>, queueId = 10) => {
    const { receive, callback } = opened.get(queueId)!;
    const slots = new Uint32Array(receive, 0, MAX_BATCH_PACKETS * SLOT_WORDS);
    const bytes = new Uint8Array(receive);
    let offset = MAX_BATCH_PACKETS * SLOT_WORDS * 4;
    packets.forEach((p, i) => {
      slots.set([p.id, p.mark ?? 0, offset, p.bytes.length], i * SLOT_WORDS);
      bytes.set(p.bytes, offset);
      offset += p.bytes.length;
    });
    callback(packets.length);
  };
  return { addon, datagrams, wake, refuseNext: (n: number) => { refuse = n; } };
}

const tcpSyn = (src: string, dst: string, srcPort = 40000) => buildPacket({ src, dst, protocol: 6, srcPort, dstPort: 80 });
const silent = { debug() {}, info() {}, warn() {}, error() {} };
const runner: CommandRunner = async (command, _args, stdin) =>
  command === 'nft' && stdin?.includes('_probe') ? { code: 1, stdout: '', stderr: 'no queue statement' } : { code: 0, stdout: '', stderr: '' };

class DenySourceJudge implements PacketJudge {
  seen: Packet[] = [];
  constructor(public deniedSrc: string) {}
  allows(packet: Packet): boolean {
    this.seen.push(packet);
    return formatIP(packet.src) !== this.deniedSrc;
  }
  interest() {
    return { all: false, ips: ['10.244.0.2', '10.244.0.3'] };
  }
}

function dataplaneOver(fake: ReturnType<typeof fakeAddon>, failOpen = true) {
  return new Dataplane({
    tableName: 'kwptest', queueId: 10, dnsQueueId: 11, failOpen, strict: false, logger: silent, runner,
    queueOpener: batchQueueOpener(fake.addon),
  });
}

/** Each packet id's verdicts over all datagrams. */
function verdictsById(datagrams: Array<Array<{ id: number }>>): Map<number, number> {
  const byId = new Map<number, number>();
  for (const d of datagrams) for (const v of d) byId.set(v.id, (byId.get(v.id) ?? 0) + 1);
  return byId;
}

describe('the batch reader', () => {
  it('hands a wakeup\'s packets over in order and sends their verdicts in one datagram after the last one', () => {
    const fake = fakeAddon();
    const seen: number[] = [];
    const queue = batchQueueOpener(fake.addon)(10, (id) => {
      seen.push(id);
      queue.verdict(id, id % 2 ? NF_ACCEPT : NF_DROP, id % 2 ? 0x100 : undefined);
      // Held until the wakeup ends.
      expect(fake.datagrams).toEqual([]);
      expect(queue.holding).toBe(true);
    });
    fake.wake([1, 2, 3].map((id) => ({ id, bytes: tcpSyn('10.244.0.2', '10.244.0.3') })));
    expect(seen).toEqual([1, 2, 3]);
    expect(fake.datagrams).toEqual([[{ id: 1, verdict: NF_ACCEPT, mark: 0x100 }, { id: 2, verdict: NF_DROP }, { id: 3, verdict: NF_ACCEPT, mark: 0x100 }]]);
    expect(queue.holding).toBe(false);
    expect([queue.wakeups, queue.packets]).toEqual([1, 3]);
  });

  it('sends a verdict given outside a wakeup at once', () => {
    const fake = fakeAddon();
    const queue = batchQueueOpener(fake.addon)(10, () => undefined);
    queue.verdict(7, NF_ACCEPT);
    expect(fake.datagrams).toEqual([[{ id: 7, verdict: NF_ACCEPT }]]);
  });

  it('sends each verdict alone when the kernel refuses a wakeup\'s datagram, and counts those refused again', () => {
    const fake = fakeAddon();
    const queue = batchQueueOpener(fake.addon)(10, (id) => queue.verdict(id, NF_ACCEPT));
    fake.refuseNext(2); // the datagram, then the first verdict alone
    fake.wake([1, 2, 3].map((id) => ({ id, bytes: tcpSyn('10.244.0.2', '10.244.0.3') })));
    expect(fake.datagrams).toEqual([[{ id: 2, verdict: NF_ACCEPT }], [{ id: 3, verdict: NF_ACCEPT }]]);
    expect(queue.verdictFailures).toBe(1);
  });

  it('gives each packet a payload of its own, which the next wakeup does not overwrite', () => {
    const fake = fakeAddon();
    const payloads: Buffer[] = [];
    batchQueueOpener(fake.addon)(10, (_id, _mark, payload) => payloads.push(payload));
    fake.wake([{ id: 1, bytes: tcpSyn('10.244.0.2', '10.244.0.3') }]);
    fake.wake([{ id: 2, bytes: tcpSyn('10.244.0.9', '10.244.0.8') }]);
    expect(Buffer.compare(payloads[0], Buffer.from(tcpSyn('10.244.0.2', '10.244.0.3')))).toBe(0);
    expect(Buffer.compare(payloads[1], Buffer.from(tcpSyn('10.244.0.9', '10.244.0.8')))).toBe(0);
  });

  it('is an answer, not a crash, when the addon is not built', () => {
    expect(loadNfqueueBatch('kwp-nfqueue-batch-that-is-not-built')).toBeUndefined();
    expect(queueReaderOpener('binding').reader).toBe('binding');
  });
});

describe('the Dataplane over the batch reader', () => {
  it('gives every packet of a wakeup exactly one verdict, all in one send, with the one-packet judge', async () => {
    const fake = fakeAddon();
    const dataplane = dataplaneOver(fake);
    await dataplane.start(new DenySourceJudge('10.244.0.3'));
    const packets = Array.from({ length: 40 }, (_, i) => ({ id: i + 1, mark: DEFAULT_MARKS.queue, bytes: tcpSyn(i % 4 === 0 ? '10.244.0.3' : '10.244.0.2', '10.244.0.9', 40000 + i) }));
    fake.wake(packets.slice(0, 25));
    fake.wake(packets.slice(25));
    expect(fake.datagrams.map((d) => d.length)).toEqual([25, 15]);
    const byId = verdictsById(fake.datagrams);
    expect([...byId.keys()].sort((a, b) => a - b)).toEqual(packets.map((p) => p.id));
    expect([...byId.values()].every((n) => n === 1)).toBe(true);
    const dropped = fake.datagrams.flat().filter((v) => v.verdict === NF_DROP).map((v) => v.id);
    expect(dropped).toEqual(packets.filter((_, i) => i % 4 === 0).map((p) => p.id));
    expect(dataplane.counters).toMatchObject({ packets: 40, accepted: 30, dropped: 10 });
  });

  it('answers a wakeup through allowsBatch before its one send when the judge has it', async () => {
    const fake = fakeAddon();
    const dataplane = dataplaneOver(fake);
    const judge = new (class extends DenySourceJudge {
      batches: number[] = [];
      allowsBatch(packets: readonly Packet[], out: Uint8Array) {
        this.batches.push(packets.length);
        packets.forEach((p, i) => { out[i] = this.allows(p) ? 1 : 0; });
      }
    })('10.244.0.3');
    await dataplane.start(judge);
    fake.wake([1, 2, 3].map((id) => ({ id, bytes: tcpSyn(id === 2 ? '10.244.0.3' : '10.244.0.2', '10.244.0.9') })));
    // No turn of the event loop needed: the wakeup's end answered them.
    expect(judge.batches).toEqual([3]);
    expect(fake.datagrams).toEqual([[{ id: 1, verdict: NF_REPEAT_OR_ACCEPT(dataplane), mark: DEFAULT_MARKS.accepted }, { id: 2, verdict: NF_DROP }, { id: 3, verdict: NF_REPEAT_OR_ACCEPT(dataplane), mark: DEFAULT_MARKS.accepted }]]);
    await new Promise((r) => setImmediate(r));
    expect(fake.datagrams).toHaveLength(1);
  });

  it('ends each held packet\'s span only once the wakeup\'s verdicts are sent', async () => {
    const fake = fakeAddon();
    const dataplane = dataplaneOver(fake);
    const countsAtSend: number[] = [];
    const send = fake.addon.verdicts;
    fake.addon.verdicts = (reader, slots, count) => {
      countsAtSend.push(dataplane.decisionMicros.count);
      return send(reader, slots, count);
    };
    await dataplane.start(new DenySourceJudge('10.244.0.3'));
    fake.wake([1, 2, 3].map((id) => ({ id, bytes: tcpSyn('10.244.0.2', '10.244.0.9') })));
    expect(countsAtSend).toEqual([0]);
    expect(dataplane.decisionMicros.count).toBe(3);
  });

  it('answers by the failure policy, open or closed, when the judge throws', async () => {
    for (const failOpen of [true, false]) {
      const fake = fakeAddon();
      const dataplane = dataplaneOver(fake, failOpen);
      await dataplane.start({ allows: () => { throw new Error('boom'); }, interest: () => ({ all: true, ips: [] }) });
      fake.wake([1, 2].map((id) => ({ id, bytes: tcpSyn('10.244.0.2', '10.244.0.9') })));
      expect(fake.datagrams.flat().map((v) => v.verdict)).toEqual(failOpen ? [NF_REPEAT_OR_ACCEPT(dataplane), NF_REPEAT_OR_ACCEPT(dataplane)] : [NF_DROP, NF_DROP]);
      expect(dataplane.counters.judgeErrors).toBe(2);
    }
  });
});

/** The accept verdict the Dataplane gives in its queue mode (the fake kernel refuses the nft queue statement: xtables, NF_REPEAT). */
function NF_REPEAT_OR_ACCEPT(dataplane: Dataplane): number {
  return dataplane.queueMode === 'xtables' ? 4 : NF_ACCEPT;
}
