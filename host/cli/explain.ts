// `kwp explain`: why the running agent allows or denies one flow.
import { KwpError } from '../errors.js';
import { parseFlags, requireFlag } from './args.js';
import { adminClient, adminFlagSpec, ADMIN_FLAGS_HELP, print } from './admin-flags.js';

const HELP = `usage: kwp explain --src SRC --dst DST --port PORT [--protocol TCP|UDP|SCTP] [--src-port PORT] [--via-service]

Asks the running agent to decide one flow with its active pipeline and prints
the walk through every stage. SRC and DST are "namespace/pod" or IP addresses.
DST may be a Service ("namespace/name" or its ClusterIP, PORT a Service port):
the flow is explained for the endpoint conntrack says its connections were
rewritten to, or for every endpoint when conntrack knows none.
  --via-service   DST is a pod the flow reached through a Service (SRC = DST:
                  the Service hairpin, which ClusterNetworkPolicy judges)

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
    ...adminFlagSpec, src: { type: 'string' }, dst: { type: 'string' }, port: { type: 'string' }, protocol: { type: 'string' }, 'src-port': { type: 'string' }, 'via-service': { type: 'boolean' },
  });
  if (values.help) { print(HELP); return 0; }
  const flow = {
    src: requireFlag('explain', 'src', values.src),
    dst: requireFlag('explain', 'dst', values.dst),
    port: port(requireFlag('explain', 'port', values.port), 'port')!,
    ...(values.protocol ? { protocol: values.protocol.toUpperCase() } : {}),
    ...(values['src-port'] ? { srcPort: port(values['src-port'], 'src-port') } : {}),
    ...(values['via-service'] ? { viaService: true } : {}),
  };
  const answer = await adminClient(values).explain(flow);
  if (values.output === 'json') print(JSON.stringify(answer, null, 2));
  else {
    print(`${answer.walkthrough}   (pipeline revision ${answer.revision})`);
    for (const note of answer.notes) print(`note: ${note}`);
  }
  return 0;
}
