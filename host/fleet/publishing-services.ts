// The module store and pipeline controller of the cluster-level admin API
// (`kwp agent --fleet`): the same services, so the same routes and CLI work
// unchanged, with one step added after each change succeeded locally. An
// upload is validated here by the full chain first, then published; a
// pipeline is built here against the cluster's state first (so a bad stage
// is refused before any node sees it), then written to the Pipeline object.
import { KwpError } from '../errors.js';
import { ModuleStore, type ModuleStoreOptions, type StoredModule, type UploadRequest, type UploadResult } from '../control/module-store.js';
import { PipelineController, type PipelineControllerOptions, type PipelineView } from '../control/pipeline-controller.js';
import { parseRollout, parseTarget } from './objects.js';
import type { FleetPublisher, PipelineExtras } from './publisher.js';

export class PublishingModuleStore extends ModuleStore {
  constructor(options: ModuleStoreOptions, private readonly publisher: FleetPublisher) {
    super(options);
  }

  /**
   * DELETE /v1/modules at fleet scale: refused while a Pipeline object names
   * the module (nodes would lose what their next generation or a rollback
   * needs); otherwise removed here (with the store's own checks) and its
   * EvaluatorModule objects deleted. Nodes keep the bytes they cached.
   */
  override async withdraw(name: string, version?: string): Promise<Array<Pick<StoredModule, 'name' | 'version' | 'sha256'>>> {
    const objects = await this.publisher.modulesNamed(name);
    const targets = objects.filter((m) => version === undefined || m.spec.version === version);
    const local = this.list().filter((m) => m.name === name && (version === undefined || m.version === version));
    if (!targets.length) return super.withdraw(name, version); // nothing in the cluster: the store's answer (removed, or not found)
    const users = await this.publisher.stagesUsing(name, targets.map((m) => m.spec.version), objects[0]?.spec.version);
    if (users.length) {
      throw new KwpError('KWP_ERR_MODULE_IN_USE', `module ${version === undefined ? name : `${name}@${version}`} is named by ${users.join('; ')}; set a pipeline without it (and let that rollout complete) before deleting it`);
    }
    const removed = local.length ? await super.withdraw(name, version) : [];
    for (const m of targets) await this.publisher.withdrawModule(m);
    const out = new Map(removed.map((m) => [m.sha256, m]));
    for (const m of targets) if (!out.has(m.spec.sha256)) out.set(m.spec.sha256, { name: m.spec.name, version: m.spec.version, sha256: m.spec.sha256 });
    return [...out.values()];
  }

  /** Also when the bytes were already stored: publishing again repairs an object someone deleted. */
  override async add(bytes: Uint8Array, request: UploadRequest): Promise<UploadResult> {
    const result = await super.add(bytes, request);
    await this.publisher.publishModule(bytes, request, result.module);
    return result;
  }
}

/** `target` and `rollout` of a PUT body (a pipeline file may carry both); undefined when it has neither. */
function extrasOf(value: unknown, where: string): PipelineExtras | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (v.target === undefined && v.rollout === undefined) return { };
  return { target: parseTarget(v.target, `${where}: target`), rollout: parseRollout(v.rollout, `${where}: rollout`) };
}

export class PublishingPipelineController extends PipelineController {
  constructor(options: PipelineControllerOptions, private readonly publisher: FleetPublisher) {
    super(options);
  }

  override async set(value: unknown, ifMatch?: number, where = 'pipeline'): Promise<PipelineView> {
    const extras = extrasOf(value, where);
    const view = await super.set(value, ifMatch, where);
    await this.publishOrUndo(() => this.publisher.publishPipeline(view.stages, extras));
    return view;
  }

  override async rollback(ifMatch?: number, reason?: string): Promise<PipelineView> {
    const generation = Number((await this.publisher.currentPipeline())?.metadata.generation ?? 0);
    const view = await super.rollback(ifMatch, reason);
    await this.publishOrUndo(() => this.publisher.publishPipeline(view.stages, undefined, generation || undefined));
    return view;
  }

  /**
   * Runs what the Pipeline object already says (this agent follows it, like a
   * node): built and swapped here, not written back. Writing it back would
   * replace the object with one that lacks its target, rollout and rollback
   * mark, as a new generation, each time this agent follows a change that did
   * not come through its own API (an automatic rollback, kubectl apply).
   */
  async applyFromCluster(spec: unknown, where: string): Promise<PipelineView> {
    return super.set(spec, undefined, where);
  }

  /** A change the cluster did not take is undone here too, so this API never shows what the nodes were not told. */
  private async publishOrUndo(publish: () => Promise<unknown>): Promise<void> {
    try {
      await publish();
    } catch (err) {
      await super.rollback(undefined, `the Pipeline object could not be written: ${(err as Error).message}`).catch(() => undefined);
      throw err instanceof KwpError ? err : new KwpError('KWP_ERR_FLEET_PUBLISH', (err as Error).message, { cause: err });
    }
  }
}
