// The dataplane: kernel rules feed the first packets of connections to and from
// interesting IPs into an NFQUEUE, each is parsed and put to the judge, and the
// verdict goes straight back. Accepted connections are marked in conntrack so
// the rest of their packets never leave the kernel. A second queue sees DNS
// answers and reports the addresses they carry.
//
// The packet path does no I/O and no logging: it parses, asks the judge,
// answers the kernel and bumps counters. Everything slow (rule updates, the
// strict-mode conntrack sweep) runs off it, serialized.

import { setPriority } from 'node:os';
import type { Packet } from '../contract.js';
import { runCommand, type CommandRunner } from './command-runner.js';
import { dialledArgs, parseConntrackListing } from './conntrack.js';
import type { MarkClearer } from './conntrack-netlink.js';
import { parseDnsResponse } from './dns.js';
import { FastPath, type FastPathOptions } from './fast-path.js';
import { IpsetSession } from './ipset-session.js';
import { chooseMarkClearer, StrictCut, type SweepResult } from './strict-cut.js';
import type { PacketJudge } from './judge.js';
import { BusyPoll } from './busy-poll.js';
import { KernelRules, type ModeChoice } from './kernel-rules.js';
import { LatencyHistogram } from './latency-histogram.js';
import { NF_ACCEPT, NF_DROP, NF_REPEAT, type PacketQueue, type QueueOpener } from './nfqueue.js';
import { queueReaderOpener, type QueueReader } from './nfqueue-batch.js';
import { parsePacket, transportPayload } from './packet-parser.js';
import { DEFAULT_MARKS, type Interest, type MarkBits, type QueueMode } from './rules.js';
import type { HostLogger } from '../logger.js';


export interface DataplaneOptions {
  /** nftables table name (family inet); iptables chains are named after it. */
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  /** Packets pass when nobody listens on the queue (crash, restart). Default true. */
  failOpen: boolean;
  /** After each refresh, send accepted connections the judge now denies back through the queue. Default true. */
  strict: boolean;
  mode?: ModeChoice;
  logger: HostLogger;
  /** Called for every A/AAAA record of a DNS answer; off the packet path's verdict. */
  onDnsAnswer?: (name: string, address: string, ttl: number) => void;
  marks?: MarkBits;
  /**
   * Nice value (-20..19) for the thread that runs the packet path, set at
   * start; unset leaves it alone. A verdict wakes the connection's endpoints
   * inside the verdict syscall, and on a busy node they then preempt the agent
   * before it reads the next packet: the tail of the packet time is mostly
   * that wait (docs/dataplane.md, "Where the packet time goes"). Negative values
   * need root or CAP_SYS_NICE; refusal is logged and the dataplane runs anyway.
   */
  packetThreadNice?: number;
  /**
   * After each policy packet, keep the packet thread polling the queue for
   * this many microseconds instead of sleeping, so the next packet is judged
   * on warm CPU caches (busy-poll.ts). 0 or unset: off. Costs CPU while
   * packets come closer together than the window.
   */
  busyPollMicros?: number;
  /**
   * The kernel fast path (docs/dataplane.md): decided tuples go into kernel
   * sets so their next connections are decided without the agent. Absent:
   * off. Whoever changes what the judge decides must call
   * `fastPath.invalidate` at once (the agent wires it to the cluster state
   * and the engine: fast-path-invalidation.ts).
   */
  fastPath?: FastPathOptions;
  /** Substitutes for tests. */
  runner?: CommandRunner;
  /** How strict mode clears the accepted bit; default: netlink batches when the addon is built (strict-cut.ts). */
  markClearer?: MarkClearer;
  /**
   * Which reader opens the queues when no `queueOpener` is given: `auto`
   * (default) the batch reader (`kwp-nfqueue-batch`, a wakeup's packets in
   * one call, their verdicts in one send) when it is built, else the
   * `nfqueue` binding; `batch` or `binding` to insist on one.
   */
  queueReader?: QueueReader;
  queueOpener?: QueueOpener;
  setThreadPriority?: (nice: number) => void;
}

export interface DataplaneCounters {
  packets: number;
  accepted: number;
  dropped: number;
  parseErrors: number;
  judgeErrors: number;
  /** Packets judged as the reply of their connection (it predates the agent, or strict mode cut it). */
  replyDirection: number;
  dnsPackets: number;
  dnsAnswers: number;
  strictSweeps: number;
  /** Accepted connections strict mode sent back to the queue. */
  strictCut: number;
  /** Connections strict mode should have cut but could not (the cut's error is logged). */
  strictCutFailures: number;
}

const UDP_HEADER_LENGTH = 8;

export class Dataplane {
  readonly counters: DataplaneCounters = {
    packets: 0,
    accepted: 0,
    dropped: 0,
    parseErrors: 0,
    judgeErrors: 0,
    replyDirection: 0,
    dnsPackets: 0,
    dnsAnswers: 0,
    strictSweeps: 0,
    strictCut: 0,
    strictCutFailures: 0,
  };
  readonly decisionMicros = new LatencyHistogram();
  /** The kernel fast path, when the options ask for it. */
  readonly fastPath: FastPath | undefined;

  private readonly marks: MarkBits;
  private readonly rules: KernelRules;
  private readonly run: CommandRunner;
  private judge: PacketJudge | undefined;
  private policyQueue: PacketQueue | undefined;
  private dnsQueue: PacketQueue | undefined;
  private lastInterestKey = '';
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  private started = false;
  /** Cleared bits ORed with the accepted bit: the mark an accepted packet returns with. */
  private readonly clearQueueBits: number;
  private acceptVerdict = NF_ACCEPT;
  private appliedNice: number | undefined;
  private strictCut: StrictCut | undefined;
  /** The last strict-mode sweep: what it cut and where its time went. */
  lastSweep: SweepResult | undefined;
  /** Packets of the current read wakeup waiting for one allowsBatch call (judges that have it). */
  private readonly waiting: Array<{ id: number; nfmark: number; packet: Packet; started: number }> = [];
  private flushScheduled = false;
  private batchVerdicts = new Uint8Array(64);
  /** When each packet whose verdict the batch reader holds was read: its span ends once the wakeup's verdicts are sent. */
  private heldStarts: number[] = [];
  /** The reader that opened the queues: `batch`, `binding`, or `custom` (options.queueOpener). */
  private openedWith: 'batch' | 'binding' | 'custom' | undefined;
  /** Polling instead of sleeping after a packet (options.busyPollMicros; window 0: off). */
  readonly busyPoll: BusyPoll;

  constructor(private readonly options: DataplaneOptions) {
    this.marks = options.marks ?? DEFAULT_MARKS;
    this.run = options.runner ?? runCommand;
    const fastPath = options.fastPath ? { timeoutSeconds: options.fastPath.timeoutSeconds, maxEntries: options.fastPath.maxEntries } : undefined;
    this.rules = new KernelRules(
      { tableName: options.tableName, queueId: options.queueId, dnsQueueId: options.dnsQueueId, failOpen: options.failOpen, marks: this.marks, fastPath },
      this.run,
      options.logger,
      // A test's runner records `ipset restore` scripts; a real agent keeps one ipset process.
      fastPath && !options.runner ? new IpsetSession() : undefined,
    );
    this.fastPath = options.fastPath ? new FastPath(this.rules, options.tableName, options.fastPath, options.logger) : undefined;
    this.clearQueueBits = ~(this.marks.queue | this.marks.dns | this.marks.reply) >>> 0;
    this.busyPoll = new BusyPoll(options.busyPollMicros ?? 0);
  }

  get queueMode(): QueueMode | undefined {
    return this.rules.queueMode;
  }

  /**
   * Bind the queues, then install the rules: in this order so that no packet is
   * queued before someone listens (with fail-closed that would drop it).
   */
  async start(judge: PacketJudge): Promise<void> {
    if (this.started) throw new Error('Dataplane.start called twice');
    this.judge = judge;
    this.applyPacketThreadNice();
    let open = this.options.queueOpener;
    if (open) this.openedWith = 'custom';
    else ({ opener: open, reader: this.openedWith } = queueReaderOpener(this.options.queueReader));
    this.policyQueue = open(this.options.queueId, (id, mark, payload) => this.onPolicyPacket(id, mark, payload), {
      // A judge with allowsBatch answers the wakeup's packets now, so they go out in the same send.
      beforeSend: () => {
        if (this.waiting.length > 0) this.flushWaiting();
      },
      afterSend: () => this.endHeldSpans(),
    });
    this.dnsQueue = open(this.options.dnsQueueId, (id, mark, payload) => this.onDnsPacket(id, mark, payload));
    const mode = await this.rules.probe(this.options.mode ?? 'auto');
    // An accepted packet continues at the next hook function. In nft mode that is
    // the next base chain, so another agent's table still sees it. In xtables mode
    // the queue rule sits in iptables' mangle table, which every agent on the node
    // shares: accepting would skip the other agents' rules after ours. NF_REPEAT
    // runs mangle again instead; our own bits are cleared by then, so only the
    // other agents' rules still match. (Other mangle rules run twice for first
    // packets; they are normally idempotent marks.)
    this.acceptVerdict = mode === 'xtables' ? NF_REPEAT : NF_ACCEPT;
    const interest = this.currentInterest();
    try {
      await this.rules.install(interest);
    } catch (err) {
      await this.rules.remove().catch(() => undefined);
      throw err;
    }
    this.lastInterestKey = interestKey(interest);
    this.fastPath?.start();
    if (this.options.strict) this.strictCut = this.createStrictCut();
    this.started = true;
    this.options.logger.info(
      {
        mode, queueReader: this.openedWith, table: this.options.tableName, queueId: this.options.queueId, dnsQueueId: this.options.dnsQueueId, failOpen: this.options.failOpen, strict: this.options.strict, strictCut: this.strictCut?.path, packetThreadNice: this.appliedNice,
        fastPath: this.fastPath ? (this.fastPath.blocker ?? 'on') : 'off',
      },
      `dataplane running with the ${mode === 'nft' ? 'nftables queue statement' : 'xtables NFQUEUE target'}`,
    );
  }

  /** Which reader opened the queues (`batch`, `binding`, or `custom` for options.queueOpener); undefined before start. */
  get queueReader(): 'batch' | 'binding' | 'custom' | undefined {
    return this.openedWith;
  }

  /** The batch reader's wakeups and the policy packets they carried, and verdicts the kernel refused; undefined with another reader. */
  get queueReadStats(): { wakeups: number; packets: number; verdictFailures: number } | undefined {
    const queue = this.policyQueue as Partial<{ wakeups: number; packets: number; verdictFailures: number }> | undefined;
    if (queue?.wakeups === undefined) return undefined;
    return { wakeups: queue.wakeups, packets: queue.packets ?? 0, verdictFailures: queue.verdictFailures ?? 0 };
  }

  /** The nice value the packet thread asked for and got, if any. */
  get packetThreadNice(): number | undefined {
    return this.appliedNice;
  }

  private applyPacketThreadNice(): void {
    const nice = this.options.packetThreadNice;
    if (nice === undefined) return;
    // Linux keeps a nice value per thread and pid 0 means the calling one: only
    // the JS thread (the packet path) is raised, not libuv's or V8's helpers.
    const set = this.options.setThreadPriority ?? ((value: number) => setPriority(0, value));
    try {
      set(nice);
      this.appliedNice = nice;
    } catch (err) {
      this.options.logger.warn({ nice, error: err instanceof Error ? err.message : String(err) }, 'could not set the packet thread priority; running at the inherited one');
    }
  }

  /**
   * Interest or policy changed: update the sets, then (strict mode) sweep
   * conntrack. Calls during a refresh coalesce into one more pass.
   */
  refresh(): Promise<void> {
    if (!this.started) return Promise.resolve();
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      try {
        do {
          this.refreshAgain = false;
          await this.refreshOnce();
        } while (this.refreshAgain);
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  private async refreshOnce(): Promise<void> {
    const interest = this.currentInterest();
    const key = interestKey(interest);
    if (key !== this.lastInterestKey) {
      await this.rules.updateInterest(interest);
      this.lastInterestKey = key;
      this.options.logger.debug({ all: interest.all, ips: interest.ips.length }, 'dataplane interest updated');
    }
    if (this.options.strict) {
      // The change that led here invalidated the fast path's sets; the sweep
      // lists conntrack only once that reached the kernel, so it sees every
      // connection a stale entry let in, and none it cuts is let in again.
      await this.fastPath?.settled();
      await this.sweepConntrack();
    }
  }

  /** How strict mode cuts (`netlink` or `conntrack-process`); undefined before start or without strict mode. */
  get strictCutPath(): MarkClearer['path'] | undefined {
    return this.strictCut?.path;
  }

  private createStrictCut(): StrictCut {
    const clearer = this.options.markClearer ?? chooseMarkClearer(this.run, this.options.runner !== undefined, this.options.logger);
    return new StrictCut({ run: this.run, acceptedBit: this.marks.accepted, failOpen: this.options.failOpen, logger: this.options.logger, clearer });
  }

  /** Clear the accepted bit of connections the judge would now deny (both families at once); returns how many. */
  async sweepConntrack(): Promise<number> {
    const judge = this.judge;
    if (!judge) return 0;
    this.strictCut ??= this.createStrictCut();
    this.counters.strictSweeps++;
    const sweep = await this.strictCut.sweep(judge);
    this.lastSweep = sweep;
    const { cut, failed } = sweep;
    this.counters.strictCut += cut;
    this.counters.strictCutFailures += failed;
    if (cut > 0) this.options.logger.info({ connections: cut, path: this.strictCut.path }, 'strict mode cut connections the policy now denies');
    return cut;
  }

  /**
   * Where the kernel sent the connections `src` opened to `dst:dstPort`: the
   * endpoints (address and port) the reply direction of their conntrack
   * entries names, after a Service proxy's DNAT. Empty when conntrack knows none.
   */
  async dialledEndpoints(query: { family: 4 | 6; protocol: number; src: string; dst: string; dstPort: number }): Promise<Array<{ address: string; port: number }>> {
    const args = dialledArgs(query.family, query.protocol, query.src, query.dst, query.dstPort);
    const listing = await this.run('conntrack', args);
    if (listing.code !== 0) return [];
    const seen = new Map<string, { address: string; port: number }>();
    for (const entry of parseConntrackListing(listing.stdout)) seen.set(`${entry.replySrc}|${entry.replySrcPort}`, { address: entry.replySrc, port: entry.replySrcPort });
    return [...seen.values()];
  }

  /** Remove every rule the dataplane added. The queues stay bound until the process exits (see nfqueue.ts). */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.fastPath?.stop();
    this.busyPoll.stop();
    if (this.refreshing) await this.refreshing.catch(() => undefined);
    await this.rules.remove();
  }

  private currentInterest(): Interest {
    const interest = this.judge!.interest();
    return { all: interest.all, ips: [...new Set(interest.ips)].sort() };
  }

  private onPolicyPacket(id: number, nfmark: number, payload: Buffer): void {
    this.counters.packets++;
    const started = performance.now();
    const packet: Packet | undefined = parsePacket(payload);
    if (packet !== undefined) {
      if ((nfmark & this.marks.reply) !== 0) {
        this.counters.replyDirection++;
        reverse(packet);
      }
      // The queue sits after the Service proxy's DNAT and before its hairpin
      // SNAT, so a connection a Service sent back to its own client arrives
      // with the pod's address on both ends. Nothing else can: a pod's traffic
      // to its own IP never leaves its network namespace, and the node's own
      // goes over loopback, which the classify chains skip. docs/semantics.md, "Hairpin".
      if (sameAddress(packet.src, packet.dst)) packet.serviceHairpin = true;
    }
    if (packet === undefined) {
      this.counters.parseErrors++;
      this.answer(id, nfmark, this.options.failOpen, started);
      return;
    }
    if (this.judge!.allowsBatch) {
      // Answered together with the rest of this wakeup's packets, right after the read loop.
      this.waiting.push({ id, nfmark, packet, started });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flushWaiting());
      }
      return;
    }
    const fastPath = this.fastPath;
    const ticket = fastPath ? fastPath.ticket() : -1;
    let allowed: boolean;
    try {
      allowed = this.judge!.allows(packet);
    } catch {
      this.counters.judgeErrors++;
      this.answer(id, nfmark, this.options.failOpen, started);
      return;
    }
    this.answer(id, nfmark, allowed, started);
    if (ticket >= 0 && (nfmark & this.marks.reply) === 0 && fastPath!.valid(ticket)) fastPath!.add(packet, allowed);
  }

  private flushWaiting(): void {
    this.flushScheduled = false;
    const batch = this.waiting.splice(0);
    if (batch.length === 0) return;
    const packets = batch.map((w) => w.packet);
    // Taken before the judge sees the batch, checked when its verdicts are in (fast-path.ts).
    const ticket = this.fastPath ? this.fastPath.ticket() : -1;
    if (this.judge!.allowsBatchAsync) {
      // Verdicts by packet id once the judge has them; the thread reads on meanwhile.
      const later = new Uint8Array(batch.length);
      let answered: Promise<void> | undefined;
      try {
        answered = this.judge!.allowsBatchAsync(packets, later);
      } catch {
        answered = Promise.reject(new Error('allowsBatchAsync threw'));
      }
      if (answered) {
        answered.then(() => this.answerBatch(batch, later, false, ticket), () => this.answerBatch(batch, later, true, ticket));
        return;
      }
    }
    if (this.batchVerdicts.length < batch.length) this.batchVerdicts = new Uint8Array(batch.length * 2);
    const out = this.batchVerdicts;
    let failed = false;
    try {
      this.judge!.allowsBatch!(packets, out);
    } catch {
      failed = true;
    }
    this.answerBatch(batch, out, failed, ticket);
  }

  private answerBatch(batch: ReadonlyArray<{ id: number; nfmark: number; started: number; packet: Packet }>, out: Uint8Array, failed: boolean, ticket: number): void {
    if (failed) this.counters.judgeErrors += batch.length;
    for (let i = 0; i < batch.length; i++) {
      const w = batch[i];
      this.answer(w.id, w.nfmark, failed ? this.options.failOpen : out[i] === 1, w.started);
    }
    const fastPath = this.fastPath;
    if (failed || ticket < 0 || !fastPath || !fastPath.valid(ticket)) return;
    const reply = this.marks.reply;
    for (let i = 0; i < batch.length; i++) if ((batch[i].nfmark & reply) === 0) fastPath.add(batch[i].packet, out[i] === 1);
  }

  private answer(id: number, nfmark: number, allowed: boolean, started: number): void {
    const queue = this.policyQueue!;
    if (allowed) {
      this.counters.accepted++;
      // The commit chain copies this bit to the conntrack mark, then clears it.
      queue.verdict(id, this.acceptVerdict, ((nfmark & this.clearQueueBits) | this.marks.accepted) >>> 0);
    } else {
      this.counters.dropped++;
      queue.verdict(id, NF_DROP);
    }
    if (queue.holding) {
      // The verdict leaves with the rest of the wakeup's: the span ends then (endHeldSpans).
      this.heldStarts.push(started);
      return;
    }
    const now = performance.now();
    this.decisionMicros.record((now - started) * 1000);
    this.busyPoll.packet(now);
  }

  /** The batch reader sent a wakeup's verdicts: each held packet's span ends now. */
  private endHeldSpans(): void {
    const held = this.heldStarts;
    if (held.length === 0) return;
    const now = performance.now();
    for (let i = 0; i < held.length; i++) this.decisionMicros.record((now - held[i]) * 1000);
    held.length = 0;
    this.busyPoll.packet(now);
  }

  private onDnsPacket(id: number, nfmark: number, payload: Buffer): void {
    // Verdict first: a DNS answer is never held up by what we do with it.
    this.dnsQueue!.verdict(id, this.acceptVerdict, (nfmark & this.clearQueueBits) >>> 0);
    this.counters.dnsPackets++;
    const callback = this.options.onDnsAnswer;
    if (!callback) return;
    const message = transportPayload(payload, UDP_HEADER_LENGTH);
    if (!message) return;
    const answers = parseDnsResponse(message);
    if (!answers) return;
    for (const answer of answers) {
      this.counters.dnsAnswers++;
      try {
        callback(answer.name, answer.address, answer.ttl);
      } catch (err) {
        this.options.logger.error({ err }, 'onDnsAnswer threw');
      }
    }
  }

  /** A one-line summary for logs and test output. */
  describe(): string {
    const c = this.counters;
    return `mode=${this.queueMode ?? 'none'} packets=${c.packets} accepted=${c.accepted} dropped=${c.dropped} parseErrors=${c.parseErrors} dns=${c.dnsPackets} p50=${this.decisionMicros.p50().toFixed(1)}µs p99=${this.decisionMicros.p99().toFixed(1)}µs`;
  }
}

function sameAddress(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Turn a reply-direction packet into the original direction it answers. */
function reverse(packet: Packet): void {
  const src = packet.src;
  packet.src = packet.dst;
  packet.dst = src;
  const srcPort = packet.srcPort;
  packet.srcPort = packet.dstPort;
  packet.dstPort = srcPort;
}

function interestKey(interest: Interest): string {
  return interest.all ? '*' : interest.ips.join(',');
}

