import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { OciClient, WASM_LAYER_MEDIA_TYPE } from './oci.js';
import { TestRegistry } from '../../test/fleet/registry.js';
import { isKwpError } from '../errors.js';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 42]);

let registry: TestRegistry;
const client = new OciClient();

beforeAll(async () => {
  registry = await TestRegistry.start();
});
afterAll(async () => {
  await registry?.destroy();
});

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isKwpError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error('expected a KwpError');
}

describe('OCI distribution against a real registry (Distribution 2.8)', () => {
  it('pushes a module as an artifact and pulls the same bytes by manifest digest', async () => {
    const ref = await client.push(registry.host, 'kwp/demo', '1.0.0', bytes, { name: 'demo', version: '1.0.0' });
    expect(ref.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const manifest = await (await fetch(`http://${registry.host}/v2/kwp/demo/manifests/${ref.digest}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } })).json();
    expect(manifest.layers).toEqual([expect.objectContaining({ mediaType: WASM_LAYER_MEDIA_TYPE, digest: `sha256:${sha(bytes)}`, size: bytes.length })]);
    expect(Buffer.from(await client.pull(ref, sha(bytes), 1 << 20, 'test'))).toEqual(Buffer.from(bytes));
  });

  it('pushing the same bytes again gives the same pinned reference', async () => {
    const a = await client.push(registry.host, 'kwp/again', '1.0.0', bytes, { name: 'again', version: '1.0.0' });
    const b = await client.push(registry.host, 'kwp/again', '1.0.0', bytes, { name: 'again', version: '1.0.0' });
    expect(b).toEqual(a);
  });

  it('refuses an artifact whose wasm layer is not the sha256 the object names', async () => {
    const ref = await client.push(registry.host, 'kwp/other', '1.0.0', bytes, { name: 'other', version: '1.0.0' });
    const message = await codeOf(client.pull(ref, '0'.repeat(64), 1 << 20, 'EvaluatorModule other.1.0.0'));
    expect(message).toMatch(/^KWP_ERR_FLEET_DIGEST_MISMATCH: EvaluatorModule other.1.0.0: the artifact's wasm layer is sha256:/);
  });

  it('refuses a layer larger than the module size cap before downloading it', async () => {
    const ref = await client.push(registry.host, 'kwp/big', '1.0.0', bytes, { name: 'big', version: '1.0.0' });
    expect(await codeOf(client.pull(ref, sha(bytes), 4, 'big'))).toMatch(/^KWP_ERR_MODULE_TOO_LARGE: big: the wasm layer is 9 bytes, over the cap of 4/);
  });

  it('names the URL when the manifest digest is unknown, and when the registry is down', async () => {
    const missing = { registry: registry.host, repository: 'kwp/demo', digest: `sha256:${'1'.repeat(64)}` };
    expect(await codeOf(client.pull(missing, sha(bytes), 1 << 20, 'm'))).toMatch(/^KWP_ERR_FLEET_FETCH: m: http:\/\/127\.0\.0\.1:\d+\/v2\/kwp\/demo\/manifests\/sha256:1{64} answered HTTP 404/);
    await registry.stop();
    try {
      expect(await codeOf(client.pull(missing, sha(bytes), 1 << 20, 'm'))).toMatch(/^KWP_ERR_FLEET_FETCH: m: GET http:\/\/127\.0\.0\.1:\d+\/v2\/kwp\/demo\/manifests\/.* failed: ECONNREFUSED; is the registry up/);
    } finally {
      await registry.start();
    }
  });
});
