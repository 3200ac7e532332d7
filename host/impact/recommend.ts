// Policies from observed traffic: for every workload that received recorded
// flows, one policy that allows exactly those flows — from each source
// workload (by its labels, across namespaces by the namespace's name label)
// or source address (/32, /128), on each port (by the destination's port name
// when it declares one) — and so denies every other ingress to it. As
// Calico's policy recommendation and Antrea's do, it learns per workload, not
// per pod; unlike them it then checks its own output on the WASM pipeline.
import { Kinds, Protocol, type KubeObject, type PodInfo } from '../contract.js';
import { KwpError } from '../errors.js';
import { formatIP } from '../net/ip.js';
import { resolveFlowRoutes } from '../flows.js';
import type { ClusterState } from '../state/cluster-state.js';
import { validateObject, validationContext } from '../validation/object-validator.js';
import type { RecordedFlow } from './recorded-flows.js';
import { WorkloadIndex, type Workload } from './workloads.js';

export interface RecommendOptions {
  /** Only destinations in this namespace. */
  namespace?: string;
  /** Admin-tier ClusterNetworkPolicies instead of NetworkPolicies (ingress from addresses stays a NetworkPolicy: v1alpha2 has no networks peer for ingress). */
  cluster?: boolean;
  /** The first Admin-tier priority used (default 100); each policy gets the next one. */
  priority?: number;
  /**
   * Also egress: for every workload that sent recorded flows, a NetworkPolicy
   * allowing exactly those (to each destination workload by its labels, to
   * each address outside the cluster's pods as an ipBlock /32 or /128), so
   * it may open nothing else. With `cluster` too, egress stays NetworkPolicies.
   */
  egress?: boolean;
}

export interface Recommendation {
  objects: KubeObject[];
  /** Observed flows no policy was written for, and why. */
  notes: string[];
  /** The observed flows the policies were written for: those the check must find allowed. */
  covered: RecordedFlow[];
}

/**
 * A source of observed traffic: a workload of known pods, or an address.
 * `self` marks, for --cluster, a pod's traffic to its own address: no
 * ClusterNetworkPolicy governs it (docs/semantics.md, "Hairpin"), so it is
 * admitted where NetworkPolicies decide it.
 */
type Source = { kind: 'workload'; workload: Workload; self?: true } | { kind: 'address'; address: string; family: 4 | 6 };

interface Port { protocol: 'TCP' | 'UDP' | 'SCTP'; port: number; name?: string }

interface Destination {
  workload: Workload;
  /** Per source key: the source and the ports it was seen on. */
  sources: Map<string, { source: Source; ports: Map<string, Port> }>;
}

const PROTOCOL_NUMBERS = { TCP: Protocol.TCP, UDP: Protocol.UDP, SCTP: Protocol.SCTP } as const;
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
/** ClusterNetworkPolicy allows 25 ingress rules; one is the closing Deny. */
const ACCEPT_RULES_PER_CLUSTER_POLICY = 24;
export const RECOMMENDED_LABEL = 'kwp.io/recommended';

function dnsName(text: string, max = 63): string {
  const s = text.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '');
  return s.slice(0, max).replace(/-$/, '') || 'workload';
}

/** `name`, or the first of `name-2`, `name-3`... (shortened to fit `max`) that is not taken. */
function freeName(name: string, isTaken: (name: string) => boolean, max = 63): string {
  let free = name;
  for (let i = 2; isTaken(free); i++) free = `${name.slice(0, max - `-${i}`.length).replace(/-$/, '')}-${i}`;
  return free;
}

function sourceKey(s: Source): string {
  return s.kind === 'address' ? `1 ${s.address}` : `${s.self ? 2 : 0} ${s.workload.namespace}/${s.workload.name}`;
}

/**
 * The port by the name the destination workload gives it: when every one of
 * its pods declares a container port of that number and protocol under the
 * same name. Replicas of two pod templates may name it differently (or not
 * at all), and a name one pod lacks would not open the port there.
 */
function portOf(dst: Workload, protocol: Port['protocol'], port: number): Port {
  const names = new Set(dst.pods.map((p) => p.containerPorts.find((c) => c.port === port && c.protocol === PROTOCOL_NUMBERS[protocol])?.name ?? ''));
  const [name] = names;
  return names.size === 1 && name ? { protocol, port, name } : { protocol, port };
}

function sortedPorts(ports: Map<string, Port>): Port[] {
  return [...ports.values()].sort((a, b) => a.protocol.localeCompare(b.protocol) || a.port - b.port);
}

function matchLabels(labels: Record<string, string>): { matchLabels: Record<string, string> } {
  return { matchLabels: Object.fromEntries(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))) };
}

/** The selector of exactly a workload's pods: its labels, and the labels a sibling workload has and it lacks required absent. */
function podSelectorOf(w: Workload): Record<string, unknown> {
  const absent = w.absent.map((key) => ({ key, operator: 'DoesNotExist' }));
  return { ...matchLabels(w.selector), ...(absent.length ? { matchExpressions: absent } : {}) };
}

function cidrOf(s: Extract<Source, { kind: 'address' }>): string {
  return `${s.address}/${s.family === 4 ? 32 : 128}`;
}

/** Groups the flows by destination workload and source; flows no policy can be written for become notes. */
function destinations(state: ClusterState, flows: RecordedFlow[], options: RecommendOptions, notes: string[], covered: Set<RecordedFlow>): Destination[] {
  const workloads = new WorkloadIndex(state.pods());
  const out = new Map<string, Destination>();
  for (const f of flows) {
    const at = f.flow.line === undefined ? `${f.flow.file}: flow ${f.flow.index}` : `${f.flow.file}: line ${f.flow.line}`;
    for (const r of resolveFlowRoutes(f.flow, state)) {
      const what = `${f.flow.src} -> ${f.flow.dst} ${f.flow.protocol}/${r.packet.dstPort}`;
      if (!r.dstPod || r.dstPod.hostNetwork) {
        if (!options.egress) notes.push(`${at}: ${what}: the destination is no pod of the cluster, so no ingress policy is written for it (egress stays open)`);
        continue;
      }
      if (options.namespace !== undefined && r.dstPod.namespace !== options.namespace) continue;
      const dst = workloads.of(r.dstPod);
      if (!dst) {
        notes.push(`${at}: ${what}: ${r.dstPod.namespace}/${r.dstPod.name} has no labels a policy could select it by; label its workload (e.g. app.kubernetes.io/name) and run again`);
        continue;
      }
      let source: Source;
      const srcWorkload = r.srcPod && !r.srcPod.hostNetwork ? workloads.of(r.srcPod) : undefined;
      // A pod reaching its own address (not through a Service) passes the Admin tier: with --cluster its rule goes beside the addresses'.
      const self = options.cluster && r.srcPod !== undefined && r.srcPod.id === r.dstPod.id && !r.via?.hairpin;
      if (srcWorkload) source = { kind: 'workload', workload: srcWorkload, ...(self ? { self: true as const } : {}) };
      else if (r.srcPod && !r.srcPod.hostNetwork) {
        notes.push(`${at}: ${what}: the source ${r.srcPod.namespace}/${r.srcPod.name} has no labels a policy could select it by; label it and run again`);
        continue;
      } else source = { kind: 'address', address: formatIP(r.packet.src), family: r.packet.family };
      const key = `${dst.namespace}/${dst.name}`;
      const d = out.get(key) ?? { workload: dst, sources: new Map() };
      out.set(key, d);
      const sk = sourceKey(source);
      const entry = d.sources.get(sk) ?? { source, ports: new Map() };
      d.sources.set(sk, entry);
      const port = portOf(dst, f.flow.protocol, r.packet.dstPort);
      entry.ports.set(`${port.protocol}/${port.port}`, port);
      covered.add(f);
    }
  }
  return [...out.values()].sort((a, b) => `${a.workload.namespace}/${a.workload.name}`.localeCompare(`${b.workload.namespace}/${b.workload.name}`));
}

function sortedSources(d: Destination): Array<{ source: Source; ports: Port[] }> {
  return [...d.sources.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => ({ source: v.source, ports: sortedPorts(v.ports) }));
}

function networkPolicyPeer(source: Source, namespace: string): Record<string, unknown> {
  if (source.kind === 'address') return { ipBlock: { cidr: cidrOf(source) } };
  const pods = { podSelector: podSelectorOf(source.workload) };
  return source.workload.namespace === namespace ? pods : { namespaceSelector: matchLabels({ [NAMESPACE_NAME_LABEL]: source.workload.namespace }), ...pods };
}

function networkPolicy(d: Destination, sources: Array<{ source: Source; ports: Port[] }>, suffix = ''): KubeObject {
  const { workload } = d;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: dnsName(`${workload.name}-observed${suffix}`), namespace: workload.namespace, labels: { [RECOMMENDED_LABEL]: 'true' } },
    spec: {
      podSelector: podSelectorOf(workload),
      policyTypes: ['Ingress'],
      ingress: sources.map(({ source, ports }) => ({
        from: [networkPolicyPeer(source, workload.namespace)],
        ports: ports.map((p) => ({ protocol: p.protocol, port: p.name ?? p.port })),
      })),
    },
  };
}

function clusterProtocols(ports: Port[]): Array<Record<string, unknown>> {
  return ports.map((p) => (p.name ? { destinationNamedPort: p.name } : { [p.protocol.toLowerCase()]: { destinationPort: { number: p.port } } }));
}

function clusterPolicies(d: Destination, sources: Array<{ source: Source; ports: Port[] }>, nextPriority: () => number): KubeObject[] {
  const { workload } = d;
  const subject = { pods: { namespaceSelector: matchLabels({ [NAMESPACE_NAME_LABEL]: workload.namespace }), podSelector: podSelectorOf(workload) } };
  const ruleNames = new Set<string>();
  const rules = sources.map(({ source, ports }) => {
    const w = (source as Extract<Source, { kind: 'workload' }>).workload;
    // Rule names must differ within a policy; `a-b/c` and `a/b-c` would not.
    const name = freeName(`accept-from-${dnsName(`${w.namespace}-${w.name}`, 80)}`, (n) => ruleNames.has(n), 100);
    ruleNames.add(name);
    return {
      name,
      action: 'Accept',
      from: [{ pods: { namespaceSelector: matchLabels({ [NAMESPACE_NAME_LABEL]: w.namespace }), podSelector: podSelectorOf(w) } }],
      protocols: clusterProtocols(ports),
    };
  });
  const chunks: Array<typeof rules> = [];
  for (let i = 0; i < rules.length; i += ACCEPT_RULES_PER_CLUSTER_POLICY) chunks.push(rules.slice(i, i + ACCEPT_RULES_PER_CLUSTER_POLICY));
  if (chunks.length === 0) chunks.push([]);
  const base = `${workload.namespace}-${workload.name}-observed`;
  return chunks.map((chunk, i) => {
    const last = i === chunks.length - 1;
    // Only the last policy (the highest priority number, so the last asked) closes with the Deny: the earlier ones' Accepts come first.
    const ingress: Array<Record<string, unknown>> = [...chunk];
    if (last) ingress.push({ name: 'deny-other-pods', action: 'Deny', from: [{ namespaces: {} }] });
    return {
      apiVersion: 'policy.networking.k8s.io/v1alpha2',
      kind: 'ClusterNetworkPolicy',
      metadata: { name: dnsName(chunks.length > 1 ? `${base}-${i + 1}` : base), labels: { [RECOMMENDED_LABEL]: 'true' } },
      spec: { tier: 'Admin', priority: nextPriority(), subject, ingress },
    };
  });
}

interface Origin {
  workload: Workload;
  /** Per target key: where the workload sent traffic, and the ports. */
  targets: Map<string, { target: Source; ports: Map<string, Port> }>;
}

/** Groups the flows by source workload and target (a workload, or an address outside the cluster's pods). */
function origins(state: ClusterState, flows: RecordedFlow[], options: RecommendOptions, notes: string[], covered: Set<RecordedFlow>): Origin[] {
  const workloads = new WorkloadIndex(state.pods());
  const out = new Map<string, Origin>();
  for (const f of flows) {
    const at = f.flow.line === undefined ? `${f.flow.file}: flow ${f.flow.index}` : `${f.flow.file}: line ${f.flow.line}`;
    for (const r of resolveFlowRoutes(f.flow, state)) {
      // A source outside the cluster's pods has no egress here to police.
      if (!r.srcPod || r.srcPod.hostNetwork) continue;
      if (options.namespace !== undefined && r.srcPod.namespace !== options.namespace) continue;
      const src = workloads.of(r.srcPod);
      if (!src) continue; // the ingress side has said so
      const what = `${f.flow.src} -> ${f.flow.dst} ${f.flow.protocol}/${r.packet.dstPort}`;
      let target: Source;
      let port: Port;
      if (r.dstPod && !r.dstPod.hostNetwork) {
        const dst = workloads.of(r.dstPod);
        if (!dst) {
          notes.push(`${at}: ${what}: the destination ${r.dstPod.namespace}/${r.dstPod.name} has no labels an egress rule could select it by; label it and run again`);
          continue;
        }
        target = { kind: 'workload', workload: dst };
        port = portOf(dst, f.flow.protocol, r.packet.dstPort);
      } else {
        target = { kind: 'address', address: formatIP(r.packet.dst), family: r.packet.family };
        port = { protocol: f.flow.protocol, port: r.packet.dstPort };
      }
      const key = `${src.namespace}/${src.name}`;
      const o = out.get(key) ?? { workload: src, targets: new Map() };
      out.set(key, o);
      const tk = sourceKey(target);
      const entry = o.targets.get(tk) ?? { target, ports: new Map() };
      o.targets.set(tk, entry);
      entry.ports.set(`${port.protocol}/${port.port}`, port);
      covered.add(f);
    }
  }
  return [...out.values()].sort((a, b) => `${a.workload.namespace}/${a.workload.name}`.localeCompare(`${b.workload.namespace}/${b.workload.name}`));
}

function egressPolicy(o: Origin): KubeObject {
  const { workload } = o;
  const targets = [...o.targets.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => ({ target: v.target, ports: sortedPorts(v.ports) }));
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: dnsName(`${workload.name}-egress-observed`), namespace: workload.namespace, labels: { [RECOMMENDED_LABEL]: 'true' } },
    spec: {
      podSelector: podSelectorOf(workload),
      policyTypes: ['Egress'],
      egress: targets.map(({ target, ports }) => ({
        to: [networkPolicyPeer(target, workload.namespace)],
        ports: ports.map((p) => ({ protocol: p.protocol, port: p.name ?? p.port })),
      })),
    },
  };
}

/**
 * The policies that allow exactly the observed flows. Every object is
 * validated as strictly as a manifest before it is returned: output that
 * `kubectl apply --validate=strict` would refuse is a bug here.
 */
export function recommendPolicies(state: ClusterState, flows: RecordedFlow[], options: RecommendOptions = {}): Recommendation {
  const notes: string[] = [];
  const covered = new Set<RecordedFlow>();
  const objects: KubeObject[] = [];
  let priority = options.priority ?? 100;
  // Upstream leaves the order of equal priorities undefined: the priorities Admin-tier policies of the cluster hold are skipped, so none ties.
  const held = new Set(state.objects(Kinds.ClusterNetworkPolicy).filter((o) => o.spec?.tier === 'Admin').map((o) => o.spec?.priority));
  const nextPriority = () => {
    while (held.has(priority)) priority++;
    if (priority > 1000) throw new KwpError('KWP_ERR_USAGE', `kwp recommend: more ClusterNetworkPolicies than priorities up to 1000; give a lower --priority or use --namespace`);
    return priority++;
  };
  for (const d of destinations(state, flows, options, notes, covered)) {
    const sources = sortedSources(d);
    if (!options.cluster) { objects.push(networkPolicy(d, sources)); continue; }
    const fromPods = sources.filter((s) => s.source.kind === 'workload' && !s.source.self);
    const fromAddresses = sources.filter((s) => s.source.kind === 'address' || s.source.self);
    objects.push(...clusterPolicies(d, fromPods, nextPriority));
    // Addresses outside the cluster pass the Admin tier (its Deny names pods), and so does a pod's traffic to itself; a NetworkPolicy admits the observed ones only.
    // Its isolation also meets the pod sources a higher Admin-tier Pass hands down to the NetworkPolicies: it admits those observed too, and still nothing else.
    if (fromAddresses.length) objects.push(networkPolicy(d, sources, '-addresses'));
  }
  if (options.egress) for (const o of origins(state, flows, options, notes, covered)) objects.push(egressPolicy(o));
  // Names are shortened and lower-cased, so two workloads (`Web` and `web`, `a-b/c` and `a/b-c` for cluster-scoped policies, long names alike past 63 characters) may meet: the later one, in the stable order above, takes the first free `-2`, `-3`...
  const taken = new Set<string>();
  for (const o of objects) {
    const id = (name: string) => `${o.kind} ${o.metadata.namespace ?? ''}/${name}`;
    o.metadata.name = freeName(o.metadata.name, (name) => taken.has(id(name)));
    taken.add(id(o.metadata.name));
  }
  const ctx = validationContext([]);
  for (const o of objects) {
    const problems = validateObject(o, ctx);
    if (problems.length) throw new KwpError('KWP_ERR_INTERNAL', `kwp recommend wrote an invalid ${o.kind} ${o.metadata.name}: ${problems.join('; ')}`);
  }
  const names = new Set<string>();
  for (const o of objects) {
    const id = `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    if (names.has(id)) throw new KwpError('KWP_ERR_INTERNAL', `kwp recommend wrote ${id} twice; two workloads' names collide after shortening`);
    names.add(id);
  }
  return { objects, notes, covered: [...covered] };
}

/** Pods a recommendation is checked against: every known pod with an address. */
export function knownPods(state: ClusterState): string[] {
  return [...state.pods()].filter((p) => !p.hostNetwork && p.ips.length > 0 && state.object(Kinds.Pod, `${p.namespace}/${p.name}`)).map((p) => `${p.namespace}/${p.name}`).sort();
}
