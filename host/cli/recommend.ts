// `kwp recommend`: NetworkPolicies (or Admin-tier ClusterNetworkPolicies)
// that allow exactly the recorded flows, on stdout ready for
// `kubectl apply -f -`; on stderr, the check of that output on the WASM
// pipeline: observed flows it would not allow, and other connections between
// known pods it would deny.
import { stringify } from 'yaml';
import { KwpError } from '../errors.js';
import { stateFromObjects } from '../eval.js';
import { readPipelineFile } from '../pipeline/spec.js';
import { recommendPolicies } from '../impact/recommend.js';
import { checkRecommendation, type MatrixFlow } from '../impact/recommend-check.js';
import { inputErrorsExit2, outputFormat, parseFlags, requireFlag } from './args.js';
import { loadObjects, pluginModules } from './eval.js';
import { readRecordedFlowsFile } from './diff.js';

const HELP = `usage: kwp recommend --manifests DIR [--manifests ...] --flows FILE [--namespace NS] [--cluster] [--priority N] [--egress]
                     [--pipeline FILE] [--module FILE ...] [-o yaml|json]

Writes the policies that allow exactly the recorded flows: for every workload
that received traffic, one policy whose ingress rules admit each source
workload (by its labels; across namespaces by kubernetes.io/metadata.name) or
source address (/32, /128) on the ports it used (by name where the
destination pod declares one). Workloads are pods of one namespace with the
same labels, less the per-pod ones (pod-template-hash, statefulset pod name...).
Then decides, with the current manifests plus the recommendation, every
recorded flow (each must be allowed: exit 1 otherwise) and every connection
between known pods on the recorded ports, and lists on stderr those allowed
now that the recommendation would deny.

  --manifests PATH     the cluster's manifests (file or directory, repeatable), strictly validated
  --flows FILE         recorded flows, as for kwp diff (kwp flows -o json); "-" reads stdin
  --namespace NS       only policies for destinations in NS
  --cluster            Admin-tier ClusterNetworkPolicies (v1alpha2) instead of NetworkPolicies;
                       sources outside the cluster still get a NetworkPolicy (the Admin tier has no
                       address peers for ingress)
  --egress             also egress: per workload that sent recorded flows, a NetworkPolicy allowing
                       exactly those, to each destination workload by its labels and to each address
                       outside the cluster's pods as a /32 or /128 ipBlock (with --namespace: the
                       sources in NS); with --cluster too, egress stays NetworkPolicies
  --priority N         the first Admin-tier priority (default 100; each policy takes the next)
  --pipeline FILE      the pipeline to check with (default: the default pipeline)
  --module FILE        a plugin .wasm the pipeline names (repeatable)
  -o, --output FORMAT  yaml (default: documents to pipe into kubectl apply) or json (a v1 List)

Example:
  kwp flows -o json > flows.jsonl
  kwp recommend --manifests live/ --flows flows.jsonl | kubectl apply -f -
`;

/** `TCP/5432 to shop/db-0 from shop/api-1, web/debug`: one line per destination and port, at most 50. */
function groupedByDestination(flows: MatrixFlow[]): string[] {
  const groups = new Map<string, string[]>();
  for (const f of flows) {
    const key = `${f.protocol}/${f.port} to ${f.dst}`;
    groups.set(key, [...(groups.get(key) ?? []), f.src]);
  }
  const lines = [...groups].map(([key, srcs]) => `${key} from ${srcs.join(', ')}`);
  return lines.length > 50 ? [...lines.slice(0, 50), `... and ${lines.length - 50} more destinations and ports`] : lines;
}

async function recommend(argv: string[]): Promise<number> {
  const { values } = parseFlags('recommend', argv, {
    manifests: { type: 'string', multiple: true },
    flows: { type: 'string' },
    namespace: { type: 'string' },
    cluster: { type: 'boolean' },
    egress: { type: 'boolean' },
    priority: { type: 'string' },
    pipeline: { type: 'string' },
    module: { type: 'string', multiple: true },
    output: { type: 'string', short: 'o' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(HELP); return 0; }
  const output = outputFormat('recommend', values.output, ['yaml', 'json'] as const, 'yaml');
  const paths = requireFlag('recommend', 'manifests', values.manifests);
  const flowsFile = requireFlag('recommend', 'flows', values.flows);
  let priority: number | undefined;
  if (values.priority !== undefined) {
    priority = Number(values.priority);
    if (!/^\d+$/.test(values.priority) || priority > 1000) throw new KwpError('KWP_ERR_USAGE', `kwp recommend: --priority must be a whole number from 0 to 1000, got "${values.priority}"`);
    if (!values.cluster) throw new KwpError('KWP_ERR_USAGE', 'kwp recommend: --priority goes with --cluster (NetworkPolicies have no priority)');
  }
  const modules = pluginModules(values.module);
  const read = await readRecordedFlowsFile(flowsFile);
  const objects = await loadObjects(paths, modules);
  const pipeline = values.pipeline ? readPipelineFile(values.pipeline) : undefined;

  const state = stateFromObjects(objects);
  const { objects: recommended, notes, covered } = recommendPolicies(state, read.flows, { namespace: values.namespace, cluster: values.cluster, priority, egress: values.egress });
  for (const line of [...read.skipped, ...notes]) process.stderr.write(`note: ${line}\n`);
  if (recommended.length === 0) {
    throw new KwpError('KWP_ERR_FLOWS', `${flowsFile}: no recorded flow reached a pod${values.namespace ? ` of namespace ${values.namespace}` : ''} a policy could be written for; see the notes above`);
  }

  if (output === 'json') process.stdout.write(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: recommended }, null, 2)}\n`);
  // kubectl reads YAML the 1.1 way, where a bare yes, on, n or 1_000 is a bool or a number: quoted as 1.1 would need, a label value stays a string.
  else process.stdout.write(recommended.map((o) => stringify(o, { version: '1.1' })).join('---\n'));

  const check = checkRecommendation({ objects, recommended, flows: covered, pipeline, modules: modules?.resolver });
  const say = (line: string) => process.stderr.write(`${line}\n`);
  say(`# ${recommended.length} ${values.cluster ? 'policies' : 'NetworkPolicies'} for ${covered.length} of ${read.flows.length} recorded flow(s)`);
  if (check.notAllowed.length) {
    say(`# ${check.notAllowed.length} recorded flow(s) would still be denied (by policies the recommendation cannot outrank):`);
    for (const r of check.notAllowed) say(`#   ${r.walkthrough}`);
  } else say('# checked: every recorded flow is allowed with the recommendation');
  if (check.matrixSkipped) say(`# the other connections were not checked: ${check.matrixSkipped}`);
  else {
    say(`# of ${check.cells} connections between known pods on the recorded ports, ${check.newlyDenied.length} allowed now would be denied${check.newlyDenied.length ? ':' : ''}`);
    for (const line of groupedByDestination(check.newlyDenied)) say(`#   ${line}`);
  }
  return check.notAllowed.length ? 1 : 0;
}

export const runRecommend = inputErrorsExit2(recommend);
