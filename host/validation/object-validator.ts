// Strict validation of Kubernetes objects read from files, as strict as
// `kubectl apply --validate=strict` against an API server: the kind and
// version must be known, unknown fields are refused, and types, enums,
// ranges and formats are checked. The rules are data (./schemas, from the
// upstream OpenAPI and CRDs) checked by Ajv; a CustomResourceDefinition among
// the objects makes its kinds known with its own schema.
import { Ajv, type ValidateFunction } from 'ajv';
import type { KubeObject } from '../contract.js';
import { closest } from '../suggest.js';
import { FORMATS } from './formats.js';
import { explainErrors } from './messages.js';
import { groupOf, schemaFiles } from './schemas.js';
import { crdKinds } from './crd.js';
import { UNREAD_KINDS } from './unread-kinds.js';

/** Groups whose kinds all come from this project's schemas: any other kind there is a typo. */
const OWN_GROUPS = new Set(['', 'networking.k8s.io', 'policy.networking.k8s.io', 'discovery.k8s.io', 'apps', 'batch', 'rbac.authorization.k8s.io', 'policy', 'apiextensions.k8s.io']);

function newAjv(strict: boolean): Ajv {
  // strictTypes stays off: if/then branches legitimately narrow a typed parent.
  // The schemas are this project's data, checked by strict mode when each is
  // compiled; skipping the meta-schema pass and the code optimiser roughly
  // halves the time the first load of a manifest directory takes.
  return new Ajv({
    allErrors: true, verbose: true, $data: true, strict, strictTypes: false, strictRequired: false, allowUnionTypes: true, formats: FORMATS,
    validateSchema: false, code: { optimize: false },
  });
}

let builtins: { ajv: Ajv; ids: Map<string, string> } | undefined;

/** One Ajv holding every schema; a kind's validator is compiled the first time an object of it is seen. */
function builtinAjv(): { ajv: Ajv; ids: Map<string, string> } {
  if (builtins) return builtins;
  const ajv = newAjv(true);
  const ids = new Map<string, string>();
  for (const f of schemaFiles()) {
    ajv.addSchema(f.schema);
    if (f.kindKey) ids.set(f.kindKey, f.schema.$id as string);
  }
  builtins = { ajv, ids };
  return builtins;
}

function builtinValidator(kindKey: string): ValidateFunction | undefined {
  const { ajv, ids } = builtinAjv();
  const id = ids.get(kindKey);
  return id === undefined ? undefined : ajv.getSchema(id);
}

/** Every `apiVersion/Kind` with a built-in schema. */
export function builtinKinds(): string[] {
  return [...builtinAjv().ids.keys()];
}

export interface ValidationContext {
  /** Kinds defined by CustomResourceDefinitions among the objects, with their schemas. */
  custom: Map<string, ValidateFunction>;
  /** Kinds accepted without a schema: those the pipeline's modules ask for. */
  accepted: Set<string>;
}

/** The validation context for one load: the CRDs among `objects` and the kinds modules ask for. */
export function validationContext(objects: unknown[], acceptedKinds: Iterable<string> = []): ValidationContext {
  const custom = new Map<string, ValidateFunction>();
  const crds = objects.flatMap((o) => crdKinds(o));
  if (crds.length) {
    // CRD schemas are the user's: not held to Ajv's strict mode.
    const ajv = newAjv(false);
    ajv.addSchema(schemaFiles().find((f) => f.kindKey === undefined)!.schema);
    for (const [kindKey, schema] of crds) custom.set(kindKey, ajv.compile(schema));
  }
  return { custom, accepted: new Set(acceptedKinds) };
}

function kindProblem(apiVersion: string, kind: string, ctx: ValidationContext): string {
  const all = [...builtinKinds(), ...UNREAD_KINDS, ...ctx.custom.keys(), ...ctx.accepted];
  const sameGroup = all.filter((k) => groupOf(k.slice(0, k.lastIndexOf('/'))) === groupOf(apiVersion));
  const versions = sameGroup.filter((k) => k.endsWith(`/${kind}`)).map((k) => k.slice(0, k.lastIndexOf('/')));
  if (versions.length) {
    return `apiVersion "${apiVersion}" has no kind ${kind}; ${kind} is served as apiVersion ${versions.map((v) => `"${v}"`).join(' or ')}`;
  }
  const kinds = all.map((k) => k.slice(k.lastIndexOf('/') + 1));
  const guess = closest(kind, kinds);
  if (guess) {
    const where = all.filter((k) => k.endsWith(`/${guess}`)).map((k) => k.slice(0, k.lastIndexOf('/')));
    return `unknown kind "${kind}" in apiVersion "${apiVersion}"; did you mean "${guess}" (apiVersion ${where.map((v) => `"${v}"`).join(' or ')})?`;
  }
  if (OWN_GROUPS.has(groupOf(apiVersion))) {
    return `unknown kind "${kind}" in apiVersion "${apiVersion}"; the kinds known there are ${[...new Set(sameGroup.map((k) => k.slice(k.lastIndexOf('/') + 1)))].join(', ')}`;
  }
  return `unknown kind "${kind}" (apiVersion "${apiVersion}"): it is no built-in kind and no CustomResourceDefinition among the manifests defines it; add its CRD to the manifests (as a cluster would need it installed), or check apiVersion and kind`;
}

/**
 * The problems of one object: none when it is valid. Each line names the
 * field path and what to write instead; the caller adds file and document.
 */
export function validateObject(object: KubeObject, ctx: ValidationContext): string[] {
  const key = `${object.apiVersion}/${object.kind}`;
  const validate = builtinValidator(key) ?? ctx.custom.get(key);
  if (!validate) {
    if (ctx.accepted.has(key) || UNREAD_KINDS.has(key)) return [];
    return [kindProblem(object.apiVersion, object.kind, ctx)];
  }
  if (validate(object)) return [];
  return explainErrors(validate.errors ?? []);
}
