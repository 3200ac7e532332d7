// `kwp pipeline get|set|rollback|history`: the pipeline of a running agent.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { parse as parseYAML } from 'yaml';
import { formatPipelineYAML, parsePipelineText } from '../pipeline/spec.js';
import { formatRollout, parseRollout, parseTarget } from '../fleet/objects.js';
import type { PipelineAnswer } from '../admin/client.js';
import { parseFlags, subcommand } from './args.js';
import { diffSummary, formatChanges } from '../impact/verdict-diff.js';
import { placeInFile, requestFlows } from './request-flows.js';
import { adminClient, adminFlagSpec, ADMIN_FLAGS_HELP, print, table } from './admin-flags.js';

const HELP = `usage: kwp pipeline get
       kwp pipeline set FILE [--force | --dry-run [--flows FLOWS]]
       kwp pipeline rollback
       kwp pipeline history

get       prints the active pipeline as YAML, with its revision
set       replaces it with FILE (YAML or JSON). The change is based on the
          revision read just before: if someone changed the pipeline in
          between, it is refused (412) unless --force. With --dry-run
          nothing is applied: the node's recorded flows are decided with
          FILE beside the active pipeline (POST /v1/diff), each flow whose
          verdict would change is listed, and the exit status is 1 when any
          would, 0 when none. --flows FLOWS decides the flows of a file
          instead (flow records or {src, dst, port, protocol} lines).
rollback  swaps back to the previous pipeline (kept warm, so instant)
history   lists the changes

${ADMIN_FLAGS_HELP}
`;

function show(p: PipelineAnswer, json: boolean): void {
  if (json) { print(JSON.stringify(p, null, 2)); return; }
  const previous = p.previousRevision !== undefined ? ` (rollback goes to revision ${p.previousRevision})` : '';
  print(`# revision ${p.revision}${previous}\n${formatPipelineYAML({ stages: p.stages })}`);
}

export async function runPipeline(argv: string[]): Promise<number> {
  const { sub, rest } = subcommand('pipeline', argv);
  const { values, positionals } = parseFlags(sub ? `pipeline ${sub}` : 'pipeline', rest, { ...adminFlagSpec, force: { type: 'boolean' }, 'dry-run': { type: 'boolean' }, flows: { type: 'string' } }, true);
  if (values.help || !sub) { print(HELP); return argv.length ? 0 : 2; }
  const client = adminClient(values);
  const json = values.output === 'json';

  switch (sub) {
    case 'get':
      show(await client.getPipeline(), json);
      return 0;
    case 'set': {
      if (positionals.length !== 1) throw new KwpError('KWP_ERR_USAGE', 'kwp pipeline set: give exactly one pipeline FILE');
      const file = positionals[0];
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new KwpError('KWP_ERR_PIPELINE_INVALID', `${file}: cannot read the pipeline file: ${(err as Error).message}`);
      }
      const spec = parsePipelineText(text, file);
      // A Pipeline object's target and rollout (docs/fleet.md) travel along; a cluster-level admin API writes them, a node ignores them.
      const doc = parseYAML(text) as { target?: unknown; rollout?: unknown };
      const target = parseTarget(doc.target, `${file}: target`);
      const extras = {
        ...(target ? { target: { nodeSelector: target } } : {}),
        ...(doc.rollout !== undefined ? { rollout: formatRollout(parseRollout(doc.rollout, `${file}: rollout`)) } : {}),
      };
      if (values['dry-run']) {
        if (values.force) throw new KwpError('KWP_ERR_USAGE', 'kwp pipeline set: --dry-run applies nothing, so --force has no meaning with it');
        const flows = values.flows === undefined ? undefined : requestFlows(values.flows);
        const answer = await client.diff({ pipeline: spec, ...(flows ? { flows: flows.values } : {}) });
        const diff = flows ? placeInFile(answer, values.flows!, flows.lines) : answer;
        for (const s of diff.skipped) process.stderr.write(`warning: ${s}\n`);
        if (json) print(JSON.stringify(diff, null, 2));
        else print(`# dry run against revision ${diff.revision}: nothing applied\n${formatChanges(diff)}${diffSummary(diff)}`);
        return diff.changes.length > 0 ? 1 : 0;
      }
      if (values.flows !== undefined) throw new KwpError('KWP_ERR_USAGE', 'kwp pipeline set: --flows goes with --dry-run');
      const base = values.force ? undefined : (await client.getPipeline()).revision;
      show(await client.setPipeline({ ...spec, ...extras }, base), json);
      return 0;
    }
    case 'rollback':
      show(await client.rollback(), json);
      return 0;
    case 'history': {
      const history = await client.history();
      if (json) { print(JSON.stringify(history, null, 2)); return 0; }
      print(table(['TIME', 'ACTION', 'REVISION', 'FROM', 'REASON'],
        history.map((h) => [h.time, h.action, String(h.revision), h.from === undefined ? '-' : String(h.from), h.reason ?? ''])));
      return 0;
    }
  }
  throw new KwpError('KWP_ERR_USAGE', `kwp pipeline: unknown subcommand "${sub}"; use get, set, rollback or history`);
}
