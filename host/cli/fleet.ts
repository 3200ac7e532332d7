// `kwp fleet status`: what every node runs, read from the NodePipelineStatus
// objects the nodes write (the same objects the rollout controller judges
// steps by), with the Pipelines' rollout state above the table.
import { KwpError } from '../errors.js';
import { loadKubeConfig } from '../sources/kubernetes.js';
import { readFleetStatus, type FleetStatus } from '../fleet/fleet-status.js';
import { parseFlags, subcommand } from './args.js';
import { adminClient, print, table } from './admin-flags.js';

const HELP = `usage: kwp fleet status [--kubeconfig FILE | --server URL [--token-file FILE]] [-o table|json]

Prints one line per node of the cluster's NodePipelineStatus objects: the
Pipeline it follows, the generation it runs (and the newest it has seen),
its own pipeline revision and since when, readiness, whether it was changed
locally through its own admin API, and its last error. Above the table, each
Pipeline's generation and rollout phase. See docs/fleet.md.

  --kubeconfig FILE   the cluster (default: $KUBECONFIG, then the in-cluster service account)
  --server URL        ask the cluster-level admin API instead (GET /v1/fleet/status; see docs/fleet.md)
  --token-file FILE   with --server: the admin token (default: $KWP_ADMIN_TOKEN)
  -o, --output FMT    table (default) or json
  -h, --help          this text
`;

async function readStatus(values: { kubeconfig?: string; server?: string; 'token-file'?: string }): Promise<FleetStatus> {
  if (values.server !== undefined) {
    if (values.kubeconfig !== undefined) throw new KwpError('KWP_ERR_USAGE', 'kwp fleet status: give --kubeconfig or --server, not both');
    return adminClient(values).fleetStatus();
  }
  return readFleetStatus(loadKubeConfig(values.kubeconfig ?? process.env.KUBECONFIG), 'kwp fleet status');
}

function formatTable(s: FleetStatus): string {
  const head = s.pipelines.map((p) => {
    const r = p.rollout as { phase?: string; generation?: number; message?: string } | undefined;
    return `# Pipeline ${p.name}: generation ${p.generation}${r ? `, rollout of generation ${r.generation} ${r.phase}${r.message ? ` (${r.message})` : ''}` : ''}`;
  });
  const rows = s.nodes.map((n) => [
    n.nodeName,
    n.pipeline ?? '-',
    n.appliedGeneration === undefined ? '-' : String(n.appliedGeneration),
    n.observedGeneration === undefined ? '-' : String(n.observedGeneration),
    String(n.revision),
    n.since,
    n.ready ? 'yes' : 'no',
    n.localOverride ? 'yes' : 'no',
    n.stages.map((st) => `${st.name}=${st.sha256.slice(0, 12)}`).join(','),
    n.lastError ? `${n.lastError.code}: ${n.lastError.message}` : '-',
  ]);
  const body = s.nodes.length ? table(['NODE', 'PIPELINE', 'GENERATION', 'SEEN', 'REVISION', 'SINCE', 'READY', 'OVERRIDE', 'STAGES', 'ERROR'], rows) : 'no node has reported yet';
  return [...head, body].join('\n');
}

export async function runFleet(argv: string[]): Promise<number> {
  const { sub, rest } = subcommand('fleet', argv);
  const { values, positionals } = parseFlags(sub ? `fleet ${sub}` : 'fleet', rest, { kubeconfig: { type: 'string' }, server: { type: 'string' }, 'token-file': { type: 'string' }, output: { type: 'string', short: 'o' }, help: { type: 'boolean', short: 'h' } }, true);
  if (!sub || values.help) { print(HELP); return argv.length ? 0 : 2; }
  if (positionals.length) throw new KwpError('KWP_ERR_USAGE', `kwp fleet status: unexpected argument "${positionals[0]}"`);
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json') throw new KwpError('KWP_ERR_USAGE', `kwp fleet status: -o takes table or json, got "${output}"`);
  const status = await readStatus(values);
  print(output === 'json' ? JSON.stringify(status, null, 2) : formatTable(status));
  return 0;
}
