// Applies the rules from rules.ts to the kernel: probes which queue mode works,
// installs, keeps the interest sets current and removes everything on stop.
// Every kernel change goes through one promise chain, so a refresh can never
// interleave with an install or a removal.

import { KwpError } from '../errors.js';
import { describeFailure, type CommandRunner } from './command-runner.js';
import {
  nftClassifyReplacement,
  nftInterestUpdate,
  nftQueueProbe,
  nftRuleset,
  nftTableRemoval,
  ruleOptionProblems,
  xtablesChainName,
  nftCommitChains,
  xtablesCommands,
  xtablesQueueProbe,
  type Interest,
  type QueueMode,
  type RuleOptions,
} from './rules.js';
import type { HostLogger } from '../logger.js';
import { ipsetAllNames, ipsetCreateScript, kernelDecidedCounts } from './fast-path-rules.js';
import type { IpsetSession } from './ipset-session.js';

export type ModeChoice = 'auto' | QueueMode;


export class KernelRules {
  private mode: QueueMode | undefined;
  private installedAll: boolean | undefined;
  private installedXtables: Array<'iptables' | 'ip6tables'> = [];
  private tail: Promise<unknown> = Promise.resolve();
  /** Whether the installed rules include the fast path (options ask for it and, in xtables mode, ipset worked). */
  private fastPathInstalled = false;

  /**
   * @param ipset the long-lived ipset process for the fast path's scripts in
   *   xtables mode (ipset-session.ts); without it each script is one
   *   `ipset restore -exist` through `run` (tests record those).
   */
  constructor(
    private readonly options: RuleOptions,
    private readonly run: CommandRunner,
    private readonly logger: HostLogger,
    private readonly ipset?: IpsetSession,
  ) {
    const problems = ruleOptionProblems(options);
    if (problems.length > 0) throw new KwpError('KWP_ERR_USAGE', `dataplane options: ${problems.join('; ')}`);
  }

  get queueMode(): QueueMode | undefined {
    return this.mode;
  }

  /** True once install() put the fast path's sets and rules in place. */
  get fastPathReady(): boolean {
    return this.fastPathInstalled;
  }

  /** The options the installed rules were made from: without the fast path when it could not be installed. */
  private get effective(): RuleOptions {
    return this.fastPathInstalled ? this.options : { ...this.options, fastPath: undefined };
  }

  /**
   * Runs `step` in the one order every kernel change of this agent follows
   * (install, interest updates, fast-path fills and invalidations, removal):
   * what a step reads when it starts, it reads after every step queued
   * before it has finished in the kernel.
   */
  exclusive<T>(step: () => Promise<T>): Promise<T> {
    return this.serialized(step);
  }

  private serialized<T>(step: () => Promise<T>): Promise<T> {
    const result = this.tail.then(step, step);
    this.tail = result.catch(() => undefined);
    return result;
  }

  private async nft(script: string): Promise<void> {
    const result = await this.run('nft', ['-f', '-'], script);
    if (result.code !== 0) throw new KwpError('KWP_ERR_DATAPLANE', `${describeFailure('nft', ['-f', '-'], result)}; script was:\n${script}`);
  }

  async probe(choice: ModeChoice): Promise<QueueMode> {
    const tried: string[] = [];
    if (choice !== 'xtables') {
      const probe = nftQueueProbe(this.options);
      const created = await this.run('nft', ['-f', '-'], probe.create);
      if (created.code === 0) {
        await this.run('nft', ['-f', '-'], probe.remove);
        return (this.mode = 'nft');
      }
      tried.push(`nft queue statement: ${created.stderr.trim().split('\n')[0] ?? ''}`);
      if (choice === 'nft') throw new KwpError('KWP_ERR_DATAPLANE', `the kernel refused an nftables queue rule (${tried[0]}); load nft_queue or run with mode auto/xtables`);
    }
    const probe = xtablesQueueProbe(this.options);
    let failure: string | undefined;
    for (const args of probe.create) {
      const result = await this.run('iptables', args);
      if (result.code !== 0) {
        failure = describeFailure('iptables', args, result);
        break;
      }
    }
    for (const args of probe.remove) await this.run('iptables', args);
    if (failure === undefined) return (this.mode = 'xtables');
    tried.push(`xtables NFQUEUE target: ${failure}`);
    throw new KwpError(
      'KWP_ERR_DATAPLANE',
      `no way to queue packets to user space here (${tried.join('; ')}); install nftables with the nft_queue module or iptables with xt_NFQUEUE`,
    );
  }

  install(interest: Interest): Promise<void> {
    return this.serialized(async () => {
      const mode = this.requireMode();
      this.fastPathInstalled = this.options.fastPath !== undefined;
      // In xtables mode the sets are ipset's; they must exist before the rules that match them.
      if (mode === 'xtables') await this.removeXtablesLeftovers();
      if (mode === 'xtables' && this.fastPathInstalled) this.fastPathInstalled = await this.createIpsets();
      await this.nft(nftRuleset(this.effective, mode, interest));
      this.installedAll = interest.all;
      if (mode === 'xtables') await this.installXtables();
      this.logger.info({ mode, table: this.options.tableName, queue: this.options.queueId, dnsQueue: this.options.dnsQueueId, failOpen: this.options.failOpen }, `dataplane rules installed (queue mode: ${mode})`);
    });
  }

  /** Leftovers of a crashed run with the same names would make -N fail, and hold the ipsets. */
  private async removeXtablesLeftovers(): Promise<void> {
    for (const [tool, family] of [['iptables', 4], ['ip6tables', 6]] as const) {
      for (const args of xtablesCommands(this.options, family).remove) await this.run(tool, args);
    }
  }

  /** Creates the fast path's ipsets empty (after destroying leftovers); false, with a warning, when ipset refuses. */
  private async createIpsets(): Promise<boolean> {
    for (const name of ipsetAllNames(this.options.tableName)) await this.run('ipset', ['destroy', name]);
    const script = ipsetCreateScript(this.options.tableName, this.options.fastPath!);
    const created = await this.run('ipset', ['restore'], script);
    if (created.code === 0) return true;
    for (const name of ipsetAllNames(this.options.tableName)) await this.run('ipset', ['destroy', name]);
    this.logger.warn({ error: describeFailure('ipset', ['restore'], created) }, 'the kernel fast path is off: ipset could not create its sets (install the ipset package and the ip_set_hash_ipportip module); every new connection goes to the agent');
    return false;
  }

  private async installXtables(): Promise<void> {
    for (const [tool, family] of [['iptables', 4], ['ip6tables', 6]] as const) {
      const { install, remove } = xtablesCommands(this.effective, family);
      for (const args of install) {
        const result = await this.run(tool, args);
        if (result.code !== 0) {
          for (const undo of remove) await this.run(tool, undo);
          if (tool === 'ip6tables') {
            this.logger.warn({ error: describeFailure(tool, args, result) }, 'IPv6 packets will not be queued: ip6tables refused the NFQUEUE rules');
            // Without the ip6tables chains nothing clears our bits on IPv6 packets: commit chains in the table do.
            await this.nft(nftCommitChains(this.effective));
            return;
          }
          throw new KwpError('KWP_ERR_DATAPLANE', describeFailure(tool, args, result));
        }
      }
      this.installedXtables.push(tool);
    }
  }

  updateInterest(interest: Interest): Promise<void> {
    return this.serialized(async () => {
      const mode = this.requireMode();
      if (interest.all !== this.installedAll) {
        await this.nft(nftClassifyReplacement(this.effective, mode, interest));
        this.installedAll = interest.all;
      } else {
        await this.nft(nftInterestUpdate(this.options, interest));
      }
    });
  }

  /** Remove everything install added; tolerant of pieces already gone. */
  remove(): Promise<void> {
    return this.serialized(async () => {
      for (const tool of this.installedXtables) {
        for (const args of xtablesCommands(this.options, tool === 'iptables' ? 4 : 6).remove) await this.run(tool, args);
      }
      this.installedXtables = [];
      this.ipset?.close();
      await this.run('nft', ['-f', '-'], nftTableRemoval(this.options));
      // After the rules that matched them: ipset refuses to destroy a set in use.
      if (this.mode === 'xtables' && this.fastPathInstalled) for (const name of ipsetAllNames(this.options.tableName)) await this.run('ipset', ['destroy', name]);
      this.fastPathInstalled = false;
      this.installedAll = undefined;
      this.logger.info({ table: this.options.tableName }, 'dataplane rules removed');
    });
  }

  /**
   * Runs a fast-path script (fast-path-rules.ts: a fill or an invalidation)
   * through the ipset session, or with `ipset restore -exist` or `nft -f`.
   * Call it inside exclusive().
   */
  async runFastPathScript(script: string): Promise<void> {
    const mode = this.requireMode();
    if (mode === 'xtables' && this.ipset?.available) {
      try {
        await this.ipset.run(script);
        return;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (this.ipset.available) throw new KwpError('KWP_ERR_DATAPLANE', `kernel fast path: ${message}`);
        this.logger.warn({ error: message }, 'kernel fast path: no long-lived ipset process (sh and stdbuf are needed); each fill runs one ipset restore instead');
      }
    }
    const [command, args] = mode === 'nft' ? ['nft', ['-f', '-']] : ['ipset', ['restore', '-exist']];
    const result = await this.run(command, args, script);
    if (result.code !== 0) throw new KwpError('KWP_ERR_DATAPLANE', `kernel fast path: ${describeFailure(command, args, result)}`);
  }

  /** Packets the fast path's rules decided in the kernel since install, by verdict (rule counters). */
  async kernelDecided(): Promise<{ accept: number; deny: number }> {
    const mode = this.requireMode();
    const total = { accept: 0, deny: 0 };
    if (!this.fastPathInstalled) return total;
    const listings: Array<[string, string[]]> = mode === 'nft'
      ? ['postrouting', 'input'].map((hook) => ['nft', ['list', 'chain', 'inet', this.options.tableName, `classify_${hook}`]] as [string, string[]])
      : this.installedXtables.flatMap((tool) => (['postrouting', 'input'] as const).map((hook) => [tool, ['-t', 'mangle', '-L', xtablesChainName(this.options, hook), '-v', '-x', '-n']] as [string, string[]]));
    for (const [command, args] of listings) {
      const result = await this.run(command, args);
      if (result.code !== 0) continue;
      const counts = kernelDecidedCounts(mode, this.options.tableName, result.stdout);
      total.accept += counts.accept;
      total.deny += counts.deny;
    }
    return total;
  }

  private requireMode(): QueueMode {
    if (!this.mode) throw new Error('KernelRules.probe must run before install');
    return this.mode;
  }
}
