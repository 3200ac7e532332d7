// `kwp fleet status`: what every node runs, read from the NodePipelineStatus
// objects the nodes write (the same objects the rollout controller judges
// steps by), with the Pipelines' rollout state above the table.
import { KwpError } from '../errors.js';
import { loadKubeConfig } from '../sources/kubernetes.js';
import { getJson } from '../sources/kubernetes/request.js';
import { NODE_PIPELINE_STATUS, PIPELINE, fleetPath, nodeReportOf, type NodeReport } from '../fleet/objects.js';
import { parseFlags, subcommand } from './args.js';
import { print, table } from './admin-flags.js';

const HELP = `usage: kwp fleet status [--kubeconfig FILE] [-o table|json]

Prints one line per node of the cluster's NodePipelineStatus objects: the
Pipeline it follows, the generation it runs (and the newest it has seen),
its own pipeline revision and since when, readiness, whether it was changed
locally through its own admin API, and its last error. Above the table, each
Pipeline's generation and rollout phase. See docs/fleet.md.

  --kubeconfig FILE   the cluster (default: $KUBECONFIG, then the in-cluster service account)
  -o, --output FMT    table (default) or json
  -h, --help          this text
`;

interface FleetStatus {
  pipelines: Array<{ name: string; generation: number; rollout?: unknown }>;
  nodes: NodeReport[];
}

async function readStatus(kubeconfig: string | undefined): Promise<FleetStatus> {
  const kc = loadKubeConfig(kubeconfig ?? process.env.KUBECONFIG);
  const list = async (path: string) => {
    try {
      return ((await getJson(kc, path, undefined, 30_000)).items ?? []) as any[];
    } catch (err) {
      const code = (err as { statusCode?: number }).statusCode;
      const hint = code === 404 ? ' (are the fleet CRDs installed? kwp manifests | kubectl apply -f -)' : '';
      throw new KwpError('KWP_ERR_KUBECONFIG', `kwp fleet status: cannot list ${path}: ${(err as Error).message}${hint}`);
    }
  };
  const [pipelines, statuses] = await Promise.all([list(fleetPath(PIPELINE)), list(fleetPath(NODE_PIPELINE_STATUS))]);
  return {
    pipelines: pipelines.map((p) => ({ name: p.metadata.name, generation: Number(p.metadata.generation ?? 1), ...(p.status?.rollout ? { rollout: p.status.rollout } : {}) })),
    nodes: statuses.map((s) => nodeReportOf(s)).filter((r): r is NodeReport => r !== undefined).sort((a, b) => (a.nodeName < b.nodeName ? -1 : 1)),
  };
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
  const { values, positionals } = parseFlags(sub ? `fleet ${sub}` : 'fleet', rest, { kubeconfig: { type: 'string' }, output: { type: 'string', short: 'o' }, help: { type: 'boolean', short: 'h' } }, true);
  if (!sub || values.help) { print(HELP); return argv.length ? 0 : 2; }
  if (positionals.length) throw new KwpError('KWP_ERR_USAGE', `kwp fleet status: unexpected argument "${positionals[0]}"`);
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json') throw new KwpError('KWP_ERR_USAGE', `kwp fleet status: -o takes table or json, got "${output}"`);
  const status = await readStatus(values.kubeconfig);
  print(output === 'json' ? JSON.stringify(status, null, 2) : formatTable(status));
  return 0;
}
