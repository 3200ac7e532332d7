// `kwp module push|ls|rm`: the module store of a running agent.
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { readWasmSummary } from '../runtime/wasm-binary.js';
import { loadPrivateKey, readSignatureFile, signModule } from '../control/signature.js';
import { parseFlags, subcommand } from './args.js';
import { adminClient, adminFlagSpec, ADMIN_FLAGS_HELP, print, table } from './admin-flags.js';

const HELP = `usage: kwp module push FILE [--name NAME] [--version VERSION] [--sign-key KEY | --signature SIGFILE] [--self-test-config JSON]
       kwp module ls [NAME]
       kwp module rm NAME[@VERSION]

push  uploads a .wasm evaluator; NAME and VERSION default to the module's kwp.meta
      and must equal it. --sign-key signs the upload (agents with trusted keys
      require a signature); --signature sends one made earlier with
      "kwp sign FILE --name NAME --version VERSION --out SIGFILE", so the
      private key need not be where the push runs; --self-test-config is the
      config the upload self-test uses
      (default {}), for modules that need one, e.g. '{"tier":"Admin"}'.
ls    lists stored modules (every version), or the versions of NAME.
rm    removes every version of NAME, or one version; refused while the active
      pipeline uses it.

${ADMIN_FLAGS_HELP}
`;

/** kwp.meta's name and version, so a push needs no flags for a well-built module. */
function metaOf(bytes: Uint8Array, file: string): { name?: string; version?: string } {
  try {
    const section = readWasmSummary(bytes).customSections.get('kwp.meta')?.[0];
    if (!section) return {};
    const meta = JSON.parse(new TextDecoder().decode(section));
    return { name: typeof meta.name === 'string' ? meta.name : undefined, version: typeof meta.version === 'string' ? meta.version : undefined };
  } catch {
    throw new KwpError('KWP_ERR_USAGE', `kwp module push: ${file} is not a readable WebAssembly module; pass --name and --version to upload it anyway`);
  }
}

export async function runModule(argv: string[]): Promise<number> {
  const { sub, rest } = subcommand('module', argv);
  const { values, positionals } = parseFlags(sub ? `module ${sub}` : 'module', rest, {
    ...adminFlagSpec, name: { type: 'string' }, version: { type: 'string' }, 'sign-key': { type: 'string' }, signature: { type: 'string' }, 'self-test-config': { type: 'string' },
  }, true);
  if (values.help || !sub) { print(HELP); return argv.length ? 0 : 2; }
  const client = adminClient(values);
  const json = values.output === 'json';

  if (sub === 'push') {
    if (positionals.length !== 1) throw new KwpError('KWP_ERR_USAGE', 'kwp module push: give exactly one FILE; see "kwp module --help"');
    const file = positionals[0];
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `kwp module push: cannot read ${file}: ${(err as Error).message}`);
    }
    const meta = values.name && values.version ? {} : metaOf(bytes, file);
    const name = values.name ?? meta.name;
    const version = values.version ?? meta.version;
    if (!name || !version) throw new KwpError('KWP_ERR_USAGE', `kwp module push: ${file} has no kwp.meta name/version; pass --name and --version`);
    let selfTestConfig: Record<string, unknown> | undefined;
    if (values['self-test-config']) {
      try {
        selfTestConfig = JSON.parse(values['self-test-config']);
      } catch (err) {
        throw new KwpError('KWP_ERR_USAGE', `kwp module push: --self-test-config is not JSON: ${(err as Error).message}`);
      }
    }
    if (values['sign-key'] && values.signature) throw new KwpError('KWP_ERR_USAGE', 'kwp module push: give --sign-key or --signature, not both');
    const signature = values['sign-key'] ? signModule(loadPrivateKey(values['sign-key']), bytes, name, version)
      : values.signature ? readSignatureFile(values.signature, 'kwp module push: --signature') : undefined;
    const result = await client.pushModule(bytes, { name, version, signature, selfTestConfig });
    if (json) print(JSON.stringify(result, null, 2));
    else print(`${result.created ? 'stored' : 'unchanged'} ${result.module.name}@${result.module.version} sha256:${result.module.sha256} (${result.module.size} bytes, ABI ${result.module.abi}${result.module.signedBy ? `, signed by ${result.module.signedBy}` : ''})`);
    return 0;
  }

  if (sub === 'ls') {
    const modules = positionals[0] ? await client.getModule(positionals[0]) : await client.listModules();
    if (json) { print(JSON.stringify(modules, null, 2)); return 0; }
    print(table(['NAME', 'VERSION', 'SHA256', 'SIZE', 'ABI', 'USED BY'],
      modules.map((m) => [m.name, m.version, m.sha256.slice(0, 12), String(m.size), m.abi, m.usedBy.join(',') || '-'])));
    return 0;
  }

  if (sub === 'rm') {
    if (positionals.length !== 1) throw new KwpError('KWP_ERR_USAGE', 'kwp module rm: give NAME or NAME@VERSION');
    const [name, version] = positionals[0].split('@');
    const removed = await client.removeModule(name, version);
    if (json) print(JSON.stringify(removed, null, 2));
    else for (const m of removed) print(`removed ${m.name}@${m.version} sha256:${m.sha256}`);
    return 0;
  }

  throw new KwpError('KWP_ERR_USAGE', `kwp module: unknown subcommand "${sub}"; use push, ls or rm`);
}
