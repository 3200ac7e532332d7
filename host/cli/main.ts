// The `kwp` command. Each subcommand lives in its own file and is loaded only
// when used, so `kwp eval` never pulls in Fastify or the Kubernetes client.
import { isKwpError } from '../errors.js';

type Command = { summary: string; load: () => Promise<(argv: string[]) => Promise<number>> };

const commands: Record<string, Command> = {
  eval: { summary: 'evaluate flows against manifests with the WASM pipeline', load: async () => (await import('./eval.js')).runEval },
  agent: { summary: 'run the node agent (sources, pipeline, dataplane, admin API)', load: async () => (await import('./agent.js')).runAgent },
  manifests: { summary: 'print the YAML that installs the agent', load: async () => (await import('./install-yaml-command.js')).runManifestsCommand },
  'ip-tracker': { summary: 'multicluster: publish the pod IPs of every cluster in a kubeconfig directory into etcd', load: async () => (await import('./ip-tracker.js')).runIpTracker },
  matrix: { summary: 'print the pod-to-pod reachability matrix for manifests', load: async () => (await import('./eval.js')).runMatrix },
  module: { summary: 'push, list and remove evaluator modules of a running agent', load: async () => (await import('./module.js')).runModule },
  pipeline: { summary: "get, set, roll back and list the history of a running agent's pipeline", load: async () => (await import('./pipeline.js')).runPipeline },
  fleet: { summary: 'what every node of the cluster runs: kwp fleet status', load: async () => (await import('./fleet.js')).runFleet },
  explain: { summary: 'ask a running agent why it allows or denies one flow', load: async () => (await import('./explain.js')).runExplain },
  keygen: { summary: 'write an ed25519 key pair for signed module uploads', load: async () => (await import('./keys.js')).runKeygen },
  sign: { summary: 'sign a module for an upload under a name and version', load: async () => (await import('./keys.js')).runSign },
  sdk: { summary: 'start a plugin project: kwp sdk new NAME [DIR]', load: async () => (await import('./sdk.js')).runSdk },
};

/** Lets a subcommand file add itself to the table without this file knowing its internals. */
export function commandTable(): Record<string, Command> {
  return commands;
}

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: kwp <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\nRun "kwp <command> --help" for a command's flags.\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  const cmd = commands[name];
  if (!cmd) {
    process.stderr.write(`kwp: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  try {
    const run = await cmd.load();
    return await run(rest);
  } catch (err) {
    if (isKwpError(err)) {
      process.stderr.write(`${err.code}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
