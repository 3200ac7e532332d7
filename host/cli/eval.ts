// `kwp eval` and `kwp matrix`: the offline calculator, on the real pipeline.
// Objects come from manifests (strictly validated) or a live cluster; flows
// from a file, stdin or the command line. Flows that say what they expect
// are checked, so CI can gate on the exit status.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { Kinds, type KubeObject } from '../contract.js';
import { loadManifests } from '../sources/manifest-files.js';
import { parseFlows, toFlowSpec, type FlowSpec, type FlowProtocol } from '../flows.js';
import { OfflineEvaluator, priorityTieWarnings } from '../eval.js';
import { readPipelineFile, type PipelineSpec } from '../pipeline/spec.js';
import type { ModuleResolver } from '../pipeline/modules.js';
import { compileEvaluator } from '../runtime/loader.js';
import { outputFormat, parseFlags, portFlag, requireFlag } from './args.js';
import { check, EVAL_FORMATS, formatResults, summaryLine, tally, type CheckedResult } from './eval-output.js';
import { matrixRows } from '../reachability.js';
import { selectPods } from '../state/cluster-listing.js';

const EVAL_HELP = `usage: kwp eval (--manifests PATH ... | --kubeconfig FILE) (--flows FILE | --src SRC --dst DST --port PORT ...)
                [-o walkthrough|table|json|yaml] [--pipeline FILE] [--module FILE ...] [--dns NAME=IP ...] [--dns-file FILE]

Decides each flow with the same WASM evaluators the agent runs. Flows that say
what they "expect" are checked: a summary line ("N wrong, M correct") follows,
and the exit status is 1 when any is wrong, so CI can gate on it.

Objects (one of):
  --manifests PATH     a file or directory of YAML/JSON manifests (repeatable), strictly validated
  --kubeconfig FILE    list the objects of a live cluster instead
  --timeout SECONDS    how long listing the cluster may take (default 30)
Flows (one of):
  --flows FILE         a JSON array or JSON Lines of {"src", "dst", "protocol", "port", "expect"}; "-" reads stdin.
                       "dst" may name a Service ("namespace/name" or a ClusterIP, or a node address
                       and NodePort): the flow is then decided once per endpoint, as a Service proxy
                       would rewrite it
  --src SRC --dst DST --port PORT [--port PORT ...] [--protocol TCP|UDP|SCTP] [--expect allow|deny]
                       one-off flows; SRC and DST are "namespace/pod" or IP addresses
Output and pipeline:
  -o, --output FORMAT  walkthrough (default), table, json or yaml
  --pipeline FILE      a pipeline file instead of the default pipeline
  --module FILE        a plugin .wasm the pipeline may name by its kwp.meta name (repeatable)
  --dns NAME=IP        an address a name resolved to, for domainNames peers (repeatable)
  --dns-file FILE      a JSON object {"name": ["ip", ...]}

Examples:
  kwp eval --manifests examples/basic/manifests --flows examples/basic/flows.json
  kwp eval --manifests examples/basic/manifests --src x/a --dst y/a --port 80 --port 81 -o table
  kwp eval --kubeconfig ~/.kube/config --flows flows.json -o json
`;

const MATRIX_HELP = `usage: kwp matrix (--manifests PATH ... | --kubeconfig FILE) [--port 80 ...] [--protocol TCP] [--pipeline FILE] [--module FILE ...] [-o text|json]
                  [--namespace NS] [--selector SELECTOR]

Prints the pod-to-pod reachability matrix of every pod with an IP, one per
port: rows are sources, columns destinations, "." allowed and "X" denied.
  --port PORT          a destination port (repeatable; default 80)
  --protocol NAME      TCP (default), UDP or SCTP
  -o, --output FORMAT  text (default) or json ({"TCP/80": {"src": {"dst": true}}})
  --namespace NS       only the pods of this namespace
  --selector SELECTOR  only pods whose labels match, e.g. app=web,tier!=db (key=value, key!=value, key, !key)
  --timeout SECONDS    with --kubeconfig: how long listing the cluster may take (default 30)
`;

export interface CompiledPlugins {
  resolver: ModuleResolver;
  /** The kinds the plugins read, accepted in manifests without a CRD. */
  kinds: string[];
}

/** Plugins given with --module, resolvable by their kwp.meta name (and name@version). */
export function pluginModules(files: string[] | undefined): CompiledPlugins | undefined {
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
    resolver: { resolve: (ref) => compiled.find((m) => ref === m.meta.name || ref === `${m.meta.name}@${m.meta.version}`) },
    kinds: compiled.flatMap((m) => m.meta.kinds),
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

export async function loadObjects(paths: string[], modules: CompiledPlugins | undefined): Promise<KubeObject[]> {
  const { objects, warnings } = await loadManifests(paths, { kinds: modules?.kinds });
  for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
  for (const w of priorityTieWarnings(objects)) process.stderr.write(`warning: ${w}\n`);
  return objects;
}

interface ObjectFlags { manifests?: string[]; kubeconfig?: string; timeout?: string }

/** The objects to evaluate against: manifests, or a live cluster's. */
async function objectsFrom(command: string, values: ObjectFlags, modules: CompiledPlugins | undefined): Promise<KubeObject[]> {
  if (values.manifests?.length && values.kubeconfig) throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: give --manifests or --kubeconfig, not both`);
  if (values.kubeconfig) {
    const seconds = Number(values.timeout ?? '30');
    if (!Number.isFinite(seconds) || seconds <= 0) throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --timeout takes seconds, got "${values.timeout}"`);
    const { clusterSnapshot } = await import('./cluster-snapshot.js');
    return clusterSnapshot(values.kubeconfig, seconds * 1000);
  }
  if (!values.manifests?.length) throw new KwpError('KWP_ERR_USAGE', `kwp ${command}: --manifests or --kubeconfig is required; see "kwp ${command} --help"`);
  return loadObjects(values.manifests, modules);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

interface FlowFlags { flows?: string; src?: string; dst?: string; port?: string[]; protocol?: string; expect?: string }

/** The flows: a file, stdin, or the one-off --src/--dst/--port flags. */
async function flowsFrom(values: FlowFlags): Promise<FlowSpec[]> {
  const oneOff = values.src !== undefined || values.dst !== undefined || (values.port?.length ?? 0) > 0;
  if (values.flows !== undefined && oneOff) throw new KwpError('KWP_ERR_USAGE', 'kwp eval: give --flows or --src/--dst/--port, not both');
  if (oneOff) {
    const src = requireFlag('eval', 'src', values.src);
    const dst = requireFlag('eval', 'dst', values.dst);
    const ports = requireFlag('eval', 'port', values.port);
    return ports.map((p, i) => toFlowSpec({
      src, dst, port: portFlag('eval', 'port', p),
      ...(values.protocol !== undefined ? { protocol: values.protocol } : {}),
      ...(values.expect !== undefined ? { expect: values.expect } : {}),
    }, 'the command line', i + 1));
  }
  if (values.protocol !== undefined || values.expect !== undefined) {
    throw new KwpError('KWP_ERR_USAGE', 'kwp eval: --protocol and --expect go with --src/--dst/--port; in a flows file, write them in each flow');
  }
  const file = requireFlag('eval', 'flows', values.flows);
  if (file === '-') return parseFlows(await readStdin(), 'stdin');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KwpError('KWP_ERR_FLOWS', `${file}: cannot read the flows file: ${(err as Error).message}; give a file, or "-" for stdin`);
  }
  return parseFlows(text, file);
}

export async function runEval(argv: string[]): Promise<number> {
  const { values } = parseFlags('eval', argv, {
    manifests: { type: 'string', multiple: true },
    kubeconfig: { type: 'string' },
    timeout: { type: 'string' },
    flows: { type: 'string' },
    src: { type: 'string' },
    dst: { type: 'string' },
    port: { type: 'string', multiple: true },
    protocol: { type: 'string' },
    expect: { type: 'string' },
    output: { type: 'string', short: 'o' },
    pipeline: { type: 'string' },
    dns: { type: 'string', multiple: true },
    'dns-file': { type: 'string' },
    module: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(EVAL_HELP); return 0; }
  const output = outputFormat('eval', values.output, EVAL_FORMATS, 'walkthrough');
  const flows = await flowsFrom(values);
  const modules = pluginModules(values.module);
  const objects = await objectsFrom('eval', values, modules);
  const ev = new OfflineEvaluator({ objects, pipeline: readPipeline(values.pipeline), dns: parseDns(values.dns, values['dns-file']), modules: modules?.resolver });
  let results: CheckedResult[];
  try {
    results = check(flows.flatMap((f, i) => ev.evaluateAll(f, i)));
  } finally {
    ev.dispose();
  }
  process.stdout.write(formatResults(results, output));
  const t = tally(results);
  if (t.wrong + t.correct > 0) {
    // JSON and YAML stay parseable: the summary goes to stderr there.
    (output === 'json' || output === 'yaml' ? process.stderr : process.stdout).write(summaryLine(t));
  }
  return t.wrong > 0 ? 1 : 0;
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
    kubeconfig: { type: 'string' },
    timeout: { type: 'string' },
    port: { type: 'string', multiple: true },
    protocol: { type: 'string', default: 'TCP' },
    pipeline: { type: 'string' },
    module: { type: 'string', multiple: true },
    output: { type: 'string', short: 'o' },
    namespace: { type: 'string' },
    selector: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(MATRIX_HELP); return 0; }
  const output = outputFormat('matrix', values.output, ['text', 'json'] as const, 'text');
  const ports = (values.port?.length ? values.port : ['80']).map((p) => portFlag('matrix', 'port', p));
  const protocol = values.protocol!.toUpperCase();
  if (!['TCP', 'UDP', 'SCTP'].includes(protocol)) throw new KwpError('KWP_ERR_USAGE', `kwp matrix: --protocol must be TCP, UDP or SCTP, got "${values.protocol}"`);
  const modules = pluginModules(values.module);
  const objects = await objectsFrom('matrix', values, modules);
  const ev = new OfflineEvaluator({ objects, pipeline: readPipeline(values.pipeline), modules: modules?.resolver });
  try {
    // The same selection as the admin API's POST /v1/matrix (and the console's heatmap).
    let names: string[];
    try {
      names = selectPods(ev.state, { namespace: values.namespace, selector: values.selector, where: 'kwp matrix: --selector' }).map((p) => `${p.namespace}/${p.name}`);
    } catch (err) {
      if (err instanceof KwpError) throw new KwpError('KWP_ERR_USAGE', err.message);
      throw err;
    }
    if (names.length === 0) {
      throw new KwpError('KWP_ERR_MANIFEST', 'kwp matrix: no pod with an IP address among the objects, so there is no matrix to print; add Pods with status.podIPs');
    }
    const json: Record<string, Record<string, Record<string, boolean>>> = {};
    const text: string[] = [];
    for (const port of ports) {
      const m = predictMatrix(ev, names, port, protocol);
      const key = `${protocol}/${port}`;
      json[key] = Object.fromEntries(names.map((s) => [s, Object.fromEntries(names.map((d) => [d, m.get(`${s}>${d}`)!]))]));
      text.push(`${key}\n` + formatMatrix(names, (s, d) => m.get(`${s}>${d}`)!));
    }
    process.stdout.write(output === 'json' ? JSON.stringify(json, null, 2) + '\n' : text.join('\n'));
  } finally {
    ev.dispose();
  }
  return 0;
}
