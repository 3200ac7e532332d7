// The CustomResourceDefinitions of the fleet's kinds and the RBAC rules that
// go with them, for `kwp manifests`. The schemas say what objects.ts checks,
// so `kubectl apply` refuses most bad objects before any node sees them (the
// nodes check again, with KWP_ERR_FLEET_OBJECT_INVALID naming the field).
import type { V1PolicyRule } from '@kubernetes/client-node';

/**
 * OpenAPI v3 schema text as the API server reads it. Not client-node's
 * V1JSONSchemaProps: its fields are the model's camelCase names (`_enum`,
 * `xKubernetesPreserveUnknownFields`), which YAML for kubectl must not carry.
 */
type V1JSONSchemaProps = { [field: string]: unknown };
import { EVALUATOR_MODULE, FLEET_GROUP, FLEET_VERSION, NODE_PIPELINE_STATUS, PIPELINE, type FleetResource } from './objects.js';

const str: V1JSONSchemaProps = { type: 'string' };
const int: V1JSONSchemaProps = { type: 'integer' };
const anyObject: V1JSONSchemaProps = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
const keyRef: V1JSONSchemaProps = { type: 'object', required: ['namespace', 'name', 'key'], properties: { namespace: str, name: str, key: str } };
const labelSelector: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    matchLabels: { type: 'object', additionalProperties: str },
    matchExpressions: {
      type: 'array',
      items: { type: 'object', required: ['key', 'operator'], properties: { key: str, operator: { type: 'string', enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] }, values: { type: 'array', items: str } } },
    },
  },
};

const stage: V1JSONSchemaProps = {
  type: 'object',
  required: ['name', 'module'],
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' },
    label: { type: 'string', maxLength: 32 },
    module: { type: 'string', description: 'A built-in module, or an EvaluatorModule by spec.name (optionally @version).' },
    config: anyObject,
    mode: { type: 'string', enum: ['enforce', 'audit'] },
    failurePolicy: { type: 'string', enum: ['fail-open', 'fail-closed'] },
  },
};

const evaluatorModuleSchema: V1JSONSchemaProps = {
  type: 'object',
  required: ['spec'],
  properties: {
    apiVersion: str, kind: str, metadata: { type: 'object' },
    spec: {
      type: 'object',
      required: ['name', 'version', 'sha256', 'source'],
      properties: {
        name: { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' },
        version: { type: 'string', minLength: 1, maxLength: 64 },
        sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
        source: {
          type: 'object',
          description: 'Exactly one of oci, configMap, secret.',
          maxProperties: 1, minProperties: 1,
          properties: { oci: { type: 'string', pattern: '^oci://[^@]+@sha256:[0-9a-f]{64}$', description: 'oci://HOST[:PORT]/REPOSITORY@sha256:<manifest digest>' }, configMap: keyRef, secret: keyRef },
        },
        signature: { type: 'string', description: 'base64 ed25519 signature of sha256hex + "\\n" + name + "\\n" + version' },
        selfTestConfig: anyObject,
      },
    },
  },
};

const pipelineSchema: V1JSONSchemaProps = {
  type: 'object',
  required: ['stages'],
  properties: {
    apiVersion: str, kind: str, metadata: { type: 'object' },
    stages: { type: 'array', items: stage },
    target: { type: 'object', properties: { nodeSelector: labelSelector } },
    rollout: {
      type: 'object',
      properties: {
        strategy: { type: 'string', enum: ['AllAtOnce', 'Steps'] },
        step: { 'x-kubernetes-int-or-string': true, description: 'Nodes per step: a number, or a percentage such as "25%".' },
        pauseSeconds: { type: 'number', minimum: 0, maximum: 86400 },
        maxFailures: { type: 'integer', minimum: 1 },
      },
    },
    status: anyObject,
  },
};

const nodeStatusSchema: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    apiVersion: str, kind: str, metadata: { type: 'object' },
    status: {
      type: 'object',
      properties: {
        nodeName: str, pipeline: str, observedGeneration: int, appliedGeneration: int, revision: int, since: str,
        ready: { type: 'boolean' }, localOverride: { type: 'boolean' },
        stages: {
          type: 'array',
          items: { type: 'object', properties: { name: str, module: str, sha256: str, traps: int, fuelExhausted: int, failurePolicyAnswers: int } },
        },
        lastError: { type: 'object', properties: { code: str, message: str, time: str, generation: int } },
      },
    },
  },
};

function crd(r: FleetResource, schema: V1JSONSchemaProps, columns: Array<{ name: string; jsonPath: string; type: string }>): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${r.plural}.${FLEET_GROUP}`, labels: { 'app.kubernetes.io/part-of': 'kube-wasm-policies' } },
    spec: {
      group: FLEET_GROUP,
      scope: 'Cluster',
      names: { kind: r.kindName, plural: r.plural, singular: r.singular, listKind: `${r.kindName}List`, categories: ['kwp'] },
      versions: [{
        name: FLEET_VERSION, served: true, storage: true,
        schema: { openAPIV3Schema: schema },
        ...(r.statusSubresource ? { subresources: { status: {} } } : {}),
        additionalPrinterColumns: columns,
      }],
    },
  };
}

export function fleetCrds(): Array<Record<string, unknown>> {
  return [
    crd(EVALUATOR_MODULE, evaluatorModuleSchema, [
      { name: 'Module', jsonPath: '.spec.name', type: 'string' },
      { name: 'Version', jsonPath: '.spec.version', type: 'string' },
      { name: 'SHA256', jsonPath: '.spec.sha256', type: 'string' },
    ]),
    crd(PIPELINE, pipelineSchema, [
      { name: 'Generation', jsonPath: '.metadata.generation', type: 'integer' },
      { name: 'Rollout', jsonPath: '.status.rollout.phase', type: 'string' },
      { name: 'Message', jsonPath: '.status.rollout.message', type: 'string' },
    ]),
    crd(NODE_PIPELINE_STATUS, nodeStatusSchema, [
      { name: 'Generation', jsonPath: '.status.appliedGeneration', type: 'integer' },
      { name: 'Revision', jsonPath: '.status.revision', type: 'integer' },
      { name: 'Ready', jsonPath: '.status.ready', type: 'boolean' },
      { name: 'Error', jsonPath: '.status.lastError.code', type: 'string' },
    ]),
  ];
}

/**
 * What a node agent may do with the fleet's kinds: read modules and
 * pipelines, and write NodePipelineStatus objects. RBAC cannot restrict
 * `create` to one name; a ValidatingAdmissionPolicy matching the service
 * account's node (docs/fleet.md) can, where that matters.
 */
export function nodeFleetRules(): V1PolicyRule[] {
  return [
    { apiGroups: [FLEET_GROUP], resources: [EVALUATOR_MODULE.plural, PIPELINE.plural], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [FLEET_GROUP], resources: [NODE_PIPELINE_STATUS.plural], verbs: ['get', 'create', 'update'] },
  ];
}

/** The cluster-level admin API: writes modules and pipelines (and pipeline status), reads node statuses and nodes. */
export function clusterFleetRules(): V1PolicyRule[] {
  return [
    { apiGroups: [FLEET_GROUP], resources: [EVALUATOR_MODULE.plural, PIPELINE.plural], verbs: ['get', 'list', 'watch', 'create', 'update'] },
    { apiGroups: [FLEET_GROUP], resources: [EVALUATOR_MODULE.plural], verbs: ['delete'] },
    { apiGroups: [FLEET_GROUP], resources: [`${PIPELINE.plural}/status`], verbs: ['get', 'update'] },
    { apiGroups: [FLEET_GROUP], resources: [NODE_PIPELINE_STATUS.plural], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
  ];
}
