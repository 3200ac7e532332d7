// Gets an EvaluatorModule's bytes into the node's module store: from the
// store itself when it already holds them (the on-disk cache by digest), else
// from the OCI registry or the ConfigMap/Secret the object names. The bytes
// must hash to the object's sha256, then they go through ModuleStore.add: the
// same chain as an upload (size cap, signature against the trusted keys, ABI
// and sandbox checks, self-test on the worker).
import type { KubeConfig } from '@kubernetes/client-node';
import { KwpError, isKwpError } from '../errors.js';
import type { ModuleStore } from '../control/module-store.js';
import type { KeyObject } from 'node:crypto';
import { sha256Hex, verifyModuleSignature } from '../control/signature.js';
import { getJson } from '../sources/kubernetes/request.js';
import { parseOciReference, type EvaluatorModuleObject, type KeyReference } from './objects.js';
import type { OciClient } from './oci.js';
import type { FleetMetrics } from './metrics.js';

export interface ModuleFetcherOptions {
  store: ModuleStore;
  oci: OciClient;
  /** For ConfigMap and Secret sources. */
  kubeConfig?: KubeConfig;
  metrics?: FleetMetrics;
  /** The agent's trusted keys (--trusted-key): an object's signature is checked even when its bytes are already stored. */
  trustedKeys?: readonly KeyObject[];
}


export class ModuleFetcher {
  constructor(private readonly options: ModuleFetcherOptions) {}

  /** True when the store holds these exact bytes under this name and version. */
  has(m: EvaluatorModuleObject): boolean {
    return this.options.store.list().some((s) => s.sha256 === m.spec.sha256 && s.name === m.spec.name && s.version === m.spec.version);
  }

  /** Makes sure the module is stored and validated; throws a KwpError naming the object otherwise. */
  async ensure(m: EvaluatorModuleObject): Promise<'cached' | 'fetched'> {
    const metrics = this.options.metrics;
    const where = `EvaluatorModule ${m.objectName} (${m.spec.name}@${m.spec.version})`;
    this.checkSignature(m, where);
    if (this.has(m)) {
      metrics?.fetches.inc({ source: 'cache', outcome: 'cached' });
      return 'cached';
    }
    const source = 'oci' in m.spec.source ? 'oci' : 'configMap' in m.spec.source ? 'configmap' : 'secret';
    try {
      const bytes = await this.fetch(m, where);
      const actual = sha256Hex(bytes);
      if (actual !== m.spec.sha256) {
        throw new KwpError('KWP_ERR_FLEET_DIGEST_MISMATCH', `${where}: the bytes from its ${source} source hash to ${actual}, not to spec.sha256 ${m.spec.sha256}`);
      }
      await this.options.store.add(bytes, { name: m.spec.name, version: m.spec.version, signature: m.spec.signature, selfTestConfig: m.spec.selfTestConfig });
      metrics?.fetches.inc({ source, outcome: 'fetched' });
      return 'fetched';
    } catch (err) {
      const code = isKwpError(err) ? err.code : 'KWP_ERR_INTERNAL';
      metrics?.fetches.inc({ source, outcome: code });
      if (code !== 'KWP_ERR_FLEET_FETCH') metrics?.verificationFailures.inc({ code });
      if (isKwpError(err) && !err.message.includes(m.objectName)) throw new KwpError(err.code, `${where}: ${err.message}`, { cause: err });
      throw err;
    }
  }

  /**
   * Bytes stored earlier under a valid signature are not proof that this
   * object is signed: with trusted keys, every object must carry a signature
   * one of them verifies, as an upload must.
   */
  private checkSignature(m: EvaluatorModuleObject, where: string): void {
    const keys = this.options.trustedKeys ?? [];
    if (keys.length === 0) return;
    const fail = (code: 'KWP_ERR_SIGNATURE_REQUIRED' | 'KWP_ERR_SIGNATURE_INVALID', message: string): never => {
      this.options.metrics?.verificationFailures.inc({ code });
      throw new KwpError(code, `${where}: ${message}`);
    };
    if (!m.spec.signature) fail('KWP_ERR_SIGNATURE_REQUIRED', 'this agent accepts only signed modules and spec.signature is empty; push the module with "kwp module push --sign-key"');
    if (verifyModuleSignature(keys, m.spec.sha256, m.spec.name, m.spec.version, m.spec.signature!) < 0) {
      fail('KWP_ERR_SIGNATURE_INVALID', `spec.signature does not verify with any trusted key for sha256 ${m.spec.sha256} under name "${m.spec.name}" and version "${m.spec.version}"`);
    }
  }

  private async fetch(m: EvaluatorModuleObject, where: string): Promise<Uint8Array> {
    const s = m.spec.source;
    if ('oci' in s) return this.options.oci.pull(parseOciReference(s.oci, `${where}: spec.source.oci`), m.spec.sha256, this.options.store.maxModuleBytes, where);
    return 'configMap' in s ? this.fromKey('configmaps', s.configMap, where) : this.fromKey('secrets', s.secret, where);
  }

  /** A ConfigMap's binaryData (or a Secret's data) key, base64 as the API serves it. */
  private async fromKey(plural: 'configmaps' | 'secrets', ref: KeyReference, where: string): Promise<Uint8Array> {
    const kc = this.options.kubeConfig;
    const what = `${plural === 'configmaps' ? 'ConfigMap' : 'Secret'} ${ref.namespace}/${ref.name}`;
    if (!kc) throw new KwpError('KWP_ERR_FLEET_FETCH', `${where}: reading ${what} needs the API server (--kubeconfig)`);
    let object: { binaryData?: Record<string, string>; data?: Record<string, string> };
    try {
      object = await getJson(kc, `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/${plural}/${encodeURIComponent(ref.name)}`, undefined, 30_000);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLEET_FETCH', `${where}: cannot read ${what}: ${(err as Error).message}`, { cause: err });
    }
    const encoded = plural === 'configmaps' ? object.binaryData?.[ref.key] : object.data?.[ref.key];
    if (typeof encoded !== 'string') {
      throw new KwpError('KWP_ERR_FLEET_FETCH', `${where}: ${what} has no ${plural === 'configmaps' ? 'binaryData' : 'data'} key "${ref.key}"`);
    }
    return new Uint8Array(Buffer.from(encoded, 'base64'));
  }
}

