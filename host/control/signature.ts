// Upload signatures. The signed message binds the module's bytes to the name
// and version it is uploaded under, so a signed build of one module cannot be
// replayed as another name or version:
//
//     sha256(module bytes) as 64 lower-case hex digits, "\n", name, "\n", version
//
// encoded as UTF-8, with no trailing newline. The signature is raw ed25519
// (64 bytes), sent base64-encoded.
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KwpError } from '../errors.js';

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function signedMessage(sha256: string, name: string, version: string): Buffer {
  return Buffer.from(`${sha256}\n${name}\n${version}`, 'utf8');
}

/** The base64 signature of a module uploaded as `name` `version`. */
export function signModule(privateKey: KeyObject, bytes: Uint8Array, name: string, version: string): string {
  return sign(null, signedMessage(sha256Hex(bytes), name, version), privateKey).toString('base64');
}

/**
 * A signature file as `kwp sign --out` writes it: one line, the base64 of the
 * 64-byte ed25519 signature. Anything else is refused naming the file and
 * what it holds instead, before any upload is attempted.
 */
export function readSignatureFile(file: string, where: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `${where}: cannot read ${file}: ${(err as Error).message}`);
  }
  const signature = text.trim();
  const expected = 'one line of base64 encoding a 64-byte ed25519 signature, as "kwp sign --out FILE" writes';
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) {
    const shown = signature.includes('-----BEGIN') ? 'a PEM key (give the key with --sign-key instead)' : `"${signature.slice(0, 40)}${signature.length > 40 ? '…' : ''}"`;
    throw new KwpError('KWP_ERR_USAGE', `${where}: ${file} is not a signature: expected ${expected}, found ${shown}`);
  }
  const bytes = Buffer.from(signature, 'base64').length;
  if (bytes !== 64) throw new KwpError('KWP_ERR_USAGE', `${where}: ${file} is not a signature: expected ${expected}, found base64 of ${bytes} bytes`);
  return signature;
}

/** Index of the trusted key that verifies the signature, or -1. */
export function verifyModuleSignature(keys: readonly KeyObject[], sha256: string, name: string, version: string, signatureB64: string): number {
  const sig = Buffer.from(signatureB64, 'base64');
  if (sig.length !== 64) return -1;
  const message = signedMessage(sha256, name, version);
  return keys.findIndex((k) => verify(null, message, k, sig));
}

/** Reads ed25519 public keys (PEM), refusing any other key type. */
export function loadTrustedKeys(files: readonly string[]): KeyObject[] {
  return files.map((file) => {
    let key: KeyObject;
    try {
      key = createPublicKey(readFileSync(file));
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `${file}: not a readable PEM public key: ${(err as Error).message}; create one with "kwp keygen --out PREFIX"`);
    }
    if (key.asymmetricKeyType !== 'ed25519') {
      throw new KwpError('KWP_ERR_USAGE', `${file}: a ${key.asymmetricKeyType} key; module signatures use ed25519 ("kwp keygen" makes one)`);
    }
    return key;
  });
}

export function loadPrivateKey(file: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(readFileSync(file));
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `${file}: not a readable PEM private key: ${(err as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new KwpError('KWP_ERR_USAGE', `${file}: a ${key.asymmetricKeyType} key; module signatures use ed25519`);
  return key;
}

/** A stable short name for a key in listings: the first 16 hex digits of the sha256 of its DER form. */
export function keyFingerprint(key: KeyObject): string {
  return createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);
}
