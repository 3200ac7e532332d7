// `kwp diff`: what a proposed change of manifests or pipeline would flip
// among recorded flows. Exit 1 when any flow changes verdict, 0 when none,
// 2 for bad input (as for every usage error), so CI can gate a change on it.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { OfflineEvaluator } from '../eval.js';
import { readPipelineFile } from '../pipeline/spec.js';
import { parseRecordedFlows, type RecordedFlowRead } from '../impact/recorded-flows.js';
import { diffSummary, diffVerdicts, formatChanges, type VerdictDiff } from '../impact/verdict-diff.js';
import { inputErrorsExit2, outputFormat, parseFlags, requireFlag } from './args.js';
import { loadObjects, pluginModules } from './eval.js';
import { adminClient } from './admin-flags.js';
import { placeInFile, requestFlows } from './request-flows.js';
import { TOKEN_ENV } from '../admin/auth.js';

const HELP = `usage: kwp diff --manifests CURRENT [--manifests ...] (--proposed PROPOSED [--proposed ...] | --proposed-pipeline FILE)
                --flows FILE [--pipeline FILE] [--proposed-pipeline FILE] [--module FILE ...] [-o table|json]
       kwp diff --server URL [--token-file FILE] (--proposed PATH [--proposed ...] | --proposed-pipeline FILE)
                [--flows FILE] [-o table|json]

Decides every recorded flow twice with the WASM pipeline, as things are and
as proposed, and lists each flow whose verdict changes with both
walkthroughs. Exit status: 1 when any flow changes, 0 when none, 2 for bad
input (a file, line and field are named).

With --server the agent at URL decides (POST /v1/diff): as things are is its
live state and active pipeline, --proposed PATH are objects added to the live
state or replacing the one of the same kind, namespace and name, and the
flows are the node's recorded flows unless --flows names a file. Nothing is
applied. The output and exit status are those of the offline form.

  --manifests PATH          the manifests as they are (file or directory, repeatable), strictly validated
  --proposed PATH           the manifests as they would be after the change (the whole set, repeatable);
                            default: the current manifests
  --flows FILE              recorded flows: JSON Lines of the agent's flow records (kwp flows -o json),
                            or lines/a JSON array with at least "src", "dst", "port" ("protocol" TCP when
                            absent); other fields are ignored; "-" reads stdin
  --pipeline FILE           the pipeline as it is (default: the default pipeline)
  --proposed-pipeline FILE  the pipeline as proposed (default: the --pipeline one)
  --module FILE             a plugin .wasm either pipeline may name (repeatable)
  --server URL              ask the agent at URL instead (its live state, modules and recorded flows);
                            --manifests, --pipeline and --module then have no meaning
  --token-file FILE         with --server: the admin token (default: $${TOKEN_ENV}); POST /v1/diff needs it
  -o, --output FORMAT       table (default) or json

Examples:
  kwp diff --manifests examples/flows/manifests --proposed examples/flows/proposed --flows examples/flows/recorded.jsonl
  kwp flows -o json > flows.jsonl && kwp diff --manifests live/ --proposed-pipeline tighter.yaml --flows flows.jsonl
  kwp diff --server http://127.0.0.1:9443 --proposed examples/flows/proposed
`;

/** The recorded flows of a file or stdin (`-`), as `kwp diff` and `kwp recommend` read them. */
export async function readRecordedFlowsFile(file: string): Promise<RecordedFlowRead> {
  let text: string;
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new KwpError('KWP_ERR_FLOWS', `${file}: cannot read the flows file: ${(err as Error).message}; give the file kwp flows -o json wrote, or "-" for stdin`);
    }
  }
  return parseRecordedFlows(text, file === '-' ? 'stdin' : file);
}

export function diffAsJSON(diff: Pick<VerdictDiff, 'decided' | 'changes' | 'skipped'>): string {
  return `${JSON.stringify({ decided: diff.decided, changed: diff.changes.length, changes: diff.changes, skipped: diff.skipped }, null, 2)}\n`;
}

async function compare(argv: string[]): Promise<number> {
  const { values } = parseFlags('diff', argv, {
    manifests: { type: 'string', multiple: true },
    proposed: { type: 'string', multiple: true },
    flows: { type: 'string' },
    pipeline: { type: 'string' },
    'proposed-pipeline': { type: 'string' },
    module: { type: 'string', multiple: true },
    server: { type: 'string' },
    'token-file': { type: 'string' },
    output: { type: 'string', short: 'o' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) { process.stdout.write(HELP); return 0; }
  const output = outputFormat('diff', values.output, ['table', 'json'] as const, 'table');
  if (values.server !== undefined) return compareLive(values, output);
  if (values['token-file'] !== undefined) throw new KwpError('KWP_ERR_USAGE', 'kwp diff: --token-file goes with --server (the offline form asks no agent)');
  const current = requireFlag('diff', 'manifests', values.manifests);
  const flowsFile = requireFlag('diff', 'flows', values.flows);
  if (!values.proposed?.length && values['proposed-pipeline'] === undefined) {
    throw new KwpError('KWP_ERR_USAGE', 'kwp diff: nothing is proposed; give --proposed PATH (the manifests after the change) or --proposed-pipeline FILE, or both');
  }
  const modules = pluginModules(values.module);
  const read = await readRecordedFlowsFile(flowsFile);
  const objects = await loadObjects(current, modules);
  const proposedObjects = values.proposed?.length ? await loadObjects(values.proposed, modules) : objects;
  const pipeline = values.pipeline ? readPipelineFile(values.pipeline) : undefined;
  const proposedPipeline = values['proposed-pipeline'] ? readPipelineFile(values['proposed-pipeline']) : pipeline;

  const before = new OfflineEvaluator({ objects, pipeline, modules: modules?.resolver });
  let after: OfflineEvaluator | undefined;
  let diff: VerdictDiff;
  try {
    after = new OfflineEvaluator({ objects: proposedObjects, pipeline: proposedPipeline, modules: modules?.resolver });
    diff = diffVerdicts(read.flows, (f) => before.evaluateAll(f), (f) => after!.evaluateAll(f));
    diff.skipped.unshift(...read.skipped);
  } finally {
    before.dispose();
    after?.dispose();
  }
  return report(diff, output);
}

/** Prints a diff as both forms do; the exit status: 1 when any flow changes, 0 when none. */
function report(diff: Pick<VerdictDiff, 'decided' | 'changes' | 'skipped'>, output: 'table' | 'json'): number {
  for (const s of diff.skipped) process.stderr.write(`warning: ${s}\n`);
  if (output === 'json') {
    process.stdout.write(diffAsJSON(diff));
    process.stderr.write(diffSummary(diff));
  } else {
    process.stdout.write(formatChanges(diff) + diffSummary(diff));
  }
  return diff.changes.length > 0 ? 1 : 0;
}

interface LiveFlags { manifests?: string[]; proposed?: string[]; flows?: string; pipeline?: string; 'proposed-pipeline'?: string; module?: string[]; server?: string; 'token-file'?: string }

/** `kwp diff --server`: the same question put to a running agent (POST /v1/diff). */
async function compareLive(values: LiveFlags, output: 'table' | 'json'): Promise<number> {
  for (const flag of ['manifests', 'pipeline', 'module'] as const) {
    if (values[flag] !== undefined) {
      throw new KwpError('KWP_ERR_USAGE', `kwp diff --server: --${flag} has no meaning, the agent decides with its live state, active pipeline and modules; give --proposed PATH (objects to add or replace) or --proposed-pipeline FILE`);
    }
  }
  if (!values.proposed?.length && values['proposed-pipeline'] === undefined) {
    throw new KwpError('KWP_ERR_USAGE', 'kwp diff --server: nothing is proposed; give --proposed PATH (objects added to the live state or replacing theirs) or --proposed-pipeline FILE, or both');
  }
  const objects = values.proposed?.length ? await loadObjects(values.proposed, undefined) : undefined;
  const pipeline = values['proposed-pipeline'] ? readPipelineFile(values['proposed-pipeline']) : undefined;
  const flows = values.flows !== undefined ? requestFlows(values.flows) : undefined;
  const client = adminClient(values);
  const answer = await client.diff({ ...(pipeline ? { pipeline } : {}), ...(objects ? { objects } : {}), ...(flows ? { flows: flows.values } : {}) });
  return report(flows ? placeInFile(answer, values.flows!, flows.lines) : answer, output);
}

export const runDiff = inputErrorsExit2(compare);
