// Offline evaluation: manifests and flows in, verdicts and walkthroughs out,
// decided by the same WASM pipeline the agent runs. Used by `kwp eval`,
// `kwp matrix`, the conformance suites and the SDK's test kit.
import type { DirectionResult, KubeObject, StageTrace } from './contract.js';
import { kindKeyOf, Kinds } from './contract.js';
import { ClusterState } from './state/cluster-state.js';
import { endpointAddressesOf } from './services/service-directory.js';
import { PolicyEngine } from './pipeline/engine.js';
import { BuiltinModules, ChainedModules, type ModuleResolver } from './pipeline/modules.js';
import { defaultPipeline, type PipelineSpec } from './pipeline/spec.js';
import type { Pipeline } from './pipeline/pipeline.js';
import { resolveFlowRoutes, DEFAULT_SOURCE_PORT, type FlowSpec, type FlowProtocol, type ResolvedFlow, type ServiceHop } from './flows.js';
import { walkthroughLine } from './walkthrough.js';
import type { HostLogger } from './logger.js';

export type { FlowSpec, ServiceHop } from './flows.js';

/** A flow as tests and callers write it: protocol defaults to TCP, srcPort to an ephemeral port. */
export type FlowInput = Pick<FlowSpec, 'src' | 'dst' | 'port'> & Partial<Pick<FlowSpec, 'protocol' | 'srcPort' | 'name' | 'expect'>>;

export interface FlowResult extends Pick<FlowSpec, 'src' | 'dst' | 'protocol' | 'port' | 'srcPort' | 'name' | 'expect'> {
  verdict: 'allow' | 'deny';
  egress: StageTrace[];
  ingress: StageTrace[];
  walkthrough: string;
  /** For a flow to a Service: the endpoint this result is for, as the Service proxy rewrote the flow. */
  via?: ServiceHop;
}

export interface EvaluateOptions {
  objects: KubeObject[];
  flows: Array<FlowInput | FlowSpec>;
  pipeline?: PipelineSpec;
  /** `name → addresses`, as the agent would have learnt them from DNS answers. */
  dns?: Record<string, string[]>;
  /** Extra modules (e.g. a plugin under test) tried before the built-ins. */
  modules?: ModuleResolver;
  /** Where modules' log lines go; dropped when absent. */
  logger?: HostLogger;
}

let builtins: BuiltinModules | undefined;
/** Built-in modules compile once per process; every evaluation shares them. */
export function sharedBuiltins(): BuiltinModules {
  builtins ??= new BuiltinModules();
  return builtins;
}

/** Loads objects into a fresh ClusterState, grouped by kind as a source would deliver them. */
export function stateFromObjects(objects: KubeObject[], dns?: Record<string, string[]>): ClusterState {
  const state = new ClusterState();
  const byKind = new Map<string, KubeObject[]>();
  for (const obj of objects) {
    const k = kindKeyOf(obj);
    const list = byKind.get(k) ?? [];
    list.push(obj);
    byKind.set(k, list);
  }
  // Namespaces and nodes first, so pods get their labels on first sight.
  const order = [Kinds.Namespace, Kinds.Node, Kinds.Pod];
  for (const k of order) if (byKind.has(k)) state.replace(k, byKind.get(k)!);
  for (const [k, list] of byKind) if (!order.includes(k as never)) state.replace(k, list);
  for (const [name, addresses] of Object.entries(dns ?? {})) {
    // As the agent records a DNS answer: a ClusterIP stands for its Service's endpoints too.
    for (const a of addresses) for (const address of [a, ...endpointAddressesOf(state, a)]) state.recordResolvedName(name, address, 365 * 24 * 3600);
  }
  return state;
}

export class OfflineEvaluator {
  readonly state: ClusterState;
  readonly pipeline: Pipeline;
  constructor(opts: Omit<EvaluateOptions, 'flows'>) {
    this.state = stateFromObjects(opts.objects, opts.dns);
    const modules = opts.modules ? new ChainedModules([opts.modules, sharedBuiltins()]) : sharedBuiltins();
    const engine = new PolicyEngine({ state: this.state, modules, logger: opts.logger });
    this.pipeline = engine.build(opts.pipeline ?? defaultPipeline());
  }

  /**
   * Decides one flow to a pod or an address. A flow to a Service has one
   * result per endpoint: use evaluateAll.
   */
  evaluate(input: FlowInput | FlowSpec, index = 0): FlowResult {
    const results = this.evaluateAll(input, index);
    if (results.length !== 1 || results[0].via) {
      throw new Error(`${input.dst} is a Service: its flows are decided once per endpoint; call evaluateAll`);
    }
    return results[0];
  }

  /** Decides a flow: one result, or one per endpoint when its destination is a Service. */
  evaluateAll(input: FlowInput | FlowSpec, index = 0): FlowResult[] {
    return decideFlow(this.state, this.pipeline, input, index);
  }

  dispose(): void { this.pipeline.dispose(); }
}

/**
 * Decides a flow with any state and pipeline: an offline evaluator's, or the
 * agent's live ones (POST /v1/diff). One result, or one per endpoint when the
 * destination is a Service.
 */
export function decideFlow(state: ClusterState, pipeline: Pipeline, input: FlowInput | FlowSpec, index = 0): FlowResult[] {
  const flow = normalizeFlow(input, index);
  return resolveFlowRoutes(flow, state).map((r) => decideRoute(pipeline, flow, r));
}

function decideRoute(pipeline: Pipeline, flow: FlowSpec, r: ResolvedFlow): FlowResult {
  const d = pipeline.evaluate(r.packet, r.srcPod, r.dstPod);
  const result: FlowResult = {
    src: flow.src,
    dst: flow.dst,
    protocol: flow.protocol,
    port: flow.port,
    srcPort: flow.srcPort,
    ...(flow.name !== undefined ? { name: flow.name } : {}),
    ...(flow.expect !== undefined ? { expect: flow.expect } : {}),
    verdict: d.allowed ? 'allow' : 'deny',
    egress: d.egress.trace,
    ingress: d.ingress.trace,
    walkthrough: '',
    ...(r.via ? { via: r.via } : {}),
  };
  result.walkthrough = walkthroughLine(flow, d.allowed, d.egress, d.ingress, r.via);
  return result;
}

function normalizeFlow(f: FlowInput | FlowSpec, index: number): FlowSpec {
  if ('file' in f) return f;
  return {
    ...f,
    protocol: (f.protocol ?? 'TCP').toUpperCase() as FlowProtocol,
    srcPort: f.srcPort ?? DEFAULT_SOURCE_PORT,
    file: '<flows>',
    index: index + 1,
  };
}

export async function evaluateFlows(opts: EvaluateOptions): Promise<FlowResult[]> {
  const ev = new OfflineEvaluator(opts);
  try {
    return opts.flows.flatMap((f, i) => ev.evaluateAll(f, i));
  } finally {
    ev.dispose();
  }
}

/**
 * Priorities upstream leaves undefined: two cluster-wide policies of one tier
 * with the same priority. Evaluators break the tie by name; eval says so.
 */
export function priorityTieWarnings(objects: KubeObject[]): string[] {
  const groups = new Map<string, string[]>();
  for (const o of objects) {
    const k = kindKeyOf(o);
    let tier: string | undefined;
    if (k === Kinds.ClusterNetworkPolicy) tier = `ClusterNetworkPolicy tier ${o.spec?.tier ?? '?'}`;
    else if (k === Kinds.AdminNetworkPolicy) tier = 'AdminNetworkPolicy';
    if (!tier || typeof o.spec?.priority !== 'number') continue;
    const key = `${tier} priority ${o.spec.priority}`;
    const list = groups.get(key) ?? [];
    list.push(o.metadata.name);
    groups.set(key, list);
  }
  const out: string[] = [];
  for (const [key, names] of groups) {
    if (names.length > 1) {
      out.push(`${key} is shared by ${names.sort().join(', ')}: upstream leaves their order undefined; kube-wasm-policies applies them by name`);
    }
  }
  return out;
}
