// Uploaded evaluators, stored content-addressed: `<stateDir>/modules/<sha256>.wasm`
// plus `index.json` (name, version, upload time, signer). The index is only a
// catalogue of what the files already say, so a lost or corrupt index is
// rebuilt from the files' own kwp.meta. Every upload passes the same gates in
// the same order (docs/admin-api.md, "Upload validation"), and nothing is
// written until all of them passed.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyObject } from 'node:crypto';
import { KwpError } from '../errors.js';
import type { FailurePolicy } from '../contract.js';
import { compileEvaluator, type CompiledEvaluator } from '../runtime/loader.js';
import { resolveLimits, type SandboxLimits } from '../runtime/limits.js';
import type { ModuleResolver } from '../pipeline/modules.js';
import { writeFileAtomic } from './atomic-file.js';
import { keyFingerprint, sha256Hex, verifyModuleSignature } from './signature.js';
import { InlineValidator, ProcessValidator, type UploadValidator } from './upload-validator.js';
import { compareVersions } from './versions.js';
import type { HostLogger } from '../logger.js';

export interface StoredModule {
  name: string;
  version: string;
  sha256: string;
  size: number;
  /** `major.minor` of the ABI the module speaks. */
  abi: string;
  kinds: string[];
  failurePolicy: FailurePolicy;
  description?: string;
  uploadedAt: string;
  /** Fingerprint of the trusted key that verified the upload, when one did. */
  signedBy?: string;
}

export interface ModuleInfo extends StoredModule {
  /** Stages of the active pipeline running exactly these bytes. */
  usedBy: string[];
}

export interface UploadRequest {
  name: string;
  version: string;
  /** base64 ed25519 signature over the signed message (signature.ts). */
  signature?: string;
  /** The configuration the self-test runs with; `{}` by default. Modules that need a config (e.g. a tier) refuse `{}`. */
  selfTestConfig?: Record<string, unknown>;
}

export interface UploadResult {
  module: ModuleInfo;
  /** False when the same bytes were already stored under this name and version. */
  created: boolean;
}

/** Upload outcomes, for metrics: `stored`, `unchanged`, or the error code. */
export type UploadOutcome = 'stored' | 'unchanged' | string;

export interface ModuleStoreOptions {
  /** The agent's state directory; modules go to `<stateDir>/modules`. */
  stateDir: string;
  limits?: Partial<SandboxLimits>;
  /** When non-empty, every upload must carry a signature one of these ed25519 keys verifies. */
  trustedKeys?: KeyObject[];
  /** Overrides the limits' selfTestTimeoutMs. */
  selfTestTimeoutMs?: number;
  /**
   * Where uploads are instrumented and self-tested: off the main thread in a
   * child process with a heap limit of its own (`worker`, the default), so
   * the packet path keeps running and no upload can abort the agent, or
   * inline on the caller's thread.
   */
  validation?: 'worker' | 'inline';
  logger?: HostLogger;
  now?: () => Date;
  /**
   * Names no upload may take: the built-in modules'. A stage names its module
   * by name, and the store is asked first, so an upload called like a
   * built-in would otherwise replace it at the next pipeline change.
   */
  reservedNames?: readonly string[];
}

/** Which module bytes the pipelines run, stage by stage; `building` marks a stage of a pipeline not activated yet, `rollback` one of the pipeline kept for rollback. */
export type ModuleUsage = () => Array<{ stage: string; sha256: string; building?: boolean; rollback?: boolean }>;

const INDEX_VERSION = 1;

export class ModuleStore implements ModuleResolver {
  readonly dir: string;
  /**
   * Instrumented forms of the stored modules (named by sha256, start fuel and
   * instrumentation version, so an upgraded host never reads an older
   * rewrite). Without it every restart instruments every stored module again,
   * loading binaryen on a helper thread whose memory stays in the agent's RSS.
   */
  readonly instrumentationCache: string;
  private readonly indexFile: string;
  private readonly limits: SandboxLimits;
  private readonly trustedKeys: readonly KeyObject[];
  private readonly selfTestTimeoutMs: number;
  private readonly logger?: HostLogger;
  private readonly now: () => Date;
  private readonly reservedNames: ReadonlySet<string>;
  /** By sha256. */
  private readonly entries = new Map<string, StoredModule>();
  private readonly compiled = new Map<string, CompiledEvaluator>();
  /** Who runs the stored modules (PipelineController.moduleUsage, registered by the controller itself). */
  private readonly usages = new Set<ModuleUsage>();
  private readonly validator: UploadValidator;
  readonly uploadOutcomes = new Map<UploadOutcome, number>();

  constructor(options: ModuleStoreOptions) {
    this.dir = join(options.stateDir, 'modules');
    this.indexFile = join(this.dir, 'index.json');
    this.instrumentationCache = join(this.dir, '.instrumented');
    this.limits = resolveLimits(options.limits);
    this.trustedKeys = options.trustedKeys ?? [];
    this.selfTestTimeoutMs = options.selfTestTimeoutMs ?? this.limits.selfTestTimeoutMs;
    this.logger = options.logger;
    this.now = options.now ?? (() => new Date());
    this.reservedNames = new Set(options.reservedNames ?? []);
    this.validator = options.validation === 'inline' ? new InlineValidator() : new ProcessValidator(undefined, this.limits.validationHeapMiB);
    mkdirSync(this.dir, { recursive: true });
    this.loadIndex();
  }

  /** The size cap uploads are held to; the admin API sets its body limit from it. */
  get maxModuleBytes(): number { return this.limits.maxModuleBytes; }
  get requiresSignature(): boolean { return this.trustedKeys.length > 0; }

  /**
   * Tells the store which module bytes someone runs (a PipelineController
   * registers its moduleUsage when given this store); returns the function
   * that takes it back. Removal is refused while any of them runs a module.
   */
  registerUsage(usage: ModuleUsage): () => void {
    this.usages.add(usage);
    return () => { this.usages.delete(usage); };
  }

  private usage(): ReturnType<ModuleUsage> {
    return [...this.usages].flatMap((u) => u());
  }

  // ---- persistence ----

  private loadIndex(): void {
    if (!existsSync(this.indexFile)) {
      if (this.wasmFiles().length) this.rebuildIndex('index.json is missing');
      return;
    }
    let doc: any;
    try {
      doc = JSON.parse(readFileSync(this.indexFile, 'utf8'));
      if (doc?.version !== INDEX_VERSION || !Array.isArray(doc.modules)) throw new Error(`expected {"version": ${INDEX_VERSION}, "modules": [...]}`);
    } catch (err) {
      const kept = `${this.indexFile}.corrupt-${this.now().getTime()}`;
      renameSync(this.indexFile, kept);
      const e = new KwpError('KWP_ERR_STATE_CORRUPT', `${this.indexFile}: ${(err as Error).message}; kept it as ${kept} and rebuilt the index from the stored modules`);
      this.logger?.error({ code: e.code, file: this.indexFile }, e.message);
      this.rebuildIndex('index.json was corrupt');
      return;
    }
    for (const m of doc.modules as StoredModule[]) {
      if (typeof m?.sha256 === 'string' && existsSync(this.fileOf(m.sha256))) this.entries.set(m.sha256, m);
      else this.logger?.warn({}, `${this.indexFile}: ${m?.name}@${m?.version} has no module file; dropped from the index`);
    }
  }

  private wasmFiles(): string[] {
    return readdirSync(this.dir).filter((f) => /^[0-9a-f]{64}\.wasm$/.test(f));
  }

  private rebuildIndex(why: string): void {
    for (const file of this.wasmFiles()) {
      const path = join(this.dir, file);
      try {
        const bytes = readFileSync(path);
        const sha = sha256Hex(bytes);
        if (`${sha}.wasm` !== file) throw new Error(`its content hashes to ${sha}`);
        const c = compileEvaluator(bytes, { source: path, limits: this.limits, instrumentationCache: this.instrumentationCache });
        this.entries.set(sha, this.describe(c, undefined));
        this.compiled.set(sha, c);
      } catch (err) {
        this.logger?.error({ file: path }, `${path}: skipped while rebuilding the module index (${why}): ${(err as Error).message}`);
      }
    }
    this.saveIndex();
  }

  private saveIndex(): void {
    const modules = [...this.entries.values()].sort(byNameThenVersion);
    writeFileAtomic(this.indexFile, JSON.stringify({ version: INDEX_VERSION, modules }, null, 2) + '\n');
  }

  /** Every cached rewrite of one module (any start fuel or instrumentation version). */
  private forgetInstrumentation(sha256: string): void {
    let names: string[];
    try {
      names = readdirSync(this.instrumentationCache);
    } catch {
      return; // nothing was ever cached
    }
    for (const f of names) if (f.startsWith(`${sha256}-`)) rmSync(join(this.instrumentationCache, f), { force: true });
  }

  private fileOf(sha256: string): string {
    return join(this.dir, `${sha256}.wasm`);
  }

  private describe(c: CompiledEvaluator, signedBy: string | undefined): StoredModule {
    const m: StoredModule = {
      name: c.meta.name,
      version: c.meta.version,
      sha256: c.sha256,
      size: c.size,
      abi: `${c.meta.abi.major}.${c.meta.abi.minor}`,
      kinds: [...c.meta.kinds],
      failurePolicy: c.meta.failurePolicy,
      uploadedAt: this.now().toISOString(),
    };
    if (c.meta.description) m.description = c.meta.description;
    if (signedBy) m.signedBy = signedBy;
    return m;
  }

  private info(m: StoredModule): ModuleInfo {
    const usedBy = this.usage().filter((u) => u.sha256 === m.sha256 && !u.building && !u.rollback).map((u) => u.stage);
    return { ...m, usedBy };
  }

  // ---- uploads ----

  /**
   * Validates and stores an upload. Order: size cap, signature, (already
   * stored? conflicting?), the loader's static checks, name and version
   * against kwp.meta, instantiation, configuration (`{}` unless given), a
   * self-test decision under a deadline. Everything from the static checks
   * on runs off the main thread unless `validation: 'inline'`.
   */
  async add(bytes: Uint8Array, request: UploadRequest): Promise<UploadResult> {
    try {
      const result = await this.validateAndStore(bytes, request);
      this.count(result.created ? 'stored' : 'unchanged');
      return result;
    } catch (err) {
      this.count(err instanceof KwpError ? err.code : 'KWP_ERR_INTERNAL');
      throw err;
    }
  }

  /** Stops the validation worker. */
  async close(): Promise<void> {
    await this.validator.close();
  }

  private count(outcome: UploadOutcome): void {
    this.uploadOutcomes.set(outcome, (this.uploadOutcomes.get(outcome) ?? 0) + 1);
  }

  /** Same bytes under the same name: nothing to do. Other bytes under that name and version: a conflict. */
  private alreadyStored(sha256: string, name: string, version: string, source: string): StoredModule | undefined {
    const existing = this.entries.get(sha256);
    if (existing) {
      if (existing.name !== name || existing.version !== version) {
        throw new KwpError('KWP_ERR_NAME_MISMATCH', `${source}: these bytes are stored as ${existing.name}@${existing.version} (their kwp.meta); upload them under that name and version`);
      }
      return existing;
    }
    const clash = [...this.entries.values()].find((m) => m.name === name && m.version === version);
    if (clash) {
      throw new KwpError('KWP_ERR_MODULE_CONFLICT', `${source}: ${name}@${version} is already stored with different bytes (sha256 ${clash.sha256.slice(0, 12)}…); bump the version, or remove the stored one first`);
    }
    return undefined;
  }

  private async validateAndStore(bytes: Uint8Array, request: UploadRequest): Promise<UploadResult> {
    const { name, version } = request;
    const source = `upload ${name}@${version}`;
    if (bytes.length > this.limits.maxModuleBytes) {
      throw new KwpError('KWP_ERR_MODULE_TOO_LARGE', `${source}: the module is ${bytes.length} bytes, over the cap of ${this.limits.maxModuleBytes} bytes; shrink it (asc -Oz) or raise the cap`);
    }
    if (this.reservedNames.has(name)) {
      throw new KwpError('KWP_ERR_MODULE_NAME_RESERVED', `${source}: "${name}" is the name of a built-in module, which stages name without a version; give your module a name of its own (module.json "name") and rebuild`);
    }
    const sha256 = sha256Hex(bytes);
    const signedBy = this.checkSignature(sha256, request, source);
    const stored = this.alreadyStored(sha256, name, version, source);
    if (stored) return { module: this.info(stored), created: false };

    const compiled = await this.validator.validate({
      bytes, name, version, limits: this.limits, instrumentationCache: this.instrumentationCache,
      selfTestConfig: request.selfTestConfig ?? {}, selfTestTimeoutMs: this.selfTestTimeoutMs,
    });
    // Another upload may have stored these bytes, or others under this name, while this one was validated.
    const raced = this.alreadyStored(sha256, name, version, source);
    if (raced) return { module: this.info(raced), created: false };

    writeFileAtomic(this.fileOf(sha256), bytes);
    const entry = this.describe(compiled, signedBy);
    this.entries.set(sha256, entry);
    this.compiled.set(sha256, compiled);
    this.saveIndex();
    this.logger?.info({}, `stored module ${name}@${version} (sha256 ${sha256}, ${bytes.length} bytes${signedBy ? `, signed by key ${signedBy}` : ''})`);
    return { module: this.info(entry), created: true };
  }

  private checkSignature(sha256: string, request: UploadRequest, source: string): string | undefined {
    if (this.trustedKeys.length === 0) return undefined;
    if (!request.signature) {
      throw new KwpError('KWP_ERR_SIGNATURE_REQUIRED', `${source}: this agent accepts only signed modules; push with "kwp module push --sign-key KEY" or "--signature FILE" (from "kwp sign --out FILE"), or send the signature in X-KWP-Signature`);
    }
    const index = verifyModuleSignature(this.trustedKeys, sha256, request.name, request.version, request.signature);
    if (index < 0) {
      throw new KwpError('KWP_ERR_SIGNATURE_INVALID', `${source}: the signature does not verify with any trusted key for these bytes (sha256 ${sha256}) under name "${request.name}" and version "${request.version}"; a signature is valid only for the exact bytes, name and version it was made for`);
    }
    return keyFingerprint(this.trustedKeys[index]);
  }

  // ---- queries ----

  list(): ModuleInfo[] {
    return [...this.entries.values()].sort(byNameThenVersion).map((m) => this.info(m));
  }

  /** Every stored version of `name`, newest first. */
  get(name: string): ModuleInfo[] {
    const versions = this.versionsOf(name).map((m) => this.info(m));
    if (!versions.length) throw notStored(name);
    return versions;
  }

  private versionsOf(name: string): StoredModule[] {
    return [...this.entries.values()].filter((m) => m.name === name).sort((a, b) => compareVersions(b.version, a.version));
  }

  /** Removes one version, or every version of `name`; refused while the active pipeline, the one kept for rollback, or one being built, runs any of them. */
  remove(name: string, version?: string): StoredModule[] {
    const targets = this.versionsOf(name).filter((m) => version === undefined || m.version === version);
    if (!targets.length) throw notStored(version === undefined ? name : `${name}@${version}`);
    const used = this.usage();
    for (const m of targets) {
      const stages = used.filter((u) => u.sha256 === m.sha256 && !u.building && !u.rollback).map((u) => u.stage);
      if (stages.length) {
        throw new KwpError('KWP_ERR_MODULE_IN_USE', `module ${m.name}@${m.version} is used by stage(s) ${stages.join(', ')} of the active pipeline; set a pipeline without it first`);
      }
      const rollback = used.filter((u) => u.sha256 === m.sha256 && u.rollback).map((u) => u.stage);
      if (rollback.length) {
        throw new KwpError('KWP_ERR_MODULE_IN_USE', `module ${m.name}@${m.version} is used by stage(s) ${rollback.join(', ')} of the pipeline kept for rollback, which a restart or a rollback would run again; set pipelines without it until it is no longer the rollback target`);
      }
      const building = used.filter((u) => u.sha256 === m.sha256 && u.building).map((u) => u.stage);
      if (building.length) {
        throw new KwpError('KWP_ERR_MODULE_IN_USE', `module ${m.name}@${m.version} is used by stage(s) ${building.join(', ')} of the pipeline being built; retry once that change is done`);
      }
    }
    for (const m of targets) {
      this.entries.delete(m.sha256);
      this.compiled.delete(m.sha256);
    }
    this.saveIndex();
    for (const m of targets) {
      rmSync(this.fileOf(m.sha256), { force: true });
      this.forgetInstrumentation(m.sha256);
    }
    this.logger?.info({}, `removed module ${targets.map((m) => `${m.name}@${m.version}`).join(', ')}`);
    return targets;
  }

  /**
   * What DELETE /v1/modules does: remove() from this store. The cluster-level
   * admin API's store also withdraws the module from the cluster.
   */
  async withdraw(name: string, version?: string): Promise<Array<Pick<StoredModule, 'name' | 'version' | 'sha256'>>> {
    return this.remove(name, version);
  }

  /** `name` is the newest stored version, `name@version` an exact one. */
  resolve(ref: string): CompiledEvaluator | undefined {
    const at = ref.indexOf('@');
    const name = at < 0 ? ref : ref.slice(0, at);
    const version = at < 0 ? undefined : ref.slice(at + 1);
    const entry = version === undefined ? this.versionsOf(name)[0] : this.versionsOf(name).find((m) => m.version === version);
    if (!entry) return undefined;
    let c = this.compiled.get(entry.sha256);
    if (!c) {
      const file = this.fileOf(entry.sha256);
      let bytes: Buffer;
      try {
        bytes = readFileSync(file);
      } catch (err) {
        throw new KwpError('KWP_ERR_STATE_CORRUPT', `${file}: module ${entry.name}@${entry.version} is in the index but its file cannot be read: ${(err as Error).message}; push it again`);
      }
      if (sha256Hex(bytes) !== entry.sha256) {
        throw new KwpError('KWP_ERR_STATE_CORRUPT', `${file}: the stored bytes of ${entry.name}@${entry.version} no longer match their sha256; remove and push the module again`);
      }
      c = compileEvaluator(bytes, { source: `store:${entry.name}@${entry.version}`, limits: this.limits, instrumentationCache: this.instrumentationCache });
      this.compiled.set(entry.sha256, c);
    }
    return c;
  }
}

function notStored(what: string): KwpError {
  return new KwpError('KWP_ERR_MODULE_NOT_FOUND', `module ${what} is not in the module store; "kwp module ls" lists what is`);
}

function byNameThenVersion(a: StoredModule, b: StoredModule): number {
  return a.name === b.name ? compareVersions(a.version, b.version) : a.name < b.name ? -1 : 1;
}
