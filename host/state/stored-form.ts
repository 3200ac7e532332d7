// What ClusterState keeps of an object a source delivers: the one place that
// decides which fields an agent holds on to. A node agent holds every Pod of
// the cluster, and a real Pod is mostly fields no packet decision reads
// (volumes, env, probes, resources, container statuses, conditions); a real
// Node carries the list of every image on it. Keeping them would make the
// agent's heap grow with how verbose the workloads are rather than with how
// many there are.
//
// The rules, per kind (stored-form.test.ts names each kept field):
// - every kind: metadata without `managedFields` and without the
//   `kubectl.kubernetes.io/last-applied-configuration` annotation (both are
//   write-side bookkeeping; the annotation is a second copy of the object);
// - Pod: metadata; spec.nodeName, spec.hostNetwork, spec.serviceAccountName,
//   the name and ports of each container, and of each init container with its
//   restartPolicy (a native sidecar serves traffic); status.phase, podIP(s)
//   and hostIP(s). That is what the PodInfo record is derived from, plus the
//   pod's network identity for modules that ask for `v1/Pod` themselves;
// - Node: metadata, spec (small: pod CIDRs, provider id, taints) and
//   status.addresses (what `nodes` peers match);
// - every other kind (policies, Namespaces, Services, custom resources): whole,
//   its `spec` shared by content, subtree by subtree (`sharedTree`).
//
// Stored forms are shared and frozen where they repeat between objects (the
// labels of a ReplicaSet's pods, their container ports), so they must never
// be modified; the state replaces an object, it does not edit one.
import { Kinds, type KindKey, type KubeObject } from '../contract.js';

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

const EMPTY: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Equal values under equal keys are one frozen object. Entries are held
 * weakly: a value no pod uses any more is collected and its key forgotten, so
 * the table never grows with churn.
 */
export class Interner<T extends object> {
  private readonly table = new Map<string, WeakRef<T>>();
  private readonly cleanup = new FinalizationRegistry<string>((key) => {
    if (this.table.get(key)?.deref() === undefined) this.table.delete(key);
  });

  intern(key: string, make: () => T): T {
    const known = this.table.get(key)?.deref();
    if (known !== undefined) return known;
    const value = make();
    this.table.set(key, new WeakRef(value));
    this.cleanup.register(value, key);
    return value;
  }

  /** Distinct values alive (for tests). */
  get size(): number {
    let n = 0;
    for (const ref of this.table.values()) if (ref.deref() !== undefined) n++;
    return n;
  }
}

const labelSets = new Interner<Readonly<Record<string, string>>>();

/** Only string values count: anything else is not a label (the manifest source refuses it, an API server never sends it). */
function labelKey(labels: Record<string, unknown>): string {
  let key = '';
  for (const k in labels) {
    const v = labels[k];
    if (typeof v === 'string') key += `${k.length}:${k}${v.length}:${v}`;
  }
  return key;
}

/** One frozen object per distinct label set: pods of one ReplicaSet share theirs, as do pods of one namespace their namespace's. */
export function sharedLabels(labels: Record<string, unknown> | undefined | null): Readonly<Record<string, string>> {
  if (labels === undefined || labels === null || typeof labels !== 'object') return EMPTY;
  const key = labelKey(labels);
  if (key === '') return EMPTY;
  return labelSets.intern(key, () => {
    const copy: Record<string, string> = {};
    for (const k in labels) if (typeof labels[k] === 'string') copy[k] = labels[k] as string;
    return Object.freeze(copy);
  });
}

/** Any frozen JSON-shaped value, shared by content (container port lists, container specs). */
const jsonValues = new Interner<object>();

export function sharedJson<T extends object>(value: T): T {
  // The stored value is a copy (parsed back from its key): freezing must not reach the caller's objects.
  const key = JSON.stringify(value);
  return jsonValues.intern(key, () => deepFreeze(JSON.parse(key))) as T;
}

/**
 * Frozen JSON-shaped subtrees, shared by content at every level (hash-consing):
 * policies written from templates repeat their selectors, peers, port lists
 * and policy types, so 10,000 NetworkPolicies held whole cost ~1 KB each and
 * shared ~0.3 KB (docs/performance.md, "Where the agent's memory goes"). A
 * node's key names its children by the id of their shared copy, not by their
 * text, so sharing a tree costs time linear in its size.
 */
const trees = new Interner<object>();
const treeIds = new WeakMap<object, number>();
let nextTreeId = 1;

/**
 * How a child appears in its parent's key: a shared subtree by its id, a
 * primitive by its type and value (a string with its length, so no value can
 * read as two); undefined when the child cannot be shared (an object that is
 * not plain JSON, such as a Date a YAML reader made), which keeps the parent
 * from being shared too.
 */
function treeKeyPart(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string': return `s${value.length}:${value}`;
    case 'number': return Object.is(value, -0) ? 'n-0' : `n${value}`;
    case 'boolean': return value ? 't' : 'f';
    case 'undefined': return 'u';
    case 'object': {
      if (value === null) return 'z';
      const id = treeIds.get(value);
      return id === undefined ? undefined : `#${id}`;
    }
    default: return undefined;
  }
}

/**
 * `value` with every plain array and object replaced by the one frozen copy
 * of its content; the caller's objects are never frozen. A subtree holding
 * something that is not plain JSON is copied unshared and unfrozen (its
 * plain parts still shared), and the non-JSON value is kept as it was.
 */
export function sharedTree<T>(value: T): T {
  if (value === null || typeof value !== 'object') return value;
  const isArray = Array.isArray(value);
  if (!isArray) {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
  }
  // The key's parts are joined, not added up: `+=` would leave a tree of cons strings in the table for every key.
  const parts: string[] = [isArray ? '[' : '{'];
  let shareable = true;
  let copy: unknown[] | Record<string, unknown>;
  if (isArray) {
    const source = value as unknown[];
    const items = new Array<unknown>(source.length);
    for (let i = 0; i < source.length; i++) {
      const item = sharedTree(source[i]);
      items[i] = item;
      const part = treeKeyPart(item);
      if (part === undefined) shareable = false;
      else parts.push(part);
    }
    copy = items;
  } else {
    const source = value as Record<string, unknown>;
    const fields: Record<string, unknown> = {};
    for (const field of Object.keys(source)) {
      const item = sharedTree(source[field]);
      fields[field] = item;
      const part = treeKeyPart(item);
      if (part === undefined) shareable = false;
      else parts.push(`${field.length}:${field}`, part);
    }
    copy = fields;
  }
  if (!shareable) return copy as T;
  return trees.intern(parts.join(','), () => {
    const shared = Object.freeze(copy);
    treeIds.set(shared, nextTreeId++);
    return shared;
  }) as T;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function storedMetadata(kind: KindKey, metadata: KubeObject['metadata'] | undefined): KubeObject['metadata'] {
  const { managedFields: _dropped, ...kept } = metadata ?? ({} as KubeObject['metadata']);
  if (kind === Kinds.Pod && !kept.namespace) kept.namespace = 'default';
  if (kept.labels !== undefined) kept.labels = sharedLabels(kept.labels) as Record<string, string>;
  const annotations = kept.annotations;
  if (annotations && typeof annotations === 'object' && LAST_APPLIED_ANNOTATION in annotations) {
    const { [LAST_APPLIED_ANNOTATION]: _applied, ...rest } = annotations;
    if (Object.keys(rest).length > 0) kept.annotations = rest;
    else delete kept.annotations;
  }
  return kept;
}

/** The fields of a container (or init container) that say what it serves. */
function storedContainers(list: unknown, init: boolean): unknown[] | undefined {
  if (!Array.isArray(list)) return undefined;
  const out = list.map((c: any) => {
    const kept: Record<string, unknown> = {};
    if (c?.name !== undefined) kept.name = c.name;
    if (init && c?.restartPolicy !== undefined) kept.restartPolicy = c.restartPolicy;
    if (c?.ports !== undefined) kept.ports = c.ports;
    return kept;
  });
  return sharedJson(out);
}

function pick(from: any, fields: readonly string[]): Record<string, unknown> | undefined {
  if (from === null || typeof from !== 'object') return undefined;
  const out: Record<string, unknown> = {};
  for (const f of fields) if (from[f] !== undefined) out[f] = from[f];
  return out;
}

const POD_SPEC_FIELDS = ['nodeName', 'hostNetwork', 'serviceAccountName'] as const;
const POD_STATUS_FIELDS = ['phase', 'podIP', 'podIPs', 'hostIP', 'hostIPs'] as const;

function storedPodSpec(spec: any): Record<string, unknown> {
  const kept = pick(spec, POD_SPEC_FIELDS) ?? {};
  const containers = storedContainers(spec?.containers, false);
  if (containers) kept.containers = containers;
  const initContainers = storedContainers(spec?.initContainers, true);
  if (initContainers) kept.initContainers = initContainers;
  return kept;
}

/**
 * The form of `obj` ClusterState stores and hands to listeners. Never
 * modifies `obj`; the result may share (frozen) parts with other stored objects.
 */
export function storedForm(kind: KindKey, obj: KubeObject): KubeObject {
  const metadata = storedMetadata(kind, obj.metadata);
  if (kind === Kinds.Pod) {
    const { apiVersion, kind: kindName, metadata: _m, spec, status, ...rest } = obj;
    // One literal of a fixed shape: every stored pod then shares V8's hidden
    // class, where adding fields one by one gave each pod a map of its own.
    const out: KubeObject = {
      apiVersion,
      kind: kindName,
      metadata,
      spec: spec === undefined ? undefined : storedPodSpec(spec),
      status: status === undefined ? undefined : (pick(status, POD_STATUS_FIELDS) ?? {}),
    };
    if (spec === undefined) delete out.spec;
    if (status === undefined) delete out.status;
    for (const key in rest) out[key] = rest[key];
    return out;
  }
  if (kind === Kinds.Node) {
    const { status, ...rest } = obj;
    const out: KubeObject = { ...rest, metadata };
    if (status !== undefined) out.status = pick(status, ['addresses']) ?? {};
    return out;
  }
  // Policies and the other kinds are held whole; their specs share repeated parts.
  const out: KubeObject = { ...obj, metadata };
  if (out.spec !== undefined) out.spec = sharedTree(out.spec);
  return out;
}
