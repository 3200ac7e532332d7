// The `kwp` command. Each subcommand lives in its own file and is loaded only
// when used, so `kwp eval` never pulls in Fastify or the Kubernetes client.
// Conventions follow kubectl and the cilium CLI: `kwp help CMD` and
// `--help` at every level, `kwp version`/`--version`, "did you mean" for a
// mistyped command, shell completion, exit status 2 for a usage error.
import { isKwpError } from '../errors.js';
import { suggestion } from '../suggest.js';

type Command = {
  summary: string;
  /** Subcommands, for their parsing, "did you mean" and shell completion alike. */
  subcommands?: readonly string[];
  load: () => Promise<(argv: string[]) => Promise<number>>;
};

const commands: Record<string, Command> = {
  eval: { summary: 'evaluate flows against manifests or a cluster with the WASM pipeline', load: async () => (await import('./eval.js')).runEval },
  matrix: { summary: 'print the pod-to-pod reachability matrix for manifests', load: async () => (await import('./eval.js')).runMatrix },
  diff: { summary: 'list the recorded flows whose verdict a proposed change of manifests or pipeline flips', load: async () => (await import('./diff.js')).runDiff },
  recommend: { summary: 'write the NetworkPolicies (or ClusterNetworkPolicies) that allow exactly the recorded flows', load: async () => (await import('./recommend.js')).runRecommend },
  agent: { summary: 'run the node agent (sources, pipeline, dataplane, admin API)', load: async () => (await import('./agent-load.js')).loadAgentCommand() },
  manifests: { summary: 'print the YAML that installs the agent', load: async () => (await import('./install-yaml-command.js')).runManifestsCommand },
  'ip-tracker': { summary: 'multicluster: publish the pod IPs of every cluster in a kubeconfig directory into etcd', load: async () => (await import('./ip-tracker.js')).runIpTracker },
  module: { summary: 'push, list and remove evaluator modules of a running agent', subcommands: ['push', 'ls', 'rm'], load: async () => (await import('./module.js')).runModule },
  pipeline: { summary: "get, set, roll back and list the history of a running agent's pipeline", subcommands: ['get', 'set', 'rollback', 'history'], load: async () => (await import('./pipeline.js')).runPipeline },
  fleet: { summary: 'what every node of the cluster runs: kwp fleet status', subcommands: ['status'], load: async () => (await import('./fleet.js')).runFleet },
  explain: { summary: 'ask a running agent why it allows or denies one flow', load: async () => (await import('./explain.js')).runExplain },
  flows: { summary: 'the connections a running agent decided, with the policy and rule of each (like hubble observe)', load: async () => (await import('./flows.js')).runFlows },
  keygen: { summary: 'write an ed25519 key pair for signed module uploads', load: async () => (await import('./keys.js')).runKeygen },
  sign: { summary: 'sign a module for an upload under a name and version', load: async () => (await import('./keys.js')).runSign },
  sdk: { summary: 'start a plugin project: kwp sdk new NAME [DIR]', subcommands: ['new'], load: async () => (await import('./sdk.js')).runSdk },
  version: { summary: 'print the version of kwp and of the ABI it implements', load: async () => (await import('./version.js')).runVersion },
  completion: { summary: 'print a bash or zsh completion script: source <(kwp completion bash)', subcommands: ['bash', 'zsh'], load: async () => (await import('./completion.js')).runCompletion },
  help: { summary: 'print the help of kwp or of a command: kwp help eval', load: async () => runHelp },
};

/** The one table of commands: help, "did you mean", subcommand parsing and completion all read it. */
export function commandTable(): Readonly<Record<string, Command>> {
  return commands;
}

/** The subcommands of a command in the table (none for a command without them). */
export function subcommandsOf(command: string): readonly string[] {
  return commands[command]?.subcommands ?? [];
}

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: kwp <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\nflags:\n  -h, --help     help for kwp or a command\n      --version  the version of kwp\n\nRun "kwp <command> --help" for a command's flags.\n`;
}

async function runHelp(argv: string[]): Promise<number> {
  if (argv.length === 0) { process.stdout.write(usage()); return 0; }
  return main([...argv, '--help']);
}

function unknownCommand(name: string): number {
  process.stderr.write(`KWP_ERR_USAGE: kwp: unknown command "${name}"${suggestion(name, Object.keys(commands))}; run "kwp --help" for the commands\n`);
  return 2;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name) { process.stderr.write(usage()); return 2; }
  if (name === '--help' || name === '-h') { process.stdout.write(usage()); return 0; }
  if (name === '--version') return main(['version', ...rest]);
  if (name.startsWith('-')) return unknownCommand(name);
  const cmd = commands[name];
  if (!cmd) return unknownCommand(name);
  try {
    const run = await cmd.load();
    return await run(rest);
  } catch (err) {
    if (isKwpError(err)) {
      process.stderr.write(`${err.code}: ${err.message}\n`);
      return err.code === 'KWP_ERR_USAGE' ? 2 : 1;
    }
    throw err;
  }
}
