// `kwp flows`: the flow records a running agent decided (docs/flows.md), like
// `hubble observe`: filtered, as a table or JSON lines, and with --follow a
// stream of every new record until interrupted.
import { KwpError } from '../errors.js';
import { outputFormat, parseFlags } from './args.js';
import { adminClient, adminFlagSpec, print, table } from './admin-flags.js';
import { DEFAULT_SERVER, type FlowQuery } from '../admin/client.js';
import { parseFlowFilter } from '../flow-records/flow-filter.js';
import type { FlowDirection, FlowRecord } from '../flow-records/flow-record.js';
import { matchedClauses } from '../abi/attribution.js';

const HELP = `usage: kwp flows [--follow] [--verdict allow|deny] [--namespace NS] [--pod [NS/]POD] [--policy POLICY] [--since 5m] [--limit N] [-o table|json]

Prints the flow records of a running agent: every connection it decided,
aggregated per interval by source and destination workload, port, protocol,
verdict and the policy and rule that decided each direction (docs/flows.md).
  -f, --follow          keep printing new records as the agent emits them (Ctrl-C stops)
      --verdict V       only allow or only deny
      --namespace NS    either end in namespace NS
      --pod [NS/]POD    either end is this pod
      --policy POLICY   decided by this policy (namespace/name, or a cluster-scoped policy's name)
      --since DURATION  last seen at most this long ago (30s, 5m, 2h, 1d) or since an RFC 3339 time
      --limit N         at most the N newest records
  --server URL        the agent's admin API (default ${DEFAULT_SERVER})
  --token-file FILE   the admin token (default: $KWP_ADMIN_TOKEN)
  -o, --output FORMAT table (default) or json (one flow record per line, what kwp diff and kwp recommend read)
`;

/**
 * Who decided one direction, as walkthroughs say it: `Accept by np: y/allow-web,
 * ingress rule 0: namespaceSelector team=frontend + podSelector app=web, port http`.
 */
export function describeDirection(d: FlowDirection): string {
  if (d.action === 'Default') return 'no policy';
  if (d.action === 'Skipped') return '-';
  if (d.action === 'Remote') return 'other cluster';
  const clauses = matchedClauses({ policy: d.policy, rule: d.rule, peer: d.peer, port: d.rulePort });
  const who = [d.policy, d.rule].filter(Boolean).join(', ') + (clauses ? `: ${clauses}` : '');
  return `${d.action}${d.stage ? ` by ${d.stage}` : ''}${who ? `: ${who}` : ''}`;
}

function row(r: FlowRecord): string[] {
  return [r.lastSeen.slice(11, 23), r.src, r.dst, `${r.protocol}/${r.port}${r.dstPortName ? ` (${r.dstPortName})` : ''}`, r.verdict.toUpperCase(), String(r.count), describeDirection(r.egress), describeDirection(r.ingress)];
}

const HEAD = ['LAST SEEN', 'SOURCE', 'DESTINATION', 'PORT', 'VERDICT', 'COUNT', 'EGRESS', 'INGRESS'];

export async function runFlows(argv: string[]): Promise<number> {
  // Positionals are let through the parser and refused here, so a mistyped flag before one is named as the flag it is.
  const { values, positionals } = parseFlags('flows', argv, {
    ...adminFlagSpec, follow: { type: 'boolean', short: 'f' }, verdict: { type: 'string' }, namespace: { type: 'string' },
    pod: { type: 'string' }, policy: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' },
  }, true);
  if (values.help) { print(HELP); return 0; }
  if (positionals.length) throw new KwpError('KWP_ERR_USAGE', `kwp flows: takes no arguments, got "${positionals[0]}"; filters are flags (--namespace, --pod, ...); see "kwp flows --help"`);
  const output = outputFormat('flows', values.output, ['table', 'json'] as const, 'table');
  const query: FlowQuery = { namespace: values.namespace, pod: values.pod, verdict: values.verdict, policy: values.policy, since: values.since, limit: values.limit };
  // Checked here too, so a mistake is a usage error before any request.
  try {
    parseFlowFilter(query, (name) => `--${name}`);
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `kwp flows: ${(err as Error).message}`);
  }
  const client = adminClient(values);
  if (!values.follow) {
    const answer = await client.flows(query);
    if (output === 'json') for (const r of answer.flows) print(JSON.stringify(r));
    else process.stdout.write(table(HEAD, answer.flows.map(row)));
    return 0;
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  if (output === 'table') print(HEAD.join('  '));
  try {
    await client.followFlows(query, (r) => print(output === 'json' ? JSON.stringify(r) : row(r).join('  ')), stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return 0;
}
