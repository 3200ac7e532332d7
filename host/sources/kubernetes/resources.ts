// How a kind (`apiVersion/Kind`) maps to an API resource: its group, version,
// plural and scope. The informers, the RBAC rules in `kwp manifests` and the
// test API server all read this one table, so what the agent watches and what
// it is allowed to watch cannot drift apart.

import { CLUSTER_INPUT_KINDS, Kinds, type KindKey } from '../../contract.js';

export interface ResourceRef {
  kind: KindKey;
  /** '' for the core group. */
  group: string;
  version: string;
  /** The Kind alone, e.g. `Pod`. */
  kindName: string;
  plural: string;
  namespaced: boolean;
}

/** The kinds the agent watches unless told otherwise. */
export const defaultWatchedKinds: readonly KindKey[] = CLUSTER_INPUT_KINDS;

/** Kinds whose scope is known without asking the API server's discovery. */
const knownScopes: Record<string, boolean> = {
  [Kinds.Pod]: true,
  [Kinds.Namespace]: false,
  [Kinds.Node]: false,
  [Kinds.Service]: true,
  [Kinds.NetworkPolicy]: true,
  [Kinds.ClusterNetworkPolicy]: false,
  [Kinds.AdminNetworkPolicy]: false,
  [Kinds.BaselineAdminNetworkPolicy]: false,
  'v1/Endpoints': true,
  [Kinds.EndpointSlice]: true,
};

/** Plurals the lower-case-plus-s rule gets wrong. Keys are lower-case kind names. */
export const pluralOverrides: Record<string, string> = {
  endpoints: 'endpoints',
  networkpolicy: 'networkpolicies',
  clusternetworkpolicy: 'clusternetworkpolicies',
  adminnetworkpolicy: 'adminnetworkpolicies',
  baselineadminnetworkpolicy: 'baselineadminnetworkpolicies',
  ingress: 'ingresses',
  ingressclass: 'ingressclasses',
  storageclass: 'storageclasses',
  priorityclass: 'priorityclasses',
  runtimeclass: 'runtimeclasses',
  endpointslice: 'endpointslices',
  resolvedname: 'resolvednames',
};

export function pluralOf(kindName: string): string {
  const lower = kindName.toLowerCase();
  return pluralOverrides[lower] ?? `${lower}s`;
}

/** Splits `group/version/Kind` (or `version/Kind` for the core group). */
export function parseKindKey(kind: KindKey): { group: string; version: string; kindName: string } {
  const parts = kind.split('/');
  if (parts.length === 2 && parts[0] && parts[1]) return { group: '', version: parts[0], kindName: parts[1] };
  if (parts.length === 3 && parts.every(Boolean)) return { group: parts[0], version: parts[1], kindName: parts[2] };
  throw new Error(`"${kind}" is not a kind key: expected apiVersion/Kind such as v1/Pod or networking.k8s.io/v1/NetworkPolicy`);
}

/** The resource for a kind with a known scope, or undefined when only discovery can tell. */
export function knownResource(kind: KindKey): ResourceRef | undefined {
  const namespaced = knownScopes[kind];
  if (namespaced === undefined) return undefined;
  const { group, version, kindName } = parseKindKey(kind);
  return { kind, group, version, kindName, plural: pluralOf(kindName), namespaced };
}

/** `/api/v1` or `/apis/<group>/<version>`: the group-version's discovery path and the prefix of its resources. */
export function groupVersionPath(group: string, version: string): string {
  return group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
}

/** The cluster-wide collection path, which lists namespaced resources across every namespace too. */
export function collectionPath(ref: Pick<ResourceRef, 'group' | 'version' | 'plural'>): string {
  return `${groupVersionPath(ref.group, ref.version)}/${ref.plural}`;
}

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/**
 * ClusterRole rules granting list and watch on exactly these kinds, one rule
 * per API group, in a stable order. Kinds whose scope needs discovery are
 * included by the guessed plural.
 */
export function rbacRulesFor(kinds: readonly KindKey[]): PolicyRule[] {
  const byGroup = new Map<string, Set<string>>();
  for (const kind of kinds) {
    const ref = knownResource(kind) ?? { ...parseKindKey(kind), plural: pluralOf(parseKindKey(kind).kindName) };
    const set = byGroup.get(ref.group) ?? new Set<string>();
    set.add(ref.plural);
    byGroup.set(ref.group, set);
  }
  return [...byGroup.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([group, plurals]) => ({ apiGroups: [group], resources: [...plurals].sort(), verbs: ['list', 'watch'] }));
}
