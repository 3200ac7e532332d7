// Modules as OCI artifacts, over the OCI distribution HTTP API (what
// Distribution 2.8, Harbor, Zot, GHCR and ECR serve): the wasm bytes are one
// layer of media type application/vnd.kwp.evaluator.v1+wasm, the config blob
// is a small JSON of name, version and sha256. Nodes pull by manifest digest
// and check every digest on the way: the manifest's, the layer's against the
// EvaluatorModule's sha256, and the bytes against the layer's.
//
// No npm OCI client is maintained well enough to depend on (none covers
// pushing artifacts with our own media types without a container runtime),
// and the three requests a push needs and the two a pull needs are small.
import { createHash } from 'node:crypto';
import { KwpError } from '../errors.js';
import type { OciReference } from './objects.js';

export const WASM_LAYER_MEDIA_TYPE = 'application/vnd.kwp.evaluator.v1+wasm';
export const CONFIG_MEDIA_TYPE = 'application/vnd.kwp.evaluator.config.v1+json';
export const MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';
/** The artifact type, for registries that index OCI 1.1 artifacts. */
export const ARTIFACT_TYPE = 'application/vnd.kwp.evaluator.v1';

export interface OciClientOptions {
  /** Registries spoken to over plain HTTP besides loopback ones (HOST[:PORT]). */
  plainHttp?: string[];
  timeoutMs?: number;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

const digestOf = (bytes: Uint8Array) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

function isLoopback(registry: string): boolean {
  const host = registry.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export class OciClient {
  private readonly plainHttp: Set<string>;
  private readonly timeoutMs: number;

  constructor(options: OciClientOptions = {}) {
    this.plainHttp = new Set(options.plainHttp ?? []);
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** HTTPS, except for loopback registries and those configured as plain HTTP (a test registry, a node-local mirror). */
  baseUrl(registry: string): string {
    return `${isLoopback(registry) || this.plainHttp.has(registry) ? 'http' : 'https'}://${registry}/v2`;
  }

  private async request(what: string, url: string, init: RequestInit = {}): Promise<Response> {
    try {
      return await fetch(url, { ...init, redirect: 'follow', signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new KwpError('KWP_ERR_FLEET_FETCH', `${what}: ${init.method ?? 'GET'} ${url} failed: ${cause?.code ?? cause?.message ?? (err as Error).message}; is the registry up and reachable from here?`, { cause: err });
    }
  }

  private async expectOk(what: string, url: string, res: Response, statuses: number[], code: 'KWP_ERR_FLEET_FETCH' | 'KWP_ERR_FLEET_PUBLISH'): Promise<void> {
    if (statuses.includes(res.status)) return;
    const text = (await res.text().catch(() => '')).slice(0, 300);
    throw new KwpError(code, `${what}: ${url} answered HTTP ${res.status}${text ? `: ${text}` : ''}`);
  }

  private async pushBlob(registry: string, repository: string, bytes: Uint8Array, what: string): Promise<Descriptor & { mediaType: '' }> {
    const base = this.baseUrl(registry);
    const digest = digestOf(bytes);
    const head = await this.publishRequest(what, `${base}/${repository}/blobs/${digest}`, { method: 'HEAD' });
    if (head.status !== 200) {
      const startUrl = `${base}/${repository}/blobs/uploads/`;
      const started = await this.publishRequest(what, startUrl, { method: 'POST' });
      await this.expectOk(what, startUrl, started, [202], 'KWP_ERR_FLEET_PUBLISH');
      const location = started.headers.get('location');
      if (!location) throw new KwpError('KWP_ERR_FLEET_PUBLISH', `${what}: the registry started an upload without a Location header`);
      const upload = new URL(location, `${base}/`);
      upload.searchParams.set('digest', digest);
      const put = await this.publishRequest(what, upload.href, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(bytes) });
      await this.expectOk(what, upload.href, put, [201], 'KWP_ERR_FLEET_PUBLISH');
    }
    return { mediaType: '', digest, size: bytes.length };
  }

  private async publishRequest(what: string, url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.request(what, url, init);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLEET_PUBLISH', (err as Error).message, { cause: err });
    }
  }

  /** Pushes the module as an artifact tagged `tag`; returns the reference pinned by the manifest digest. */
  async push(registry: string, repository: string, tag: string, bytes: Uint8Array, meta: { name: string; version: string }): Promise<OciReference> {
    const what = `push of ${meta.name}@${meta.version} to ${registry}/${repository}`;
    const layer = await this.pushBlob(registry, repository, bytes, what);
    const configBytes = Buffer.from(JSON.stringify({ name: meta.name, version: meta.version, sha256: layer.digest.slice(7) }));
    const config = await this.pushBlob(registry, repository, configBytes, what);
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST_MEDIA_TYPE,
      artifactType: ARTIFACT_TYPE,
      config: { ...config, mediaType: CONFIG_MEDIA_TYPE },
      layers: [{ ...layer, mediaType: WASM_LAYER_MEDIA_TYPE, annotations: { 'org.opencontainers.image.title': `${meta.name}.wasm` } }],
      annotations: { 'org.opencontainers.image.version': meta.version, 'io.kwp.module.name': meta.name },
    }));
    const url = `${this.baseUrl(registry)}/${repository}/manifests/${encodeURIComponent(tag)}`;
    const res = await this.publishRequest(what, url, { method: 'PUT', headers: { 'content-type': MANIFEST_MEDIA_TYPE }, body: new Uint8Array(manifest) });
    await this.expectOk(what, url, res, [201], 'KWP_ERR_FLEET_PUBLISH');
    const digest = digestOf(manifest);
    const told = res.headers.get('docker-content-digest');
    if (told && told !== digest) throw new KwpError('KWP_ERR_FLEET_PUBLISH', `${what}: the registry stored the manifest as ${told}, but its bytes hash to ${digest}`);
    return { registry, repository, digest };
  }

  /**
   * Pulls the wasm layer of the artifact `ref` names and checks it is the
   * module `sha256` names: the manifest must hash to the reference's digest,
   * its wasm layer must be `sha256:<sha256>`, and the bytes must hash to it.
   */
  async pull(ref: OciReference, sha256: string, maxBytes: number, what: string): Promise<Uint8Array> {
    const base = this.baseUrl(ref.registry);
    const manifestUrl = `${base}/${ref.repository}/manifests/${ref.digest}`;
    const res = await this.request(what, manifestUrl, { headers: { accept: MANIFEST_MEDIA_TYPE } });
    await this.expectOk(what, manifestUrl, res, [200], 'KWP_ERR_FLEET_FETCH');
    const manifestBytes = new Uint8Array(await res.arrayBuffer());
    if (digestOf(manifestBytes) !== ref.digest) {
      throw new KwpError('KWP_ERR_FLEET_DIGEST_MISMATCH', `${what}: the manifest at ${manifestUrl} hashes to ${digestOf(manifestBytes)}, not to the pinned ${ref.digest}`);
    }
    let layers: Descriptor[];
    try {
      layers = (JSON.parse(Buffer.from(manifestBytes).toString('utf8')) as { layers?: Descriptor[] }).layers ?? [];
    } catch (err) {
      throw new KwpError('KWP_ERR_FLEET_FETCH', `${what}: the manifest at ${manifestUrl} is not JSON: ${(err as Error).message}`);
    }
    const layer = layers.find((l) => l.mediaType === WASM_LAYER_MEDIA_TYPE);
    if (!layer) throw new KwpError('KWP_ERR_FLEET_FETCH', `${what}: the artifact at ${manifestUrl} has no ${WASM_LAYER_MEDIA_TYPE} layer; push it with "kwp module push" to the cluster-level admin API`);
    if (layer.digest !== `sha256:${sha256}`) {
      throw new KwpError('KWP_ERR_FLEET_DIGEST_MISMATCH', `${what}: the artifact's wasm layer is ${layer.digest}, but the EvaluatorModule's sha256 is ${sha256}; the object and the registry disagree about the bytes`);
    }
    if (layer.size > maxBytes) throw new KwpError('KWP_ERR_MODULE_TOO_LARGE', `${what}: the wasm layer is ${layer.size} bytes, over the cap of ${maxBytes}`);
    const blobUrl = `${base}/${ref.repository}/blobs/${layer.digest}`;
    const blob = await this.request(what, blobUrl);
    await this.expectOk(what, blobUrl, blob, [200], 'KWP_ERR_FLEET_FETCH');
    const bytes = new Uint8Array(await blob.arrayBuffer());
    if (digestOf(bytes) !== layer.digest) {
      throw new KwpError('KWP_ERR_FLEET_DIGEST_MISMATCH', `${what}: the blob at ${blobUrl} hashes to ${digestOf(bytes)}, not to ${layer.digest}`);
    }
    return bytes;
  }
}
