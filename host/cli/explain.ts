// `kwp explain`: why the running agent allows or denies one flow.
import { KwpError } from '../errors.js';
import { parseFlags, requireFlag } from './args.js';
import { adminClient, adminFlagSpec, ADMIN_FLAGS_HELP, print } from './admin-flags.js';

const HELP = `usage: kwp explain --src SRC --dst DST --port PORT [--protocol TCP|UDP|SCTP] [--src-port PORT]

Asks the running agent to decide one flow with its active pipeline and prints
the walk through every stage. SRC and DST are "namespace/pod" or IP addresses.

${ADMIN_FLAGS_HELP}
`;

function port(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new KwpError('KWP_ERR_USAGE', `kwp explain: --${flag} must be a port 1-65535, not ${JSON.stringify(value)}`);
  return n;
}

export async function runExplain(argv: string[]): Promise<number> {
  const { values } = parseFlags('explain', argv, {
    ...adminFlagSpec, src: { type: 'string' }, dst: { type: 'string' }, port: { type: 'string' }, protocol: { type: 'string' }, 'src-port': { type: 'string' },
  });
  if (values.help) { print(HELP); return 0; }
  const flow = {
    src: requireFlag('explain', 'src', values.src),
    dst: requireFlag('explain', 'dst', values.dst),
    port: port(requireFlag('explain', 'port', values.port), 'port')!,
    ...(values.protocol ? { protocol: values.protocol.toUpperCase() } : {}),
    ...(values['src-port'] ? { srcPort: port(values['src-port'], 'src-port') } : {}),
  };
  const answer = await adminClient(values).explain(flow);
  if (values.output === 'json') print(JSON.stringify(answer, null, 2));
  else {
    print(`${answer.walkthrough}   (pipeline revision ${answer.revision})`);
    for (const note of answer.notes) print(`note: ${note}`);
  }
  return 0;
}
