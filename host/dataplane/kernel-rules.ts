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
  xtablesCommands,
  xtablesQueueProbe,
  type Interest,
  type QueueMode,
  type RuleOptions,
} from './rules.js';
import type { HostLogger } from '../logger.js';

export type ModeChoice = 'auto' | QueueMode;


export class KernelRules {
  private mode: QueueMode | undefined;
  private installedAll: boolean | undefined;
  private installedXtables: Array<'iptables' | 'ip6tables'> = [];
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: RuleOptions,
    private readonly run: CommandRunner,
    private readonly logger: HostLogger,
  ) {
    const problems = ruleOptionProblems(options);
    if (problems.length > 0) throw new KwpError('KWP_ERR_USAGE', `dataplane options: ${problems.join('; ')}`);
  }

  get queueMode(): QueueMode | undefined {
    return this.mode;
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
      await this.nft(nftRuleset(this.options, mode, interest));
      this.installedAll = interest.all;
      if (mode === 'xtables') await this.installXtables();
      this.logger.info({ mode, table: this.options.tableName, queue: this.options.queueId, dnsQueue: this.options.dnsQueueId, failOpen: this.options.failOpen }, `dataplane rules installed (queue mode: ${mode})`);
    });
  }

  private async installXtables(): Promise<void> {
    const { install, remove } = xtablesCommands(this.options);
    for (const tool of ['iptables', 'ip6tables'] as const) {
      // Leftovers of a crashed run with the same names would make -N fail.
      for (const args of remove) await this.run(tool, args);
      for (const args of install) {
        const result = await this.run(tool, args);
        if (result.code !== 0) {
          for (const undo of remove) await this.run(tool, undo);
          if (tool === 'ip6tables') {
            this.logger.warn({ error: describeFailure(tool, args, result) }, 'IPv6 packets will not be queued: ip6tables refused the NFQUEUE rules');
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
        await this.nft(nftClassifyReplacement(this.options, mode, interest));
        this.installedAll = interest.all;
      } else {
        await this.nft(nftInterestUpdate(this.options, interest));
      }
    });
  }

  /** Remove everything install added; tolerant of pieces already gone. */
  remove(): Promise<void> {
    return this.serialized(async () => {
      const { remove } = xtablesCommands(this.options);
      for (const tool of this.installedXtables) for (const args of remove) await this.run(tool, args);
      this.installedXtables = [];
      await this.run('nft', ['-f', '-'], nftTableRemoval(this.options));
      this.installedAll = undefined;
      this.logger.info({ table: this.options.tableName }, 'dataplane rules removed');
    });
  }

  private requireMode(): QueueMode {
    if (!this.mode) throw new Error('KernelRules.probe must run before install');
    return this.mode;
  }
}
