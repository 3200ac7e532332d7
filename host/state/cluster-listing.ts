// The pods and namespaces an operator picks from: the console's flow form and
// reachability view, and the admin API's GET /v1/cluster/* reads. Only pods
// this cluster runs are listed (remote pods of a multicluster set have no
// `namespace/name` a flow could name).
import { Kinds, Protocol, type PodInfo } from '../contract.js';
import { KwpError } from '../errors.js';
import type { ClusterState } from './cluster-state.js';

export interface PodListing {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  ips: string[];
  nodeName: string;
  hostNetwork: boolean;
  /** Declared container ports, e.g. `{name: "http", port: 80, protocol: "TCP"}`. */
  ports: Array<{ name?: string; port: number; protocol: string }>;
}

export interface NamespaceListing {
  name: string;
  labels: Record<string, string>;
  pods: number;
}

const PROTOCOL_NAMES = new Map<number, string>(Object.entries(Protocol).map(([name, n]) => [n, name]));

function localPods(state: ClusterState): PodInfo[] {
  const out: PodInfo[] = [];
  for (const p of state.pods()) if (state.podByName(p.namespace, p.name) === p) out.push(p);
  return out.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
}

export function listPods(state: ClusterState, selection: PodSelection = {}): PodListing[] {
  return selectPods(state, selection).map((p) => ({
    namespace: p.namespace,
    name: p.name,
    labels: { ...p.podLabels },
    ips: [...p.ips],
    nodeName: p.nodeName,
    hostNetwork: p.hostNetwork,
    ports: p.containerPorts.map((c) => ({ ...(c.name ? { name: c.name } : {}), port: c.port, protocol: PROTOCOL_NAMES.get(c.protocol) ?? String(c.protocol) })),
  }));
}

export function listNamespaces(state: ClusterState): NamespaceListing[] {
  const counts = new Map<string, number>();
  for (const p of localPods(state)) counts.set(p.namespace, (counts.get(p.namespace) ?? 0) + 1);
  const out = new Map<string, NamespaceListing>();
  for (const ns of state.objects(Kinds.Namespace)) {
    const name = ns.metadata.name;
    out.set(name, { name, labels: { ...(ns.metadata.labels ?? {}) }, pods: counts.get(name) ?? 0 });
  }
  // Pods may sit in a namespace whose object the sources never delivered.
  for (const [name, pods] of counts) if (!out.has(name)) out.set(name, { name, labels: {}, pods });
  return [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** One requirement of an equality-based label selector. */
export type LabelRequirement =
  | { key: string; op: '=' | '!='; value: string }
  | { key: string; op: 'exists' | '!exists' };

const KEY = /^([a-z0-9A-Z]([a-z0-9A-Z.-]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([a-z0-9A-Z._-]*[a-z0-9A-Z])?$/;
const VALUE = /^([a-z0-9A-Z]([a-z0-9A-Z._-]*[a-z0-9A-Z])?)?$/;

/**
 * Parses kubectl's equality-based selector syntax: `app=web,tier!=db,canary,!legacy`
 * (`==` is `=`). `where` names the request or flag for the error.
 */
export function parseLabelSelector(text: string, where: string): LabelRequirement[] {
  const out: LabelRequirement[] = [];
  for (const raw of text.split(',')) {
    const part = raw.trim();
    if (part === '') continue;
    const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(part);
    let req: LabelRequirement;
    if (m) req = { key: m[1].trim(), op: m[2] === '!=' ? '!=' : '=', value: m[3].trim() };
    else if (part.startsWith('!')) req = { key: part.slice(1).trim(), op: '!exists' };
    else req = { key: part, op: 'exists' };
    if (!KEY.test(req.key)) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: "${part}" is not a label requirement; write key=value, key!=value, key or !key, separated by commas (e.g. "app=web,tier!=db")`);
    }
    if ('value' in req && (req.value.length > 63 || !VALUE.test(req.value))) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: "${req.value}" in "${part}" is not a label value (letters, digits, "-", "_", ".", at most 63)`);
    }
    out.push(req);
  }
  return out;
}

export function matchesLabels(labels: Record<string, string>, requirements: LabelRequirement[]): boolean {
  return requirements.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    switch (r.op) {
      case '=': return has && labels[r.key] === r.value;
      case '!=': return !has || labels[r.key] !== r.value;
      case 'exists': return has;
      case '!exists': return !has;
    }
  });
}

export interface PodSelection {
  /** Only pods of this namespace. */
  namespace?: string;
  /** An equality-based selector over the pods' labels. */
  selector?: string;
  /** Names the request in error messages. */
  where?: string;
}

/** The local pods a selection names, sorted by namespace then name. */
export function selectPods(state: ClusterState, selection: PodSelection): PodInfo[] {
  const requirements = selection.selector ? parseLabelSelector(selection.selector, selection.where ?? 'selector') : [];
  return localPods(state).filter((p) =>
    (selection.namespace === undefined || p.namespace === selection.namespace) && matchesLabels(p.podLabels, requirements));
}
