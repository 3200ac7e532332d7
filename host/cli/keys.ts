// `kwp keygen` and `kwp sign`: ed25519 keys and module signatures for signed
// uploads (docs/admin-api.md, "Signed uploads").
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { KwpError } from '../errors.js';
import { keyFingerprint, loadPrivateKey, signModule } from '../control/signature.js';
import { parseFlags, requireFlag } from './args.js';
import { print } from './admin-flags.js';

const KEYGEN_HELP = `usage: kwp keygen --out PREFIX [--force]

Writes an ed25519 key pair: PREFIX.key (private, mode 0600) and PREFIX.pub
(public; give it to the agent with --trusted-key).
`;

const SIGN_HELP = `usage: kwp sign FILE --key KEY --name NAME --version VERSION [--out SIGFILE]

Prints (or writes) the base64 ed25519 signature of FILE for an upload as
NAME@VERSION: the signed message is sha256(FILE) in hex, "\\n", NAME, "\\n", VERSION.
`;

export async function runKeygen(argv: string[]): Promise<number> {
  const { values } = parseFlags('keygen', argv, { out: { type: 'string' }, force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } });
  if (values.help) { print(KEYGEN_HELP); return 0; }
  const prefix = requireFlag('keygen', 'out', values.out);
  const files = [`${prefix}.key`, `${prefix}.pub`];
  if (!values.force) {
    const existing = files.filter((f) => existsSync(f));
    if (existing.length) throw new KwpError('KWP_ERR_USAGE', `kwp keygen: ${existing.join(' and ')} already exist; pick another --out or pass --force`);
  }
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(files[0], privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(files[1], publicKey.export({ type: 'spki', format: 'pem' }));
  print(`wrote ${files[0]} (private) and ${files[1]} (public), key ${keyFingerprint(publicKey)}`);
  return 0;
}

export async function runSign(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags('sign', argv, {
    key: { type: 'string' }, name: { type: 'string' }, version: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  }, true);
  if (values.help) { print(SIGN_HELP); return 0; }
  if (positionals.length !== 1) throw new KwpError('KWP_ERR_USAGE', 'kwp sign: give exactly one module FILE; see "kwp sign --help"');
  const file = positionals[0];
  const key = loadPrivateKey(requireFlag('sign', 'key', values.key));
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `kwp sign: cannot read ${file}: ${(err as Error).message}`);
  }
  const signature = signModule(key, bytes, requireFlag('sign', 'name', values.name), requireFlag('sign', 'version', values.version));
  if (values.out) writeFileSync(values.out, `${signature}\n`);
  else print(signature);
  return 0;
}
