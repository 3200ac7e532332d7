// `kwp agent`: parse the flags listed in agent-flags.ts (the DaemonSet's
// arguments are checked against the same list) and run the Agent until a
// signal stops it.
import { KwpError, createLogger, parseLimitSettings, resolveLimits, parseEtcdEndpoints } from '../index.js';
import { agentFlags, flagSpelling, type AgentFlag } from './agent-flags.js';
import { runUntilSignal } from './signals.js';
import { declareFlags, flagSuggestion } from './args.js';
import { Agent, type AgentConfig } from '../agent.js';

export type AgentFlagValues = Record<string, string | number | boolean | undefined>;

function helpText(): string {
  const rows = agentFlags.map((f) => {
    const spelled = `${flagSpelling(f.name)}${f.type === 'boolean' ? '[=true|false]' : '=' + f.type.toUpperCase()}`;
    const def = f.default === undefined ? '' : ` (default ${f.default})`;
    return `  ${spelled.padEnd(32)} ${f.description}${def}`;
  });
  return `usage: kwp agent [flags]\n\nRuns the node agent. A boolean flag is turned off with --NAME=false or --no-NAME.\n\n${rows.join('\n')}\n`;
}

function convert(flag: AgentFlag, raw: string | undefined): string | number | boolean {
  const where = `kwp agent: ${flagSpelling(flag.name)}`;
  if (flag.type === 'boolean') {
    if (raw === undefined || raw === 'true') return true;
    if (raw === 'false') return false;
    throw new KwpError('KWP_ERR_USAGE', `${where} takes true or false, got "${raw}"`);
  }
  if (raw === undefined || raw === '') throw new KwpError('KWP_ERR_USAGE', `${where} needs a value`);
  if (flag.type === 'number') {
    const n = Number(raw);
    if (flag.range) {
      const [min, max] = flag.range;
      if (!/^-?\d+$/.test(raw) || n < min || n > max) throw new KwpError('KWP_ERR_USAGE', `${where} takes a whole number from ${min} to ${max}, got "${raw}"`);
      return n;
    }
    if (!Number.isInteger(n) || n < 0) throw new KwpError('KWP_ERR_USAGE', `${where} takes a whole number, got "${raw}"`);
    return n;
  }
  return raw;
}

/**
 * Parses `--name=value`, `--name value`, `--flag` and `-v=N`. Exported so the
 * install manifests' test can prove every DaemonSet argument is accepted.
 */
export function parseAgentFlags(argv: string[]): AgentFlagValues & { help?: boolean } {
  declareFlags('agent', [...agentFlags.map((f) => flagSpelling(f.name)), '--help', '-h']);
  const out: AgentFlagValues & { help?: boolean } = {};
  for (const f of agentFlags) if (f.default !== undefined) out[f.name] = f.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') { out.help = true; continue; }
    const m = /^--?([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (!m) throw new KwpError('KWP_ERR_USAGE', `kwp agent: unexpected argument "${arg}"; see "kwp agent --help"`);
    // --no-NAME turns a boolean flag off (--no-fast-path), as --NAME=false does.
    const negated = arg.startsWith('--no-') && m[2] === undefined ? agentFlags.find((f) => f.type === 'boolean' && f.name === m[1].slice(3)) : undefined;
    if (negated) {
      out[negated.name] = false;
      continue;
    }
    const flag = agentFlags.find((f) => f.name === m[1]);
    if (!flag || (arg.startsWith('--') ? flag.name.length === 1 : flag.name.length !== 1)) {
      const typed = arg.split('=')[0];
      throw new KwpError('KWP_ERR_USAGE', `kwp agent: unknown flag "${typed}"${flagSuggestion(typed, agentFlags.map((f) => flagSpelling(f.name)))}; see "kwp agent --help"`);
    }
    let raw = m[2];
    if (raw === undefined && flag.type !== 'boolean') raw = argv[++i];
    const value = convert(flag, raw);
    if (flag.name === 'manifests' || flag.name === 'trusted-key' || flag.name === 'sandbox-limit') {
      // Repeatable flags collect their values, newline-separated.
      out[flag.name] = out[flag.name] === undefined ? String(value) : `${out[flag.name]}\n${value}`;
    } else {
      out[flag.name] = value;
    }
  }
  const marks = out['mark-bits'] as number;
  if (marks > 28) throw new KwpError('KWP_ERR_USAGE', `kwp agent: --mark-bits takes 0 to 28 (the agent uses four bits from there), got ${marks}`);
  if (out.dataplane !== 'on' && out.dataplane !== 'off') throw new KwpError('KWP_ERR_USAGE', `kwp agent: --dataplane takes on or off, got "${out.dataplane}"`);
  return out;
}

/** `--ip-tracker-etcd`, `--ip-tracker-prefix` and `--cluster-id` (the agent derives the id from the API server when it is absent). */
function multiclusterSettings(flags: AgentFlagValues): AgentConfig['multicluster'] {
  if (flags['ip-tracker-etcd'] === undefined) return undefined;
  return {
    ipTrackerEtcd: parseEtcdEndpoints(String(flags['ip-tracker-etcd']), 'kwp agent: --ip-tracker-etcd'),
    ipTrackerPrefix: flags['ip-tracker-prefix'] as string,
    ...(flags['cluster-id'] ? { clusterId: String(flags['cluster-id']) } : {}),
  };
}

/**
 * KWP_TEST_FAST_PATH_FLUSH_DELAY_MS, a test-only hook (docs/dataplane.md, "The
 * kernel fast path"): unset or empty leaves it off.
 */
function testFlushDelay(raw: string | undefined): Pick<AgentConfig, 'fastPathTestFlushDelayMs'> {
  if (raw === undefined || raw === '') return {};
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 0 || ms > 60_000) {
    throw new KwpError('KWP_ERR_USAGE', `kwp agent: the environment variable KWP_TEST_FAST_PATH_FLUSH_DELAY_MS must be whole milliseconds from 0 to 60000 (a test-only hook; unset it), got "${raw}"`);
  }
  return ms > 0 ? { fastPathTestFlushDelayMs: ms } : {};
}

/**
 * The Agent's settings from parsed flags; the logger is the caller's.
 * Exported so tests can follow a flag to the dataplane options without
 * starting anything.
 */
export function agentConfigFromFlags(flags: AgentFlagValues): AgentConfig {
  let autoRollback: { failures: number; windowMs: number } | undefined;
  if (flags['auto-rollback'] !== undefined) {
    const m = /^(\d+)\/(\d+)$/.exec(String(flags['auto-rollback']));
    if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) throw new KwpError('KWP_ERR_USAGE', `kwp agent: --auto-rollback takes FAILURES/SECONDS, e.g. 20/60, got "${flags['auto-rollback']}"`);
    autoRollback = { failures: Number(m[1]), windowMs: Number(m[2]) * 1000 };
  }
  const adminAddress = String(flags['admin-address']);
  let limits: AgentConfig['limits'];
  try {
    limits = flags['sandbox-limit'] ? resolveLimits(parseLimitSettings(String(flags['sandbox-limit']).split('\n'), 'kwp agent: --sandbox-limit')) : undefined;
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', (err as Error).message.startsWith('kwp agent') ? (err as Error).message : `kwp agent: --sandbox-limit: ${(err as Error).message}`);
  }
  return {
    manifests: flags.manifests ? String(flags.manifests).split('\n') : undefined,
    kubeconfig: flags.kubeconfig as string | undefined,
    inCluster: !flags.kubeconfig && !flags.manifests && !!process.env.KUBERNETES_SERVICE_HOST,
    nodeName: (flags['node-name'] as string | undefined) ?? process.env.NODE_NAME,
    pipelineFile: flags.pipeline as string | undefined,
    verbosity: flags.v as number,
    dataplane: flags.dataplane === 'on',
    failOpen: flags['fail-open'] as boolean,
    strict: flags.strict as boolean,
    tableName: flags['table-name'] as string,
    queueId: flags['queue-id'] as number,
    dnsQueueId: flags['dns-queue-id'] as number,
    markBits: flags['mark-bits'] as number,
    packetThreadNice: flags['packet-thread-nice'] as number | undefined,
    fastPath: flags['fast-path'] === true ? (flags['fast-path-timeout'] as number) : false,
    ...testFlushDelay(process.env.KWP_TEST_FAST_PATH_FLUSH_DELAY_MS),
    stateDir: flags['state-dir'] as string,
    adminAddress: adminAddress === 'off' ? undefined : adminAddress,
    adminTokenFile: flags['admin-token-file'] as string | undefined,
    adminReadsOpen: flags['admin-reads-open'] as boolean,
    trustedKeyFiles: flags['trusted-key'] ? String(flags['trusted-key']).split('\n') : [],
    autoRollback,
    limits,
    flows: (flags['flow-ring'] as number) === 0 ? undefined : {
      ringSize: flags['flow-ring'] as number,
      intervalMs: (flags['flow-interval'] as number) * 1000,
      log: flags['flow-log'] as string | undefined,
      logMaxBytes: flags['flow-log-max-bytes'] as number,
    },
    isolation: flags['module-threads'] === true ? 'worker' : 'thread',
    multicluster: multiclusterSettings(flags),
    fleet: {
      mode: flags.fleet ? 'cluster' : flags['fleet-node'] ? 'node' : 'off',
      registry: flags.registry as string | undefined,
      plainHttpRegistries: flags['plain-http-registry'] ? String(flags['plain-http-registry']).split(',').map((s) => s.trim()).filter(Boolean) : [],
      namespace: flags['fleet-namespace'] as string,
      pipelineName: flags['fleet-pipeline'] as string,
      statusIntervalMs: (flags['fleet-status-interval'] as number) * 1000,
    },
  };
}

export async function runAgent(argv: string[]): Promise<number> {
  const flags = parseAgentFlags(argv);
  if (flags.help) { process.stdout.write(helpText()); return 0; }
  const config = agentConfigFromFlags(flags);
  const format = String(flags['log-format']);
  if (format !== 'json' && format !== 'text') throw new KwpError('KWP_ERR_USAGE', `kwp agent: --log-format takes json or text, got "${format}"`);
  const agent = new Agent({ ...config, logger: createLogger(flags.v as number, process.stderr, format) });
  // The process exits when this returns (bin/kwp.js): the nfqueue binding's
  // netlink socket cannot be closed, and everything else is torn down by then.
  return runUntilSignal(agent.log, () => agent.start(), () => agent.stop());
}
