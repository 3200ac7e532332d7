// The cluster-level admin API's side of a change: a validated upload becomes
// an artifact in the OCI registry (or, small and without a registry, a
// ConfigMap) plus an EvaluatorModule naming it by digest; a pipeline change
// becomes the Pipeline object. Nodes take it from there.
import type { KubeConfig } from '@kubernetes/client-node';
import { KwpError } from '../errors.js';
import type { KubeObject } from '../contract.js';
import type { StoredModule, UploadRequest } from '../control/module-store.js';
import type { StageSpec } from '../pipeline/spec.js';
import { requestJson } from '../sources/kubernetes/request.js';
import type { LabelSelector } from './node-selector.js';
import { compareVersions } from '../control/versions.js';
import {
  EVALUATOR_MODULE, FLEET_API_VERSION, PIPELINE, ROLLBACK_ANNOTATION, evaluatorModuleObject, fleetPath, formatOciReference, formatRollout, parseEvaluatorModule,
  type EvaluatorModuleObject, type EvaluatorModuleSpec, type ModuleSource, type RolloutStrategy,
} from './objects.js';
import type { OciClient } from './oci.js';

export interface FleetPublisherOptions {
  kubeConfig: KubeConfig;
  oci: OciClient;
  /** `HOST[:PORT]/PREFIX`: modules go to PREFIX/NAME, tagged with their version. Without it, modules go to ConfigMaps. */
  registry?: string;
  /** Where module ConfigMaps are written (the agents' RBAC lets them read ConfigMaps there). */
  namespace: string;
  /** ConfigMaps hold at most 1 MiB; larger modules need a registry. Default 768 KiB. */
  configMapMaxBytes?: number;
  /** The Pipeline object this API writes. */
  pipelineName: string;
}

export interface PipelineExtras {
  target?: LabelSelector;
  rollout?: RolloutStrategy;
}

function publishError(what: string, err: unknown): KwpError {
  if (err instanceof KwpError) return err;
  return new KwpError('KWP_ERR_FLEET_PUBLISH', `${what}: ${(err as Error).message}; the nodes were not changed`, { cause: err });
}

export class FleetPublisher {
  constructor(private readonly options: FleetPublisherOptions) {}

  get pipelineName(): string { return this.options.pipelineName; }

  /** Parses `--registry HOST[:PORT]/PREFIX`. */
  static parseRegistry(value: string): { host: string; prefix: string } {
    const m = /^([a-zA-Z0-9.-]+(?::\d{1,5})?)\/([a-z0-9]+(?:[._/-][a-z0-9]+)*)$/.exec(value);
    if (!m) throw new KwpError('KWP_ERR_USAGE', `kwp agent: --registry must be HOST[:PORT]/REPOSITORY-PREFIX (e.g. registry.example.com/kwp), got "${value}"`);
    return { host: m[1], prefix: m[2] };
  }

  async publishModule(bytes: Uint8Array, request: UploadRequest, stored: StoredModule): Promise<KubeObject> {
    const what = `publishing ${stored.name}@${stored.version}`;
    let source: ModuleSource;
    if (this.options.registry) {
      const { host, prefix } = FleetPublisher.parseRegistry(this.options.registry);
      const tag = stored.version.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128);
      const ref = await this.options.oci.push(host, `${prefix}/${stored.name}`, tag, bytes, { name: stored.name, version: stored.version });
      source = { oci: formatOciReference(ref) };
    } else {
      const max = this.options.configMapMaxBytes ?? 768 * 1024;
      if (bytes.length > max) throw new KwpError('KWP_ERR_FLEET_PUBLISH', `${what}: ${bytes.length} bytes is too large for a ConfigMap (at most ${max}); start the cluster-level agent with --registry`);
      const name = `kwp-module-${stored.name}-${stored.version.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 253).replace(/-+$/, '');
      const configMap = {
        apiVersion: 'v1', kind: 'ConfigMap',
        metadata: { name, namespace: this.options.namespace, labels: { 'app.kubernetes.io/part-of': 'kube-wasm-policies', 'kwp.io/module': stored.name } },
        binaryData: { 'module.wasm': Buffer.from(bytes).toString('base64') },
      } as unknown as KubeObject;
      await this.upsert(`/api/v1/namespaces/${encodeURIComponent(this.options.namespace)}/configmaps`, configMap, what);
      source = { configMap: { namespace: this.options.namespace, name, key: 'module.wasm' } };
    }
    const spec: EvaluatorModuleSpec = { name: stored.name, version: stored.version, sha256: stored.sha256, source };
    if (request.signature) spec.signature = request.signature;
    if (request.selfTestConfig) spec.selfTestConfig = request.selfTestConfig;
    return this.upsert(fleetPath(EVALUATOR_MODULE), evaluatorModuleObject(spec), what);
  }

  /** The Pipeline object now, or undefined when there is none. */
  async currentPipeline(): Promise<KubeObject | undefined> {
    try {
      return await requestJson(this.options.kubeConfig, 'GET', fleetPath(PIPELINE, this.options.pipelineName), { timeoutMs: 15_000 });
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw publishError(`reading Pipeline ${this.options.pipelineName}`, err);
    }
  }

  /**
   * Writes the Pipeline's stages (and target and rollout, which a pipeline
   * file may carry). `rollbackOf` marks a generation written to undo another:
   * it goes to every node at once. Without `extras`, the object's own target
   * and rollout stay.
   */
  async publishPipeline(stages: StageSpec[], extras: PipelineExtras | undefined, rollbackOf?: number): Promise<KubeObject> {
    const what = `writing Pipeline ${this.options.pipelineName}`;
    const current = await this.currentPipeline();
    const annotations = { ...(current?.metadata.annotations ?? {}) };
    if (rollbackOf !== undefined) annotations[ROLLBACK_ANNOTATION] = String(rollbackOf);
    else delete annotations[ROLLBACK_ANNOTATION];
    const previous = current as (KubeObject & { target?: unknown; rollout?: unknown }) | undefined;
    const target = extras ? (extras.target ? { nodeSelector: extras.target } : undefined) : previous?.target;
    const rollout = extras ? (extras.rollout ? formatRollout(extras.rollout) : undefined) : previous?.rollout;
    const object = {
      apiVersion: FLEET_API_VERSION, kind: PIPELINE.kindName,
      metadata: { name: this.options.pipelineName, ...(Object.keys(annotations).length ? { annotations } : {}), ...(current ? { resourceVersion: current.metadata.resourceVersion } : {}) },
      stages,
      ...(target !== undefined ? { target } : {}),
      ...(rollout !== undefined ? { rollout } : {}),
    } as unknown as KubeObject;
    try {
      return current
        ? await requestJson(this.options.kubeConfig, 'PUT', fleetPath(PIPELINE, this.options.pipelineName), { body: object, timeoutMs: 15_000 })
        : await requestJson(this.options.kubeConfig, 'POST', fleetPath(PIPELINE), { body: object, timeoutMs: 15_000 });
    } catch (err) {
      throw publishError(what, err);
    }
  }

  /** The EvaluatorModule objects of module `name` (every version), newest first; invalid objects are skipped. */
  async modulesNamed(name: string): Promise<EvaluatorModuleObject[]> {
    const items = await this.list(fleetPath(EVALUATOR_MODULE), `listing EvaluatorModules`);
    const out: EvaluatorModuleObject[] = [];
    for (const o of items) {
      try {
        const m = parseEvaluatorModule(o);
        if (m.spec.name === name) out.push(m);
      } catch {
        // not one this API could withdraw by name; nodes report it where a stage names it
      }
    }
    return out.sort((a, b) => compareVersions(b.spec.version, a.spec.version));
  }

  /**
   * Stages of the cluster's Pipelines that would run one of `versions` of
   * module `name`: a stage naming `name@VERSION` exactly, or naming `name`
   * alone while the newest version would go. The stable stages count too:
   * an automatic rollback writes them back.
   */
  async stagesUsing(name: string, versions: string[], newest: string | undefined): Promise<string[]> {
    const users: string[] = [];
    for (const o of await this.list(fleetPath(PIPELINE), 'listing Pipelines')) {
      const p = o as KubeObject & { stages?: StageSpec[]; status?: { stable?: { generation?: number; stages?: StageSpec[] } } };
      const check = (stages: StageSpec[] | undefined, what: string) => {
        for (const st of Array.isArray(stages) ? stages : []) {
          if (typeof st?.module !== 'string') continue;
          const [n, v] = st.module.split('@');
          if (n === name && (v === undefined ? newest !== undefined && versions.includes(newest) : versions.includes(v))) users.push(`stage ${st.name} (${st.module}) of ${what}`);
        }
      };
      check(p.stages, `Pipeline ${o.metadata.name}`);
      check(p.status?.stable?.stages, `the stable stages of Pipeline ${o.metadata.name} (generation ${p.status?.stable?.generation}, what an automatic rollback writes back)`);
    }
    return users;
  }

  /** Deletes the EvaluatorModule object, and the ConfigMap this API wrote its bytes to; registry artifacts stay. */
  async withdrawModule(m: EvaluatorModuleObject): Promise<void> {
    const what = `deleting EvaluatorModule ${m.objectName}`;
    const gone = async (path: string) => {
      try {
        await requestJson(this.options.kubeConfig, 'DELETE', path, { timeoutMs: 15_000 });
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404) throw publishError(what, err);
      }
    };
    await gone(fleetPath(EVALUATOR_MODULE, m.objectName));
    const source = m.spec.source;
    if ('configMap' in source && source.configMap.namespace === this.options.namespace && source.configMap.name.startsWith('kwp-module-')) {
      await gone(`/api/v1/namespaces/${encodeURIComponent(source.configMap.namespace)}/configmaps/${encodeURIComponent(source.configMap.name)}`);
    }
  }

  private async list(path: string, what: string): Promise<KubeObject[]> {
    try {
      return ((await requestJson(this.options.kubeConfig, 'GET', path, { timeoutMs: 15_000 })).items ?? []) as KubeObject[];
    } catch (err) {
      throw publishError(what, err);
    }
  }

  /** Creates, or replaces at the current resourceVersion. */
  private async upsert(collection: string, object: KubeObject, what: string): Promise<KubeObject> {
    const kc = this.options.kubeConfig;
    const path = `${collection}/${encodeURIComponent(object.metadata.name)}`;
    try {
      let current: KubeObject | undefined;
      try {
        current = await requestJson(kc, 'GET', path, { timeoutMs: 15_000 });
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404) throw err;
      }
      if (!current) return await requestJson(kc, 'POST', collection, { body: object, timeoutMs: 15_000 });
      return await requestJson(kc, 'PUT', path, { body: { ...object, metadata: { ...object.metadata, resourceVersion: current.metadata.resourceVersion } }, timeoutMs: 15_000 });
    } catch (err) {
      throw publishError(what, err);
    }
  }
}
