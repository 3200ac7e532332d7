// POST /v1/diff's service: the impact of a proposed pipeline or proposed
// objects on the live cluster state, measured on the node's recorded flows
// (or flows the caller gives). The proposal is built by a trial engine with
// the agent's modules and limits, decided beside the active pipeline, then
// disposed: nothing is applied, no revision is taken.
import { kindKeyOf, type KubeObject } from '../contract.js';
import { KwpError } from '../errors.js';
import { decideFlow, stateFromObjects } from '../eval.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import { validatePipelineSpec } from '../pipeline/spec.js';
import type { ClusterState } from '../state/cluster-state.js';
import { validateObject, validationContext } from '../validation/object-validator.js';
import { recordedFlowsFromValues } from './recorded-flows.js';
import { diffVerdicts, type VerdictDiff } from './verdict-diff.js';

/**
 * Where the node's recorded flows come from: the agent's flow ring
 * (docs/flows.md). Records are in the documented format; only src, dst, port
 * and protocol are read.
 */
export interface RecordedFlowSource {
  records(): unknown[];
}

export interface ObjectRef { apiVersion: string; kind: string; namespace?: string; name: string }

export interface DiffRequest {
  /** A whole pipeline, as PUT /v1/pipeline takes it. */
  pipeline?: unknown;
  /** Objects added to the live state, or replacing the one of the same kind, namespace and name. */
  objects?: unknown[];
  /** Objects taken out of the live state. */
  remove?: ObjectRef[];
  /** Flows to decide instead of the recorded ones (flow records, or {src, dst, port, protocol}). */
  flows?: unknown[];
}

export interface DiffAnswer extends VerdictDiff {
  /** The active pipeline's revision: the "as it is" side. */
  revision: number;
  flowsFrom: 'request' | 'recorded';
}

/** Distinct flows one diff decides at most, each twice, on the agent's main thread. */
export const MAX_DIFF_FLOWS = 10_000;

function objectId(kindKey: string, namespace: string | undefined, name: string): string {
  return `${kindKey} ${namespace ? `${namespace}/` : ''}${name}`;
}

function checkObjects(values: unknown[], state: ClusterState, where: string): KubeObject[] {
  const ctx = validationContext(values, state.kinds());
  return values.map((value, i) => {
    const at = `${where}: objects[${i}]`;
    const o = value as KubeObject;
    if (typeof value !== 'object' || value === null || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${at}: an object needs apiVersion, kind and metadata.name, as in a manifest`);
    }
    const problems = validateObject(o, ctx);
    if (problems.length) throw new KwpError('KWP_ERR_REQUEST_INVALID', `${at} (${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}): ${problems.join('; ')}`);
    return o;
  });
}

/** The live objects with the proposal applied, as a state of its own. */
function proposedState(state: ClusterState, request: DiffRequest, where: string): ClusterState {
  const added = checkObjects(request.objects ?? [], state, where);
  const byId = new Map<string, KubeObject>();
  for (const kind of state.kinds()) for (const o of state.objects(kind)) byId.set(objectId(kind, o.metadata.namespace, o.metadata.name), o);
  for (const [i, ref] of (request.remove ?? []).entries()) {
    const id = objectId(`${ref.apiVersion}/${ref.kind}`, ref.namespace, ref.name);
    if (!byId.delete(id)) throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: remove[${i}]: there is no ${id} in the agent's state; check apiVersion, kind, namespace and name`);
  }
  for (const o of added) byId.set(objectId(kindKeyOf(o), o.metadata.namespace, o.metadata.name), o);
  return stateFromObjects([...byId.values()]);
}

export class ImpactService {
  constructor(private readonly engine: PolicyEngine, private readonly recorded?: RecordedFlowSource) {}

  async diff(request: DiffRequest, where = 'POST /v1/diff body'): Promise<DiffAnswer> {
    if (request.pipeline === undefined && !request.objects?.length && !request.remove?.length) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: nothing is proposed; give "pipeline", "objects" or "remove"`);
    }
    const flowsFrom = request.flows ? 'request' : 'recorded';
    if (!request.flows && !this.recorded) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: this agent records no flows (no flow recorder is running); give the flows to decide in "flows"`);
    }
    const read = recordedFlowsFromValues(request.flows ?? this.recorded!.records(), request.flows ? `${where}: flows` : 'recorded flows');
    if (read.flows.length > MAX_DIFF_FLOWS) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: ${read.flows.length} distinct flows is over the ${MAX_DIFF_FLOWS} one diff decides; give fewer in "flows"`);
    }
    const spec = request.pipeline === undefined ? undefined : validatePipelineSpec(request.pipeline, `${where}: pipeline`);
    const state = request.objects?.length || request.remove?.length ? proposedState(this.engine.state, request, where) : this.engine.state;
    const trial = this.engine.trialEngine(state);
    const proposed = await trial.buildAsync(spec ?? this.engine.active.spec, `${where}: proposed pipeline`);
    try {
      // From here nothing yields: both sides decide on one active pipeline and one state.
      const active = this.engine.active;
      const diff = diffVerdicts(read.flows, (f) => decideFlow(this.engine.state, active, f), (f) => decideFlow(state, proposed, f), { skipUnresolvable: true });
      return { revision: active.revision, flowsFrom, ...diff, skipped: [...read.skipped, ...diff.skipped] };
    } finally {
      proposed.dispose();
    }
  }
}
