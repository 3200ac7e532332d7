// The fleet's three cluster-scoped kinds in group kwp.io, version v1alpha1:
//
//   EvaluatorModule     one module: name, version, sha256, where its bytes are
//                       (an OCI reference pinned by digest, or a ConfigMap /
//                       Secret key), its signature and its self-test config.
//   Pipeline            the pipeline file's own shape (`stages`, so the file
//                       `kwp pipeline set` takes is the object `kubectl apply`
//                       takes), plus `target` and `rollout`; `status` is the
//                       rollout controller's.
//   NodePipelineStatus  one per node, named after it, written by that node's
//                       agent only: what it runs and how that goes.
//
// Parsing is strict and every problem names the object and the field.
import { KwpError } from '../errors.js';
import type { KubeObject } from '../contract.js';
import { validatePipelineSpec, type PipelineSpec } from '../pipeline/spec.js';
import type { LabelSelector } from './node-selector.js';
import { validateLabelSelector } from './node-selector.js';

export const FLEET_GROUP = 'kwp.io';
export const FLEET_VERSION = 'v1alpha1';
export const FLEET_API_VERSION = `${FLEET_GROUP}/${FLEET_VERSION}`;

export interface FleetResource {
  kind: `kwp.io/v1alpha1/${string}`;
  kindName: string;
  plural: string;
  singular: string;
  /** Pipelines only: the rollout controller writes `status` through the subresource. */
  statusSubresource: boolean;
}

export const EVALUATOR_MODULE: FleetResource = { kind: 'kwp.io/v1alpha1/EvaluatorModule', kindName: 'EvaluatorModule', plural: 'evaluatormodules', singular: 'evaluatormodule', statusSubresource: false };
export const PIPELINE: FleetResource = { kind: 'kwp.io/v1alpha1/Pipeline', kindName: 'Pipeline', plural: 'pipelines', singular: 'pipeline', statusSubresource: true };
export const NODE_PIPELINE_STATUS: FleetResource = { kind: 'kwp.io/v1alpha1/NodePipelineStatus', kindName: 'NodePipelineStatus', plural: 'nodepipelinestatuses', singular: 'nodepipelinestatus', statusSubresource: false };
export const FLEET_RESOURCES = [EVALUATOR_MODULE, PIPELINE, NODE_PIPELINE_STATUS] as const;

/** The API path of a fleet kind's collection, or of one object (and a subresource). */
export function fleetPath(resource: FleetResource, name?: string, subresource?: string): string {
  const base = `/apis/${FLEET_GROUP}/${FLEET_VERSION}/${resource.plural}`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ''}`;
}

// ---- EvaluatorModule ----

export interface KeyReference {
  namespace: string;
  name: string;
  key: string;
}

export type ModuleSource = { oci: string } | { configMap: KeyReference } | { secret: KeyReference };

export interface EvaluatorModuleSpec {
  name: string;
  version: string;
  /** sha256 of the module bytes, 64 lower-case hex digits. */
  sha256: string;
  source: ModuleSource;
  /** base64 ed25519 signature over the same message an upload is signed with (control/signature.ts). */
  signature?: string;
  selfTestConfig?: Record<string, unknown>;
}

export interface EvaluatorModuleObject {
  objectName: string;
  spec: EvaluatorModuleSpec;
}

const MODULE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const SHA256 = /^[0-9a-f]{64}$/;
/** oci://HOST[:PORT]/REPO@sha256:DIGEST — pinned by digest, never a tag. */
const OCI_REFERENCE = /^oci:\/\/([a-zA-Z0-9.-]+(?::\d{1,5})?)\/([a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)@sha256:([0-9a-f]{64})$/;

export interface OciReference {
  registry: string;
  repository: string;
  /** `sha256:…` of the manifest. */
  digest: string;
}

export function parseOciReference(ref: string, where: string): OciReference {
  const m = OCI_REFERENCE.exec(ref);
  if (!m) invalid(where, `"${ref}" is not an OCI reference pinned by digest; write oci://HOST[:PORT]/REPOSITORY@sha256:<64 hex digits> (tags are not accepted: a tag can move)`);
  return { registry: m[1], repository: m[2], digest: `sha256:${m[3]}` };
}

export function formatOciReference(ref: OciReference): string {
  return `oci://${ref.registry}/${ref.repository}@${ref.digest}`;
}

/** The object name of a module version: `NAME.VERSION`, lower-cased, other characters as dashes (a DNS subdomain). */
export function evaluatorModuleObjectName(name: string, version: string): string {
  return `${name}.${version.toLowerCase().replace(/[^a-z0-9.-]/g, '-')}`.slice(0, 253).replace(/[^a-z0-9]+$/, '');
}

function invalid(where: string, message: string): never {
  throw new KwpError('KWP_ERR_FLEET_OBJECT_INVALID', `${where}: ${message}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function keyReference(v: unknown, where: string): KeyReference {
  if (!isObject(v)) invalid(where, 'must be an object with namespace, name and key');
  for (const f of ['namespace', 'name', 'key'] as const) {
    if (typeof v[f] !== 'string' || v[f] === '') invalid(`${where}.${f}`, 'must be a non-empty string');
  }
  return { namespace: v.namespace as string, name: v.name as string, key: v.key as string };
}

export function parseEvaluatorModule(object: KubeObject): EvaluatorModuleObject {
  const where = `EvaluatorModule ${object.metadata?.name ?? '(no name)'}`;
  const spec = (object as { spec?: unknown }).spec;
  if (!isObject(spec)) invalid(where, '"spec" must be an object');
  if (typeof spec.name !== 'string' || !MODULE_NAME.test(spec.name)) invalid(`${where}: spec.name`, 'must be lower-case letters, digits and dashes (the module\'s kwp.meta name)');
  if (typeof spec.version !== 'string' || spec.version === '' || spec.version.length > 64) invalid(`${where}: spec.version`, 'must be the module\'s kwp.meta version (1 to 64 characters)');
  if (typeof spec.sha256 !== 'string' || !SHA256.test(spec.sha256)) invalid(`${where}: spec.sha256`, 'is required: the sha256 of the module bytes as 64 lower-case hex digits');
  if (!isObject(spec.source)) invalid(`${where}: spec.source`, 'must name exactly one of oci, configMap, secret');
  const kinds = Object.keys(spec.source);
  if (kinds.length !== 1 || !['oci', 'configMap', 'secret'].includes(kinds[0])) invalid(`${where}: spec.source`, `must name exactly one of oci, configMap, secret; got ${kinds.join(', ') || 'none'}`);
  let source: ModuleSource;
  if (kinds[0] === 'oci') {
    if (typeof spec.source.oci !== 'string') invalid(`${where}: spec.source.oci`, 'must be a string');
    parseOciReference(spec.source.oci, `${where}: spec.source.oci`);
    source = { oci: spec.source.oci };
  } else if (kinds[0] === 'configMap') {
    source = { configMap: keyReference(spec.source.configMap, `${where}: spec.source.configMap`) };
  } else {
    source = { secret: keyReference(spec.source.secret, `${where}: spec.source.secret`) };
  }
  const out: EvaluatorModuleSpec = { name: spec.name, version: spec.version, sha256: spec.sha256, source };
  if (spec.signature !== undefined) {
    if (typeof spec.signature !== 'string' || !/^[A-Za-z0-9+/]+={0,2}$/.test(spec.signature)) invalid(`${where}: spec.signature`, 'must be the base64 ed25519 signature ("kwp sign" prints one)');
    out.signature = spec.signature;
  }
  if (spec.selfTestConfig !== undefined) {
    if (!isObject(spec.selfTestConfig)) invalid(`${where}: spec.selfTestConfig`, 'must be an object');
    out.selfTestConfig = spec.selfTestConfig;
  }
  return { objectName: object.metadata.name, spec: out };
}

export function evaluatorModuleObject(spec: EvaluatorModuleSpec): KubeObject {
  return { apiVersion: FLEET_API_VERSION, kind: EVALUATOR_MODULE.kindName, metadata: { name: evaluatorModuleObjectName(spec.name, spec.version) }, spec } as KubeObject;
}

// ---- Pipeline ----

export type RolloutStrategy =
  | { strategy: 'AllAtOnce' }
  | {
    strategy: 'Steps';
    /** Nodes admitted per step: a count, or a percentage of the targeted nodes (at least one). */
    step: { nodes: number } | { percent: number };
    /** Wait between a step's nodes reporting healthy and the next step. */
    pauseSeconds: number;
    /** A step fails, and the rollout rolls back, when one of its nodes reports this many failures (traps + fuel exhaustions + failure-policy answers) or refuses the pipeline. */
    maxFailures: number;
  };

export interface PipelineRolloutStatus {
  /** The generation this rollout is for. */
  generation: number;
  phase: 'Progressing' | 'Complete' | 'RolledBack' | 'Halted';
  /**
   * The admitted nodes, as a boundary: nodes are admitted in node-name order,
   * so every targeted node whose name sorts at or before this one may run the
   * generation. A boundary instead of a list keeps the status (which every
   * watching agent receives on each write) the same size at any cluster size.
   * Absent while no node is admitted (no node targeted).
   */
  admittedThrough?: string;
  /** How many targeted nodes were admitted when the status was written (for people; admission follows admittedThrough). */
  admittedCount: number;
  /** When the last step's nodes all reported healthy (the pause runs from there). */
  stepHealthySince?: string;
  message?: string;
}

export interface PipelineStatus {
  rollout?: PipelineRolloutStatus;
  /** The stages of the last generation that completed its rollout: what a rollback writes back. */
  stable?: { generation: number; stages: PipelineSpec['stages'] };
}

export interface FleetPipeline {
  objectName: string;
  generation: number;
  spec: PipelineSpec;
  nodeSelector?: LabelSelector;
  rollout: RolloutStrategy;
  /** Set on the generation a rollback wrote: it goes to every node at once. */
  rollbackOf?: number;
  status: PipelineStatus;
  resourceVersion?: string;
}

export const ROLLBACK_ANNOTATION = 'kwp.io/rollback-of';
const PIPELINE_KEYS = new Set(['apiVersion', 'kind', 'metadata', 'stages', 'target', 'rollout', 'status']);

/** The `rollout` field of a Pipeline file or object; AllAtOnce when absent. */
export function parseRollout(value: unknown, where: string): RolloutStrategy {
  if (value === undefined) return { strategy: 'AllAtOnce' };
  if (!isObject(value)) invalid(where, 'must be an object: {strategy: AllAtOnce} or {strategy: Steps, step, pauseSeconds, maxFailures}');
  const allowed = new Set(['strategy', 'step', 'pauseSeconds', 'maxFailures']);
  for (const k of Object.keys(value)) if (!allowed.has(k)) invalid(`${where}.${k}`, `unknown field; rollout has ${[...allowed].join(', ')}`);
  if (value.strategy === undefined || value.strategy === 'AllAtOnce') {
    if (Object.keys(value).some((k) => k !== 'strategy')) invalid(where, 'step, pauseSeconds and maxFailures only go with strategy: Steps');
    return { strategy: 'AllAtOnce' };
  }
  if (value.strategy !== 'Steps') invalid(`${where}.strategy`, `must be AllAtOnce or Steps, got ${JSON.stringify(value.strategy)}`);
  let step: { nodes: number } | { percent: number };
  const raw = value.step ?? 1;
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 1) step = { nodes: raw };
  else if (typeof raw === 'string' && /^\d{1,3}%$/.test(raw) && Number(raw.slice(0, -1)) >= 1 && Number(raw.slice(0, -1)) <= 100) step = { percent: Number(raw.slice(0, -1)) };
  else invalid(`${where}.step`, `must be a whole number of nodes (1 or more) or a percentage such as "25%", got ${JSON.stringify(raw)}`);
  const pauseSeconds = value.pauseSeconds ?? 0;
  if (typeof pauseSeconds !== 'number' || !(pauseSeconds >= 0) || pauseSeconds > 86400) invalid(`${where}.pauseSeconds`, 'must be a number of seconds from 0 to 86400');
  const maxFailures = value.maxFailures ?? 1;
  if (typeof maxFailures !== 'number' || !Number.isInteger(maxFailures) || maxFailures < 1) invalid(`${where}.maxFailures`, 'must be a whole number, 1 or more');
  return { strategy: 'Steps', step, pauseSeconds, maxFailures };
}

export function formatRollout(r: RolloutStrategy): Record<string, unknown> {
  if (r.strategy === 'AllAtOnce') return { strategy: 'AllAtOnce' };
  return { strategy: 'Steps', step: 'nodes' in r.step ? r.step.nodes : `${r.step.percent}%`, pauseSeconds: r.pauseSeconds, maxFailures: r.maxFailures };
}

/** `target`: which nodes run the pipeline; every node when absent. */
export function parseTarget(value: unknown, where: string): LabelSelector | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) invalid(where, 'must be an object: {nodeSelector: {matchLabels, matchExpressions}}');
  for (const k of Object.keys(value)) if (k !== 'nodeSelector') invalid(`${where}.${k}`, 'unknown field; target has nodeSelector');
  return value.nodeSelector === undefined ? undefined : validateLabelSelector(value.nodeSelector, `${where}.nodeSelector`);
}

/** A status as first written (a list of admitted names, before the boundary) reads as the boundary it implies. */
function statusOf(status: PipelineStatus & { rollout?: { admitted?: unknown } }): PipelineStatus {
  const r = status.rollout as (PipelineRolloutStatus & { admitted?: unknown }) | undefined;
  if (!r || !Array.isArray(r.admitted)) return status;
  const { admitted, ...rest } = r;
  const names = (admitted as unknown[]).filter((n): n is string => typeof n === 'string').sort();
  return { ...status, rollout: { ...rest, admittedCount: names.length, ...(names.length ? { admittedThrough: names[names.length - 1] } : {}) } };
}

export function parsePipelineObject(object: KubeObject): FleetPipeline {
  const where = `Pipeline ${object.metadata?.name ?? '(no name)'}`;
  const o = object as KubeObject & Record<string, unknown>;
  for (const k of Object.keys(o)) if (!PIPELINE_KEYS.has(k)) invalid(`${where}: ${k}`, `unknown field; a Pipeline has ${[...PIPELINE_KEYS].join(', ')}`);
  const spec = validatePipelineSpec({ stages: o.stages }, where);
  // Only the generation right after the one rolled back is the rollback: a later `kubectl apply` keeps the annotation.
  const generation = Number(object.metadata.generation ?? 1);
  const rollbackOf = Number(object.metadata.annotations?.[ROLLBACK_ANNOTATION]);
  const status = isObject(o.status) ? statusOf(o.status as PipelineStatus & { rollout?: { admitted?: unknown } }) : {};
  return {
    objectName: object.metadata.name,
    generation,
    spec,
    nodeSelector: parseTarget(o.target, `${where}: target`),
    rollout: parseRollout(o.rollout, `${where}: rollout`),
    ...(Number.isInteger(rollbackOf) && rollbackOf > 0 && generation === rollbackOf + 1 ? { rollbackOf } : {}),
    status,
    ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}),
  };
}

// ---- NodePipelineStatus ----

export interface NodeStageStatus {
  name: string;
  module: string;
  /** sha256 of the bytes the stage runs. */
  sha256: string;
  traps: number;
  fuelExhausted: number;
  /** Decisions the failure policy answered: traps, fuel exhaustions and answers while the stage rebuilt. */
  failurePolicyAnswers: number;
}

export interface NodeError {
  code: string;
  message: string;
  time: string;
  /** The Pipeline generation it concerns, when it concerns one. */
  generation?: number;
}

export interface NodeReport {
  nodeName: string;
  /** The Pipeline object this node follows, when one targets it. */
  pipeline?: string;
  /** The newest generation this node has seen and acted on (applied, refused, or not admitted yet). */
  observedGeneration?: number;
  /** The generation whose stages run now; absent while the node runs its configured pipeline. */
  appliedGeneration?: number;
  /** The node's own pipeline revision (kwp pipeline history). */
  revision: number;
  /** When that revision became active. */
  since: string;
  ready: boolean;
  /** The pipeline was changed through the node's own admin API since the cluster object last changed. */
  localOverride: boolean;
  stages: NodeStageStatus[];
  lastError?: NodeError;
}

export function nodeStatusObject(report: NodeReport, resourceVersion?: string): KubeObject {
  return {
    apiVersion: FLEET_API_VERSION,
    kind: NODE_PIPELINE_STATUS.kindName,
    metadata: { name: report.nodeName, ...(resourceVersion ? { resourceVersion } : {}) },
    status: report,
  } as KubeObject;
}

export function nodeReportOf(object: KubeObject): NodeReport | undefined {
  const s = (object as { status?: unknown }).status;
  if (!isObject(s) || typeof s.nodeName !== 'string') return undefined;
  return s as unknown as NodeReport;
}

/** Failures a node reports for its active stages (what a rollout step is judged by). */
export function reportedFailures(report: NodeReport): number {
  return report.stages.reduce((n, s) => n + s.traps + s.fuelExhausted + Math.max(0, s.failurePolicyAnswers - s.traps - s.fuelExhausted), 0);
}
