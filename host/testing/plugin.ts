// The plugin test kit: a module under test runs in the agent's own runtime
// (every static check, fuel instrumentation, the sandbox's failure handling)
// and pipeline, fed from manifests or objects, with no root and no cluster.
// Nothing here imports vitest: assertions throw plain errors whose message
// carries the walkthrough, so the kit works with whichever test runner (and
// whichever vitest copy) the plugin project has.
import { readFileSync } from 'node:fs';
import type { FailurePolicy, KubeObject, StageMode, StageTrace } from '../contract.js';
import { kindKeyOf } from '../contract.js';
import { KwpError } from '../errors.js';
import { OfflineEvaluator, type FlowInput, type FlowResult } from '../eval.js';
import type { ModuleResolver } from '../pipeline/modules.js';
import { defaultPipeline, validatePipelineSpec, type PipelineSpec, type StageSpec } from '../pipeline/spec.js';
import type { Stage, StageCounters } from '../pipeline/stage.js';
import { compileEvaluator, type CompiledEvaluator } from '../runtime/loader.js';
import type { SandboxLimits } from '../runtime/limits.js';
import { loadManifests } from '../sources/manifest-files.js';

export type { FlowInput, FlowResult } from '../eval.js';
export type { CompiledEvaluator } from '../runtime/loader.js';

/**
 * Compiles a module exactly as the agent and `kwp module push` would: size,
 * validation, ABI version, `kwp.meta`, import allowlist, memory cap, exports,
 * then fuel instrumentation. Throws the agent's `KwpError` when a check fails.
 *
 * @param source - a `.wasm` path or the module's bytes
 * @param limits - sandbox limits to compile against (defaults: host/runtime/limits.ts)
 */
export function loadModule(source: string | Uint8Array, limits?: Partial<SandboxLimits>): CompiledEvaluator {
  if (typeof source !== 'string') return compileEvaluator(source, { source: 'module under test', limits });
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(source);
  } catch (err) {
    throw new KwpError('KWP_ERR_MODULE_INVALID', `${source}: cannot read the module (${(err as NodeJS.ErrnoException).code ?? String(err)}); build it first (npm run build)`);
  }
  return compileEvaluator(bytes, { source, limits });
}

/** The plugin's stage, as a pipeline file would write it. */
export interface PluginStageOptions {
  /** Stage name; defaults to the module's name. */
  name?: string;
  /** Walkthrough label; defaults to the stage name. */
  label?: string;
  /** Delivered to the module's `configure` as JSON (`{}` when absent). */
  config?: Record<string, unknown>;
  /** `audit` runs the module on every packet but never uses its verdict. */
  mode?: StageMode;
  /** Overrides the module's own failure policy from module.json. */
  failurePolicy?: FailurePolicy;
}

/**
 * Where the plugin's stage sits:
 * - `alone` (default): the pipeline is the plugin only;
 * - `before-builtins`: the plugin, then the default pipeline (ClusterNetworkPolicy, ANP, NetworkPolicy, BANP);
 * - `after-builtins`: the default pipeline, then the plugin;
 * - a full pipeline, whose stages name the plugin by its module name.
 */
export type PluginPlacement = 'alone' | 'before-builtins' | 'after-builtins' | PipelineSpec;

export interface PluginClusterOptions {
  /** The module under test: a `.wasm` path, its bytes, or the result of `loadModule`. */
  module: string | Uint8Array | CompiledEvaluator;
  /** Manifest files or directories (YAML or JSON), read as `kwp eval --manifests` reads them. */
  manifests?: string | string[];
  /** Objects added after the manifests, e.g. from `pod()`, `namespace()`, `service()`. */
  objects?: KubeObject[];
  stage?: PluginStageOptions;
  pipeline?: PluginPlacement;
  /** `name → addresses`, as the agent would have learnt them from DNS answers. */
  dns?: Record<string, string[]>;
  /** Sandbox limits, when `module` is a path or bytes. */
  limits?: Partial<SandboxLimits>;
}

/** Thrown by the `expect*` helpers; the message holds the walkthrough of every flow that failed. */
export class PolicyAssertionError extends Error {
  override name = 'PolicyAssertionError';
  constructor(message: string, readonly results: FlowResult[]) {
    super(message);
  }
}

/** Serves one compiled module by its name and `name@version`. */
class SingleModule implements ModuleResolver {
  constructor(private readonly compiled: CompiledEvaluator) {}
  resolve(ref: string): CompiledEvaluator | undefined {
    const { name, version } = this.compiled.meta;
    return ref === name || ref === `${name}@${version}` ? this.compiled : undefined;
  }
}

function placePlugin(placement: PluginPlacement, stage: StageSpec): PipelineSpec {
  if (typeof placement === 'object') return validatePipelineSpec(placement, 'plugin test pipeline');
  const builtins = defaultPipeline().stages;
  if (placement === 'before-builtins') return { stages: [stage, ...builtins] };
  if (placement === 'after-builtins') return { stages: [...builtins, stage] };
  return { stages: [stage] };
}

const PAST = { allow: 'allowed', deny: 'denied' } as const;

function describeFlow(f: FlowInput): string {
  return `${f.src} -> ${f.dst} ${(f.protocol ?? 'TCP').toUpperCase()}/${f.port}`;
}

/**
 * A cluster held in memory with the plugin in its pipeline. Build one with
 * `startPluginCluster`; call `dispose()` when done (an `afterAll` is a good place).
 */
export class PluginCluster {
  /** The module's metadata as the host read it from `kwp.meta`. */
  readonly module: CompiledEvaluator;
  /** The plugin's stage name in the pipeline. */
  readonly stageName: string;
  private readonly evaluator: OfflineEvaluator;

  /** @internal use startPluginCluster */
  constructor(module: CompiledEvaluator, stageName: string, evaluator: OfflineEvaluator) {
    this.module = module;
    this.stageName = stageName;
    this.evaluator = evaluator;
  }

  /** Decides one flow through the whole pipeline: verdict, both traces and the walkthrough line. */
  evaluate(flow: FlowInput): FlowResult {
    return this.evaluator.evaluate(flow);
  }

  /** What the plugin's own stage answered for `flow` in one direction, or undefined when an earlier stage decided first. */
  pluginStep(flow: FlowInput, direction: 'egress' | 'ingress'): StageTrace | undefined {
    return this.evaluate(flow)[direction].find((t) => t.stage === this.stageName);
  }

  /** Asserts the pipeline allows `flow`; returns the result. */
  expectAllowed(flow: FlowInput): FlowResult {
    return this.expectVerdict(flow, 'allow');
  }

  /** Asserts the pipeline denies `flow`; returns the result. */
  expectDenied(flow: FlowInput): FlowResult {
    return this.expectVerdict(flow, 'deny');
  }

  expectVerdict(flow: FlowInput, verdict: 'allow' | 'deny'): FlowResult {
    const r = this.evaluate(flow);
    if (r.verdict !== verdict) {
      throw new PolicyAssertionError(`expected ${describeFlow(flow)} to be ${PAST[verdict]}, but it was ${PAST[r.verdict]}:\n  ${r.walkthrough}`, [r]);
    }
    return r;
  }

  /**
   * Decides every flow and checks each one's `expect`; one error lists every
   * mismatch with its walkthrough, so a table of flows fails all at once.
   */
  expectFlows(flows: FlowInput[]): FlowResult[] {
    const results = flows.map((f, i) => {
      if (f.expect === undefined) throw new Error(`expectFlows: flow ${i + 1} (${describeFlow(f)}) has no "expect": "allow" or "deny"`);
      return this.evaluator.evaluate(f, i);
    });
    const wrong = results.filter((r) => r.verdict !== r.expect);
    if (wrong.length) {
      const lines = wrong.map((r) => `  ${r.name ? `${r.name}: ` : ''}expected ${r.expect}, got ${r.verdict}\n    ${r.walkthrough}`);
      throw new PolicyAssertionError(`${wrong.length} of ${results.length} flows decided wrongly:\n${lines.join('\n')}`, wrong);
    }
    return results;
  }

  /** Asserts the walkthrough line of `flow` contains `pattern` (a string) or matches it (a RegExp). */
  expectWalkthrough(flow: FlowInput, pattern: string | RegExp): FlowResult {
    const r = this.evaluate(flow);
    const ok = typeof pattern === 'string' ? r.walkthrough.includes(pattern) : pattern.test(r.walkthrough);
    if (!ok) throw new PolicyAssertionError(`expected the walkthrough of ${describeFlow(flow)} to ${typeof pattern === 'string' ? 'contain' : 'match'} ${String(pattern)}, got:\n  ${r.walkthrough}`, [r]);
    return r;
  }

  /** Adds or changes an object while the plugin runs, as a watch event would. */
  apply(obj: KubeObject): void {
    this.evaluator.state.apply(kindKeyOf(obj), { type: 'upsert', object: obj });
  }

  /** Deletes an object while the plugin runs, as a watch event would. */
  remove(obj: KubeObject): void {
    this.evaluator.state.apply(kindKeyOf(obj), { type: 'delete', object: obj });
  }

  /** The plugin's stage: its counters (decisions, traps, fuel exhaustions, rebuilds) and health. */
  get stage(): Stage {
    const s = this.evaluator.pipeline.stages.find((st) => st.name === this.stageName);
    if (!s) throw new Error(`the pipeline has no stage named "${this.stageName}"`);
    return s;
  }

  get counters(): Readonly<StageCounters> {
    return this.stage.counters;
  }

  dispose(): void {
    this.evaluator.dispose();
  }
}

/**
 * Loads the manifests and objects into a fresh cluster state and builds the
 * pipeline with the plugin in it: the module is instantiated, configured and
 * fed every pod and every object of the kinds its module.json asks for, as in
 * the agent. A config the module refuses throws `KWP_ERR_CONFIG_REJECTED` with
 * the module's reason; a module that fails a static check throws that check's
 * error code.
 */
export async function startPluginCluster(options: PluginClusterOptions): Promise<PluginCluster> {
  const module = typeof options.module === 'object' && 'meta' in options.module
    ? options.module
    : loadModule(options.module as string | Uint8Array, options.limits);
  if (typeof options.pipeline === 'object' && options.stage !== undefined) {
    throw new Error('startPluginCluster: "stage" applies only when the kit places the plugin; with a full "pipeline", put config, mode and failurePolicy in its stage');
  }
  const stageOpts = options.stage ?? {};
  const stage: StageSpec = { name: stageOpts.name ?? module.meta.name, module: module.meta.name };
  if (stageOpts.label !== undefined) stage.label = stageOpts.label;
  if (stageOpts.config !== undefined) stage.config = stageOpts.config;
  if (stageOpts.mode !== undefined) stage.mode = stageOpts.mode;
  if (stageOpts.failurePolicy !== undefined) stage.failurePolicy = stageOpts.failurePolicy;
  const pipeline = placePlugin(options.pipeline ?? 'alone', stage);

  const manifests = options.manifests === undefined ? [] : Array.isArray(options.manifests) ? options.manifests : [options.manifests];
  // The plugin's own kinds need no CRD in a test: its module.json says it reads them.
  const objects = manifests.length ? (await loadManifests(manifests, { kinds: module.meta.kinds })).objects : [];
  objects.push(...(options.objects ?? []));

  const evaluator = new OfflineEvaluator({ objects, pipeline, dns: options.dns, modules: new SingleModule(module) });
  const stageName = pipeline.stages.find((s) => s.module === module.meta.name || s.module === `${module.meta.name}@${module.meta.version}`)?.name ?? stage.name;
  return new PluginCluster(module, stageName, evaluator);
}
