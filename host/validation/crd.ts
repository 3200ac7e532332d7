// A CustomResourceDefinition among the manifests makes its kinds known: its
// openAPIV3Schema becomes a JSON Schema as the API server applies it to a
// custom resource (a structural schema prunes, and strict field validation
// refuses, fields it does not declare; int-or-string fields take both).

type Schema = Record<string, any>;

function isObject(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The schema with unknown fields refused wherever the CRD declares properties, as the server does. */
function structural(s: Schema): Schema {
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith('x-kubernetes-') || k === 'description' || k === 'example' || k === 'nullable') continue;
    if ((k === 'properties' || k === 'patternProperties') && isObject(v)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, isObject(sub) ? structural(sub) : sub]));
    } else if (k === 'items' && isObject(v)) out[k] = structural(v);
    else if ((k === 'allOf' || k === 'anyOf' || k === 'oneOf') && Array.isArray(v)) out[k] = v.map((sub) => (isObject(sub) ? structural(sub) : sub));
    else if ((k === 'additionalProperties' || k === 'not') && isObject(v)) out[k] = structural(v);
    else out[k] = v;
  }
  if (s['x-kubernetes-int-or-string'] === true) out.type = ['integer', 'string'];
  if (s.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  if (isObject(s.properties) && s.additionalProperties === undefined && s['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

/** `apiVersion/Kind → schema` for each served version of a CRD; nothing for any other object. */
export function crdKinds(o: unknown): Array<[string, Schema]> {
  if (!isObject(o) || o.apiVersion !== 'apiextensions.k8s.io/v1' || o.kind !== 'CustomResourceDefinition') return [];
  const spec = o.spec;
  if (!isObject(spec) || typeof spec.group !== 'string' || !isObject(spec.names) || typeof spec.names.kind !== 'string' || !Array.isArray(spec.versions)) return [];
  const out: Array<[string, Schema]> = [];
  for (const v of spec.versions) {
    if (!isObject(v) || typeof v.name !== 'string') continue;
    const apiVersion = `${spec.group}/${v.name}`;
    const given = isObject(v.schema) && isObject(v.schema.openAPIV3Schema) ? structural(v.schema.openAPIV3Schema) : { type: 'object' };
    const properties = isObject(given.properties) ? given.properties : {};
    out.push([`${apiVersion}/${spec.names.kind}`, {
      ...given,
      type: 'object',
      properties: {
        ...properties,
        apiVersion: { const: apiVersion },
        kind: { const: spec.names.kind },
        metadata: { $ref: 'https://kwp.io/schemas/meta.json#/definitions/ObjectMeta' },
      },
      ...(isObject(given.properties) || given.additionalProperties === false ? { additionalProperties: false } : {}),
    }]);
  }
  return out;
}
