// Strict mode's sweep: after a change, the accepted connections the judge now
// denies lose their accepted bit, so their next packet is queued and dropped
// (conntrack.ts says why the bit is cleared rather than the entry deleted).
// Both families are listed, judged and cut in parallel. With the netlink addon
// built, the listing is one kernel-filtered dump and the cut one batch per
// family; without it, `conntrack -L` and one `conntrack -U` process per
// connection (about 10 ms each: 10,000 connections take minutes).

import type { Packet } from '../contract.js';
import type { HostLogger } from '../logger.js';
import { describeFailure, type CommandRunner } from './command-runner.js';
import { clearMarkArgs, entryPacket, listArgs, parseConntrackListing, type ConntrackEntry } from './conntrack.js';
import { loadConntrackNetlink, netlinkMarkClearer, type ClearResult, type MarkClearer } from './conntrack-netlink.js';
import type { PacketJudge } from './judge.js';

/** Entries judged between two yields to the event loop, so queued packets are answered during a large sweep. */
const JUDGE_SLICE = 1024;

export interface StrictCutOptions {
  run: CommandRunner;
  acceptedBit: number;
  /** The verdict when the judge throws. */
  failOpen: boolean;
  logger: HostLogger;
  clearer: MarkClearer;
}

export interface SweepResult {
  /** Connections whose accepted bit was cleared. */
  cut: number;
  /** Denied connections that ended before they could be cut. */
  gone: number;
  failed: number;
  /** Where the sweep's time went, per phase, the slower family's (the two run side by side). */
  millis: { list: number; judge: number; clear: number };
}

interface FamilySweep extends ClearResult {
  millis: SweepResult['millis'];
}

export class StrictCut {
  constructor(private readonly options: StrictCutOptions) {}

  get path(): MarkClearer['path'] {
    return this.options.clearer.path;
  }

  /** List, judge and cut both families at once. */
  async sweep(judge: PacketJudge): Promise<SweepResult> {
    const [v4, v6] = await Promise.all([this.sweepFamily(judge, 4), this.sweepFamily(judge, 6)]);
    const slower = (k: keyof SweepResult['millis']) => Math.max(v4.millis[k], v6.millis[k]);
    return { cut: v4.cleared + v6.cleared, gone: v4.gone + v6.gone, failed: v4.failed + v6.failed, millis: { list: slower('list'), judge: slower('judge'), clear: slower('clear') } };
  }

  private async sweepFamily(judge: PacketJudge, family: 4 | 6): Promise<FamilySweep> {
    const bit = this.options.acceptedBit;
    const t0 = performance.now();
    const millis = { list: 0, judge: 0, clear: 0 };
    const listed = await this.list(family);
    if (listed === undefined) return { cleared: 0, gone: 0, failed: 0, millis };
    const accepted = listed.filter((e) => (e.mark & bit) !== 0);
    const t1 = performance.now();
    millis.list = t1 - t0;
    const denied = await this.denied(judge, accepted);
    const t2 = performance.now();
    millis.judge = t2 - t1;
    if (denied.length === 0) return { cleared: 0, gone: 0, failed: 0, millis };
    const result = { ...(await this.options.clearer.clear(family, denied, bit)), millis };
    millis.clear = performance.now() - t2;
    if (result.failed > 0) {
      this.options.logger.warn({ family, failed: result.failed, of: denied.length, error: result.firstError, path: this.path }, 'strict mode could not cut some connections the policy now denies');
    }
    return result;
  }

  /** The family's entries with the accepted bit, through the clearer when it lists, else `conntrack -L`; undefined (logged) when that fails. */
  private async list(family: 4 | 6): Promise<ConntrackEntry[] | undefined> {
    const bit = this.options.acceptedBit;
    const clearer = this.options.clearer;
    if (clearer.list) {
      try {
        return await clearer.list(family, bit);
      } catch (err) {
        this.options.logger.warn({ family, error: err instanceof Error ? err.message : String(err), path: clearer.path }, 'strict mode could not list connections');
        return undefined;
      }
    }
    const args = listArgs(family, bit);
    const listing = await this.options.run('conntrack', args);
    if (listing.code !== 0) {
      this.options.logger.warn({ error: describeFailure('conntrack', args, listing) }, 'strict mode could not list connections');
      return undefined;
    }
    return parseConntrackListing(listing.stdout);
  }

  /** The entries the judge now denies, judged as the packet that opened them. */
  private async denied(judge: PacketJudge, entries: readonly ConntrackEntry[]): Promise<ConntrackEntry[]> {
    const denied: ConntrackEntry[] = [];
    let verdicts = new Uint8Array(0);
    for (let start = 0; start < entries.length; start += JUDGE_SLICE) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      const slice = entries.slice(start, start + JUDGE_SLICE);
      const packets: Packet[] = slice.map(entryPacket);
      if (verdicts.length < packets.length) verdicts = new Uint8Array(packets.length);
      this.judgeSlice(judge, packets, verdicts);
      for (let i = 0; i < slice.length; i++) if (verdicts[i] === 0) denied.push(slice[i]);
    }
    return denied;
  }

  private judgeSlice(judge: PacketJudge, packets: Packet[], out: Uint8Array): void {
    if (judge.allowsBatch) {
      try {
        judge.allowsBatch(packets, out);
        return;
      } catch {
        // Judged one by one below, so one bad packet costs only its own verdict.
      }
    }
    for (let i = 0; i < packets.length; i++) {
      let allowed: boolean;
      try {
        allowed = judge.allows(packets[i]);
      } catch {
        allowed = this.options.failOpen;
      }
      out[i] = allowed ? 1 : 0;
    }
  }
}

/** Today's fallback: one `conntrack -U` per entry, in order. */
export function processMarkClearer(run: CommandRunner): MarkClearer {
  return {
    path: 'conntrack-process',
    async clear(family, entries, bit) {
      const result: ClearResult = { cleared: 0, gone: 0, failed: 0 };
      for (const entry of entries) {
        const args = clearMarkArgs(entry, bit);
        const r = await run('conntrack', args);
        // Exit 1 with "0 flow entries" means the connection ended meanwhile: nothing to cut.
        if (r.code === 0) result.cleared++;
        else if (/0 flow entries/.test(r.stderr)) result.gone++;
        else {
          result.failed++;
          result.firstError ??= describeFailure('conntrack', args, r);
        }
      }
      return result;
    },
  };
}

/**
 * The netlink clearer when the addon loads, else the per-process one, with a
 * log line saying which and why. A substitute runner (tests) means conntrack
 * is the substitute's: the per-process path over it, never the real kernel.
 */
export function chooseMarkClearer(run: CommandRunner, substituteRunner: boolean, logger: HostLogger, load = loadConntrackNetlink): MarkClearer {
  if (substituteRunner) return processMarkClearer(run);
  const loaded = load();
  if ('binding' in loaded) {
    logger.info({ strictCut: 'netlink' }, 'strict mode cuts connections in netlink batches (kwp-conntrack-netlink)');
    return netlinkMarkClearer(loaded.binding);
  }
  logger.warn(
    { strictCut: 'conntrack-process', reason: loaded.reason },
    'strict mode cuts connections with one conntrack process each (about 10 ms per connection): the optional kwp-conntrack-netlink addon is not built; install libnetfilter-conntrack-dev and run npm rebuild kwp-conntrack-netlink',
  );
  return processMarkClearer(run);
}
