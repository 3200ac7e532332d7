// `kwp eval` and `kwp matrix`: the offline calculator, on the real pipeline.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { Kinds, type KubeObject } from '../contract.js';
import { loadManifests } from '../sources/manifest-files.js';
import { parseFlows, type FlowSpec, type FlowProtocol } from '../flows.js';
import { OfflineEvaluator, priorityTieWarnings, type FlowResult } from '../eval.js';
import { readPipelineFile, type PipelineSpec } from '../pipeline/spec.js';
import type { ModuleResolver } from '../pipeline/modules.js';
import { compileEvaluator } from '../runtime/loader.js';
import { parseFlags, requireFlag } from './args.js';
import { matrixRows } from '../reachability.js';
import { selectPods } from '../state/cluster-listing.js';

const EVAL_HELP = `usage: kwp eval --manifests PATH [--manifests PATH ...] --flows FILE [--output json|table|walkthrough]
                [--pipeline FILE] [--dns NAME=IP ...] [--dns-file FILE]

Decides each flow with the same WASM evaluators the agent runs.
  --manifests PATH   a file or directory of YAML/JSON manifests (repeatable)
  --flows FILE       a JSON array or JSON Lines of {"src", "dst", "protocol", "port"};
                     "dst" may name a Service ("namespace/name" or a ClusterIP, or a
                     node address and NodePort): the flow is then decided once per
                     endpoint, as a Service proxy would rewrite it
  --output FORMAT    walkthrough (default), table or json
  --pipeline FILE    a pipeline file instead of the default pipeline
  --dns NAME=IP      an address a name resolved to, for domainNames peers (repeatable)
  --dns-file FILE    a JSON object {"name": ["ip", ...]}
  --module FILE      a plugin .wasm the pipeline may name by its kwp.meta name (repeatable)
`;

const MATRIX_HELP = `usage: kwp matrix --manifests PATH [--manifests PATH ...] [--port 80] [--protocol TCP] [--pipeline FILE]
                  [--namespace NS] [--selector SELECTOR]

Prints the pod-to-pod reachability matrix: rows are sources, columns destinations,
"." allowed and "X" denied.
  --namespace NS       only the pods of this namespace
  --selector SELECTOR  only pods whose labels match, e.g. app=web,tier!=db (key=value, key!=value, key, !key)
`;

/** Plugins given with --module, resolvable by their kwp.meta name (and name@version). */
function pluginModules(files: string[] | undefined): ModuleResolver | undefined {
  if (!files?.length) return undefined;
  const compiled = files.map((file) => {
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(file);
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `kwp eval: --module ${file}: ${(err as Error).message}`);
    }
    return compileEvaluator(bytes, { source: file });
  });
  return {
    resolve: (ref) => compiled.find((m) => ref === m.meta.name || ref === `${m.meta.name}@${m.meta.version}`),
  };
}

function readPipeline(file: string | undefined): PipelineSpec | undefined {
  return file ? readPipelineFile(file) : undefined;
}

function parseDns(pairs: string[] | undefined, file: string | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) throw new KwpError('KWP_ERR_USAGE', `kwp eval: --dns ${pair}: expected NAME=IP`);
    (out[pair.slice(0, eq).toLowerCase()] ??= []).push(pair.slice(eq + 1));
  }
  if (file) {
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `kwp eval: --dns-file ${file}: ${(err as Error).message}`);
    }
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new KwpError('KWP_ERR_USAGE', `kwp eval: --dns-file ${file}: expected an object {"name": ["ip", ...]}`);
    for (const [name, ips] of Object.entries(doc)) {
      if (!Array.isArray(ips) || ips.some((ip) => typeof ip !== 'string')) throw new KwpError('KWP_ERR_USAGE', `kwp eval: --dns-file ${file}: "${name}" must map to a list of IP strings`);
      (out[name.toLowerCase()] ??= []).push(...(ips as string[]));
    }
  }
  return out;
}

async function loadObjects(paths: string[]): Promise<KubeObject[]> {
  const { objects, warnings } = await loadManifests(paths);
  for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
  for (const w of priorityTieWarnings(objects)) process.stderr.write(`warning: ${w}\n`);
  return objects;
}

function formatTable(results: FlowResult[]): string {
  // The ENDPOINT column only when some flow went to a Service.
  const services = results.some((r) => r.via);
  const rows = results.map((r) => [
    r.src, r.dst, `${(r.protocol ?? 'TCP').toUpperCase()}/${r.port}`,
    ...(services ? [r.via ? `${r.via.endpoint}:${r.via.port}` : '-'] : []),
    r.verdict.toUpperCase(),
  ]);
  const head = ['SOURCE', 'DESTINATION', 'PORT', ...(services ? ['ENDPOINT'] : []), 'VERDICT'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

export async function runEval(argv: string[]): Promise<number> {
  const { values } = parseFlags('eval', argv, {
    manifests: { type: 'string', multiple: true },
    flows: { type: 'string' },
    output: { type: 'string', default: 'walkthrough' },
    pipeline: { type: 'string' },
    dns: { type: 'string', multiple: true },
    'dns-file': { type: 'string' },
    module: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(EVAL_HELP); return 0; }
  const manifests = requireFlag('eval', 'manifests', values.manifests);
  const flowsFile = requireFlag('eval', 'flows', values.flows);
  const output = values.output!;
  if (!['json', 'table', 'walkthrough'].includes(output)) throw new KwpError('KWP_ERR_USAGE', `kwp eval: --output must be json, table or walkthrough, got "${output}"`);
  let flowsText: string;
  try {
    flowsText = readFileSync(flowsFile, 'utf8');
  } catch (err) {
    throw new KwpError('KWP_ERR_FLOWS', `${flowsFile}: cannot read the flows file: ${(err as Error).message}`);
  }
  const flows: FlowSpec[] = parseFlows(flowsText, flowsFile);
  const objects = await loadObjects(manifests);
  const ev = new OfflineEvaluator({ objects, pipeline: readPipeline(values.pipeline), dns: parseDns(values.dns, values['dns-file']), modules: pluginModules(values.module) });
  try {
    const results = flows.flatMap((f, i) => ev.evaluateAll(f, i));
    if (output === 'json') process.stdout.write(JSON.stringify(results, null, 2) + '\n');
    else if (output === 'table') process.stdout.write(formatTable(results));
    else process.stdout.write(results.map((r) => r.walkthrough).join('\n') + '\n');
  } finally {
    ev.dispose();
  }
  return 0;
}

/** The matrix as text; exported for the demo, which prints it next to the observed one. */
export function formatMatrix(names: string[], allowed: (src: string, dst: string) => boolean): string {
  const width = Math.max(...names.map((n) => n.length));
  const header = ' '.repeat(width) + '  ' + names.map((n) => n.padEnd(width)).join(' ');
  const rows = names.map((src) => src.padEnd(width) + '  ' + names.map((dst) => (allowed(src, dst) ? '.' : 'X').padEnd(width)).join(' '));
  return [header.trimEnd(), ...rows.map((r) => r.trimEnd())].join('\n') + '\n';
}

export function predictMatrix(ev: OfflineEvaluator, podNames: string[], port: number, protocol: string): Map<string, boolean> {
  const rows = matrixRows(podNames, { protocol: protocol as FlowProtocol, port }, (flow) => ev.evaluate(flow).verdict === 'allow', 'kwp matrix');
  const out = new Map<string, boolean>();
  podNames.forEach((src, i) => podNames.forEach((dst, j) => out.set(`${src}>${dst}`, rows[i][j] === '.')));
  return out;
}

export async function runMatrix(argv: string[]): Promise<number> {
  const { values } = parseFlags('matrix', argv, {
    manifests: { type: 'string', multiple: true },
    port: { type: 'string', default: '80' },
    protocol: { type: 'string', default: 'TCP' },
    pipeline: { type: 'string' },
    namespace: { type: 'string' },
    selector: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(MATRIX_HELP); return 0; }
  const manifests = requireFlag('matrix', 'manifests', values.manifests);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new KwpError('KWP_ERR_USAGE', `kwp matrix: --port must be 1-65535, got "${values.port}"`);
  const protocol = values.protocol!.toUpperCase();
  if (!['TCP', 'UDP', 'SCTP'].includes(protocol)) throw new KwpError('KWP_ERR_USAGE', `kwp matrix: --protocol must be TCP, UDP or SCTP, got "${values.protocol}"`);
  const objects = await loadObjects(manifests);
  const ev = new OfflineEvaluator({ objects, pipeline: readPipeline(values.pipeline) });
  try {
    // The same selection as the admin API's POST /v1/matrix (and the console's heatmap).
    let names: string[];
    try {
      names = selectPods(ev.state, { namespace: values.namespace, selector: values.selector, where: 'kwp matrix: --selector' }).map((p) => `${p.namespace}/${p.name}`);
    } catch (err) {
      if (err instanceof KwpError) throw new KwpError('KWP_ERR_USAGE', err.message);
      throw err;
    }
    const m = predictMatrix(ev, names, port, protocol);
    process.stdout.write(`${protocol}/${port}\n` + formatMatrix(names, (s, d) => m.get(`${s}>${d}`)!));
  } finally {
    ev.dispose();
  }
  return 0;
}
