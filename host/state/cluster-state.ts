// The host's one copy of the cluster: every object the sources deliver, in
// its stored form (stored-form.ts decides which fields an agent keeps), the
// PodInfo records derived from Pods, Namespaces and Nodes, the IP index the
// packet path resolves addresses with, and the DNS answers ClusterNetworkPolicy
// `domainNames` peers match on. Everything downstream (evaluator instances, the
// admin API, `kwp eval`) reads from here and learns of changes by subscribing.

import { Ipv4PodIndex } from './ipv4-index.js';
import {
  Kinds,
  type ContainerPort,
  type KindKey,
  type KubeObject,
  type ObjectEvent,
  type ObjectSink,
  type PodInfo,
  Protocol,
} from '../contract.js';
import { KwpError } from '../errors.js';
import { formatIP, parseIP } from '../net/ip.js';
import { sharedJson, sharedLabels, storedForm } from './stored-form.js';

export interface StateListener {
  /** A pod was added, or anything in its PodInfo changed (labels, namespace or node labels, ports, IPs). */
  podUpserted(pod: PodInfo): void;
  podDeleted(pod: PodInfo): void;
  /** A full snapshot of one kind, Pods, Namespaces and Nodes included. */
  objectsReplaced(kind: KindKey, objects: KubeObject[]): void;
  objectApplied(kind: KindKey, event: ObjectEvent): void;
}

export interface ClusterStateOptions {
  /** Written into every PodInfo; "" for the local cluster. */
  clusterId?: string;
  /**
   * Multicluster mode: every PodInfo's namespace labels gain
   * `cluster.clusterset.k8s.io: <cluster id>`, so ordinary namespace selectors
   * can pick a cluster; remote pods (`upsertRemotePod`) get their own cluster's id.
   */
  multicluster?: boolean;
}

/** The namespace label naming a pod's cluster in multicluster mode (SIG-Multicluster's ClusterSet naming). */
export const CLUSTER_LABEL = 'cluster.clusterset.k8s.io';

/**
 * A pod of another cluster of the set, as an IP tracker publishes it. Remote
 * pods only answer address lookups the local cluster leaves open: a local pod
 * always wins an address, whatever its phase.
 */
export interface RemotePod extends Omit<PodInfo, 'id' | 'hostNetwork'> {
  /** Changes the pod's host id when it changes (a new pod under an old name). */
  uid?: string;
}

/** Kubernetes puts this label on every namespace; policies select namespaces by name through it. */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

const EMPTY_LABELS: Readonly<Record<string, string>> = Object.freeze({});

interface PodRecord {
  /** `namespace/name`: where the object is stored. */
  readonly objectKey: string;
  /** What the id is stable for: the uid ("" when the object has none); for remote pods, cluster, name and uid. */
  readonly identity: string;
  readonly id: number;
  object: KubeObject;
  running: boolean;
  /** Absent while the pod has no IP: such a pod cannot be the end of any packet. */
  info?: PodInfo;
  /** A pod of another cluster (`upsertRemotePod`): loses every address to a local claimant. */
  remote?: boolean;
}

/** `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKeyOf(obj: KubeObject): string {
  const ns = obj.metadata?.namespace;
  return ns ? `${ns}/${obj.metadata.name}` : obj.metadata.name;
}

function labelsOf(obj: KubeObject | undefined): Record<string, string> {
  return obj?.metadata?.labels ?? EMPTY_LABELS;
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const aKeys = Object.keys(a);
  if (aKeys.length !== Object.keys(b).length) return false;
  for (const key of aKeys) if (a[key] !== b[key] || !Object.prototype.hasOwnProperty.call(b, key)) return false;
  return true;
}

function samePodInfo(a: PodInfo, b: PodInfo): boolean {
  return (
    a.id === b.id &&
    a.name === b.name &&
    a.namespace === b.namespace &&
    a.nodeName === b.nodeName &&
    a.clusterId === b.clusterId &&
    a.hostNetwork === b.hostNetwork &&
    a.ips.length === b.ips.length &&
    a.ips.every((ip, i) => ip === b.ips[i]) &&
    a.containerPorts.length === b.containerPorts.length &&
    a.containerPorts.every(
      (p, i) =>
        p.name === b.containerPorts[i].name &&
        p.port === b.containerPorts[i].port &&
        p.protocol === b.containerPorts[i].protocol,
    ) &&
    sameLabels(a.podLabels, b.podLabels) &&
    sameLabels(a.namespaceLabels, b.namespaceLabels) &&
    sameLabels(a.nodeLabels, b.nodeLabels)
  );
}

const PROTOCOL_NUMBERS: Record<string, number> = { TCP: Protocol.TCP, UDP: Protocol.UDP, SCTP: Protocol.SCTP };

function containerPortsOf(spec: any): ContainerPort[] {
  const ports: ContainerPort[] = [];
  // Native sidecars (init containers that keep running) serve traffic like regular containers.
  const sidecars = Array.isArray(spec?.initContainers)
    ? spec.initContainers.filter((c: any) => c?.restartPolicy === 'Always')
    : [];
  const containers = [...(Array.isArray(spec?.containers) ? spec.containers : []), ...sidecars];
  for (const container of containers) {
    if (!Array.isArray(container?.ports)) continue;
    for (const port of container.ports) {
      const number = Number(port?.containerPort);
      if (!Number.isInteger(number) || number < 1 || number > 65535) continue;
      const protocol = PROTOCOL_NUMBERS[String(port.protocol ?? 'TCP').toUpperCase()];
      if (protocol === undefined) continue;
      ports.push({ name: typeof port.name === 'string' ? port.name : '', port: number, protocol });
    }
  }
  return ports;
}

function podIPsOf(status: any): string[] {
  const candidates: unknown[] = [];
  if (Array.isArray(status?.podIPs)) for (const entry of status.podIPs) candidates.push(entry?.ip);
  if (candidates.length === 0) candidates.push(status?.podIP);
  const ips: string[] = [];
  for (const candidate of candidates) {
    if (typeof candidate !== 'string') continue;
    const parsed = parseIP(candidate);
    if (!parsed) continue;
    const formatted = formatIP(parsed.bytes);
    // The stored object's string when it is already canonical: one copy of each address.
    const text = formatted === candidate ? candidate : formatted;
    if (!ips.includes(text)) ips.push(text);
  }
  return ips;
}

/**
 * The IPv4 index key: the address's 32 bits read as a signed int32. Same bits
 * as the u32, but always a small integer in V8, so a lookup with any address
 * (192.168.x.x included) never boxes a heap number.
 */
function ipv4Key(bytes: Uint8Array): number {
  return (bytes[0] << 24) | (bytes[1] << 16) | (bytes[2] << 8) | bytes[3];
}

/** The IPv6 index key: the eight 16-bit groups as an eight-character string, built in one call. */
function ipv6Key(b: Uint8Array): string {
  return String.fromCharCode(
    (b[0] << 8) | b[1],
    (b[2] << 8) | b[3],
    (b[4] << 8) | b[5],
    (b[6] << 8) | b[7],
    (b[8] << 8) | b[9],
    (b[10] << 8) | b[11],
    (b[12] << 8) | b[13],
    (b[14] << 8) | b[15],
  );
}

function normalizeDnsName(name: string): string {
  let normalized = name.trim().toLowerCase();
  if (normalized.endsWith('.')) normalized = normalized.slice(0, -1);
  return normalized;
}

function compareAddresses(a: string, b: string): number {
  const pa = parseIP(a)!.bytes;
  const pb = parseIP(b)!.bytes;
  if (pa.length !== pb.length) return pa.length - pb.length;
  for (let i = 0; i < pa.length; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

type PendingEvent =
  | { type: 'podUpserted'; pod: PodInfo }
  | { type: 'podDeleted'; pod: PodInfo }
  | { type: 'objectsReplaced'; kind: KindKey; objects: KubeObject[] }
  | { type: 'objectApplied'; kind: KindKey; event: ObjectEvent };

export class ClusterState implements ObjectSink {
  private clusterId: string;
  private multicluster: boolean;
  /** Remote pods by the caller's key; kept apart from `podRecords`, whose keys are local `namespace/name`. */
  private readonly remoteRecords = new Map<string, PodRecord>();
  private readonly objectsByKind = new Map<KindKey, Map<string, KubeObject>>();
  private readonly podRecords = new Map<string, PodRecord>();
  private readonly podsById = new Map<number, PodInfo>();
  private readonly podKeysByNamespace = new Map<string, Set<string>>();
  private readonly podKeysByNode = new Map<string, Set<string>>();
  /**
   * Every pod claiming an address, by canonical address text; the winner goes
   * into the lookup maps. A lone claimant (nearly every address) is stored
   * as itself: a Set per pod IP cost ~150 bytes each.
   */
  private readonly ipClaims = new Map<string, PodRecord | Set<PodRecord>>();
  private readonly podsByIPv4 = new Ipv4PodIndex();
  private readonly podsByIPv6 = new Map<string, PodInfo>();
  /** name → address → expiry (ms since the epoch). */
  private readonly resolvedNames = new Map<string, Map<string, number>>();
  private readonly listeners = new Set<StateListener>();
  private nextPodId = 1;
  private changeCount = 0;
  private pending: PendingEvent[] = [];

  constructor(options: ClusterStateOptions = {}) {
    this.clusterId = options.clusterId ?? '';
    this.multicluster = options.multicluster === true;
  }

  /** The id written into local PodInfo records. */
  get localClusterId(): string {
    return this.clusterId;
  }

  /** Bumped on every change; equal versions mean an identical state. */
  get version(): number {
    return this.changeCount;
  }

  /**
   * Listeners hear about changes from now on; they read the current state
   * through `pods()` and `objects()` when they subscribe.
   */
  subscribe(listener: StateListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  // ---- ObjectSink ----

  replace(kind: KindKey, objects: KubeObject[]): void {
    const previous = this.objectsByKind.get(kind) ?? new Map<string, KubeObject>();
    const next = new Map<string, KubeObject>();
    for (const obj of objects) {
      const trimmed = storedForm(kind, obj);
      next.set(objectKeyOf(trimmed), trimmed);
    }
    this.objectsByKind.set(kind, next);

    if (kind === Kinds.Pod) {
      for (const key of [...this.podRecords.keys()]) if (!next.has(key)) this.deletePodRecord(key);
      for (const [key, obj] of next) this.upsertPodRecord(key, obj);
    } else if (kind === Kinds.Namespace) {
      for (const name of new Set([...previous.keys(), ...next.keys()])) {
        if (!sameLabels(labelsOf(previous.get(name)), labelsOf(next.get(name)))) this.refreshPods(this.podKeysByNamespace.get(name));
      }
    } else if (kind === Kinds.Node) {
      for (const name of new Set([...previous.keys(), ...next.keys()])) {
        if (!sameLabels(labelsOf(previous.get(name)), labelsOf(next.get(name)))) this.refreshPods(this.podKeysByNode.get(name));
      }
    }

    this.pending.push({ type: 'objectsReplaced', kind, objects: [...next.values()] });
    this.changeCount++;
    this.flush();
  }

  apply(kind: KindKey, event: ObjectEvent): void {
    if (event.type === 'delete') {
      const key = objectKeyOf(storedForm(kind, event.object));
      const stored = this.objectsByKind.get(kind)?.get(key);
      if (!stored) return;
      this.objectsByKind.get(kind)!.delete(key);
      if (kind === Kinds.Pod) this.deletePodRecord(key);
      else this.afterLabelsMayHaveChanged(kind, key, labelsOf(stored), EMPTY_LABELS);
      this.pending.push({ type: 'objectApplied', kind, event: { type: 'delete', object: stored } });
    } else {
      const trimmed = storedForm(kind, event.object);
      const key = objectKeyOf(trimmed);
      let store = this.objectsByKind.get(kind);
      if (!store) this.objectsByKind.set(kind, (store = new Map()));
      const previous = store.get(key);
      store.set(key, trimmed);
      if (kind === Kinds.Pod) this.upsertPodRecord(key, trimmed);
      else this.afterLabelsMayHaveChanged(kind, key, labelsOf(previous), labelsOf(trimmed));
      this.pending.push({ type: 'objectApplied', kind, event: { type: 'upsert', object: trimmed } });
    }
    this.changeCount++;
    this.flush();
  }

  // ---- Remote pods (multicluster) ----

  /**
   * Switches to multicluster mode under `clusterId` (what the IP-tracker
   * source does when it starts, so an agent only has to add that source):
   * local PodInfos get the id and the cluster namespace label, and listeners
   * hear about every pod that changed.
   */
  enterMulticluster(clusterId: string): void {
    if (this.multicluster && this.clusterId === clusterId) return;
    this.clusterId = clusterId;
    this.multicluster = true;
    for (const record of this.podRecords.values()) this.refreshRecord(record);
    this.changeCount++;
    this.flush();
  }

  get multiclusterMode(): boolean {
    return this.multicluster;
  }

  /** Adds or changes a pod of another cluster under `key` (the caller's identity for it, e.g. `cluster/ns/name`). */
  upsertRemotePod(key: string, pod: RemotePod): void {
    this.putRemoteRecord(key, pod);
    this.changeCount++;
    this.flush();
  }

  deleteRemotePod(key: string): void {
    if (!this.remoteRecords.has(key)) return;
    this.dropRemoteRecord(key);
    this.changeCount++;
    this.flush();
  }

  /** A full snapshot of the remote pods (after a relist): keys absent from `pods` are deleted. */
  replaceRemotePods(pods: ReadonlyMap<string, RemotePod>): void {
    for (const key of [...this.remoteRecords.keys()]) if (!pods.has(key)) this.dropRemoteRecord(key);
    for (const [key, pod] of pods) this.putRemoteRecord(key, pod);
    this.changeCount++;
    this.flush();
  }

  remotePodKeys(): string[] {
    return [...this.remoteRecords.keys()];
  }

  private putRemoteRecord(key: string, pod: RemotePod): void {
    const identity = `remote:${pod.clusterId}/${pod.namespace}/${pod.name}/${pod.uid ?? ''}`;
    let record = this.remoteRecords.get(key);
    if (record && record.identity !== identity) {
      this.dropRemoteRecord(key);
      record = undefined;
    }
    if (!record) {
      record = {
        objectKey: key,
        identity,
        id: this.nextPodId++,
        object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: pod.name, namespace: pod.namespace } },
        running: true,
        info: undefined,
        remote: true,
      };
      this.remoteRecords.set(key, record);
    }
    const old = record.info;
    const ips: string[] = [];
    for (const ip of pod.ips) {
      const parsed = parseIP(ip);
      if (!parsed) continue;
      const text = formatIP(parsed.bytes);
      if (!ips.includes(text)) ips.push(text);
    }
    const next: PodInfo | undefined = ips.length === 0 ? undefined : Object.freeze({
      id: record.id,
      name: pod.name,
      namespace: pod.namespace,
      podLabels: sharedLabels(pod.podLabels),
      namespaceLabels: sharedLabels({
        ...pod.namespaceLabels,
        [NAMESPACE_NAME_LABEL]: pod.namespace,
        ...(this.multicluster ? { [CLUSTER_LABEL]: pod.clusterId } : {}),
      }),
      nodeName: pod.nodeName,
      nodeLabels: sharedLabels(pod.nodeLabels),
      clusterId: pod.clusterId,
      containerPorts: sharedJson(pod.containerPorts.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol }))),
      hostNetwork: false,
      ips: Object.freeze(ips) as string[],
    });
    if (next && old && samePodInfo(old, next)) return;
    this.commitPodInfo(record, old, next);
  }

  private dropRemoteRecord(key: string): void {
    const record = this.remoteRecords.get(key);
    if (!record) return;
    this.remoteRecords.delete(key);
    const old = record.info;
    if (!old) return;
    record.info = undefined;
    this.podsById.delete(old.id);
    this.updateIPClaims(record, old, undefined);
    this.pending.push({ type: 'podDeleted', pod: old });
  }

  // ---- Reading ----

  /** The pod that owns `ip` (4 or 16 bytes, or text), host-networked pods excluded. Allocation-free for 4 bytes. */
  podByIP(ip: Uint8Array | string): PodInfo | undefined {
    if (typeof ip === 'string') {
      const parsed = parseIP(ip);
      if (!parsed) return undefined;
      ip = parsed.bytes;
    }
    if (ip.length === 4) return this.podsByIPv4.get(ipv4Key(ip));
    if (ip.length === 16) return this.podsByIPv6.get(ipv6Key(ip));
    return undefined;
  }

  podById(id: number): PodInfo | undefined {
    return this.podsById.get(id);
  }

  /** The PodInfo of `namespace/name`, undefined when the pod is unknown or has no IP yet. */
  podByName(namespace: string, name: string): PodInfo | undefined {
    return this.podRecords.get(`${namespace}/${name}`)?.info;
  }

  /** Every pod that has an IP (host-networked ones included). */
  pods(): IterableIterator<PodInfo> {
    return this.podsById.values();
  }

  objects(kind: KindKey): KubeObject[] {
    return [...(this.objectsByKind.get(kind)?.values() ?? [])];
  }

  /** One object by `namespace/name` (or `name` when cluster-scoped). */
  object(kind: KindKey, key: string): KubeObject | undefined {
    return this.objectsByKind.get(kind)?.get(key);
  }

  kinds(): KindKey[] {
    return [...this.objectsByKind.keys()];
  }

  nodes(): KubeObject[] {
    return this.objects(Kinds.Node);
  }

  // ---- DNS answers for domainNames peers ----

  /**
   * Remembers that `name` resolved to `address` for `ttlSeconds`. Listeners see
   * a ResolvedName upsert only when the name's address set changes; a repeated
   * answer just extends the expiry.
   */
  recordResolvedName(name: string, address: string, ttlSeconds: number, now: number = Date.now()): void {
    const normalizedName = normalizeDnsName(name);
    if (normalizedName === '') {
      throw new KwpError('KWP_ERR_USAGE', `a resolved name must not be empty (address ${address}); give a DNS name such as www.example.com`);
    }
    const parsed = parseIP(address);
    if (!parsed) {
      throw new KwpError('KWP_ERR_USAGE', `"${address}" recorded for ${normalizedName} is not an IPv4 or IPv6 address; give one address such as 192.0.2.10`);
    }
    const canonical = formatIP(parsed.bytes);
    const ttlMs = Number.isFinite(ttlSeconds) && ttlSeconds > 0 ? ttlSeconds * 1000 : 0;
    let addresses = this.resolvedNames.get(normalizedName);
    if (!addresses) this.resolvedNames.set(normalizedName, (addresses = new Map()));
    const known = addresses.get(canonical);
    addresses.set(canonical, Math.max(known ?? -Infinity, now + ttlMs));
    if (known !== undefined) return;
    this.emitResolvedName(normalizedName, addresses);
  }

  /** Forgets addresses whose TTL has run out; a name with none left is deleted. */
  expireResolvedNames(now: number = Date.now()): void {
    for (const [name, addresses] of [...this.resolvedNames]) {
      let changed = false;
      for (const [address, expiresAt] of [...addresses]) {
        if (expiresAt <= now) {
          addresses.delete(address);
          changed = true;
        }
      }
      if (changed) this.emitResolvedName(name, addresses);
    }
  }

  /** When the next address expires (ms since the epoch), for scheduling `expireResolvedNames`. */
  nextResolvedNameExpiry(): number | undefined {
    let earliest: number | undefined;
    for (const addresses of this.resolvedNames.values()) {
      for (const expiresAt of addresses.values()) if (earliest === undefined || expiresAt < earliest) earliest = expiresAt;
    }
    return earliest;
  }

  /** The addresses `name` currently resolves to, sorted (IPv4 first). */
  resolvedAddresses(name: string): string[] {
    return [...(this.resolvedNames.get(normalizeDnsName(name))?.keys() ?? [])].sort(compareAddresses);
  }

  private emitResolvedName(name: string, addresses: Map<string, number>): void {
    let store = this.objectsByKind.get(Kinds.ResolvedName);
    if (!store) this.objectsByKind.set(Kinds.ResolvedName, (store = new Map()));
    if (addresses.size === 0) {
      this.resolvedNames.delete(name);
      const last = store.get(name);
      store.delete(name);
      if (last) this.pending.push({ type: 'objectApplied', kind: Kinds.ResolvedName, event: { type: 'delete', object: last } });
    } else {
      const object: KubeObject = {
        apiVersion: 'dns.kwp.io/v1',
        kind: 'ResolvedName',
        metadata: { name },
        addresses: [...addresses.keys()].sort(compareAddresses),
      };
      store.set(name, object);
      this.pending.push({ type: 'objectApplied', kind: Kinds.ResolvedName, event: { type: 'upsert', object } });
    }
    this.changeCount++;
    this.flush();
  }

  // ---- Pods ----

  private upsertPodRecord(key: string, obj: KubeObject): void {
    // The uid itself (no prefix): records are found by `namespace/name`, so "" means "the pod under this name".
    const identity = typeof obj.metadata.uid === 'string' ? obj.metadata.uid : '';
    let record = this.podRecords.get(key);
    if (record && record.identity !== identity) {
      // Same name, different uid: the old pod is gone and this is a new one with a new id.
      this.deletePodRecord(key);
      record = undefined;
    }
    if (!record) {
      // Every field in the literal: one added later would cost each record an out-of-object property array.
      record = { objectKey: key, identity, id: this.nextPodId++, object: obj, running: false, info: undefined, remote: false };
      this.podRecords.set(key, record);
    } else {
      this.unindexPlacement(record);
    }
    record.object = obj;
    this.indexPlacement(record);
    this.refreshRecord(record);
  }

  private deletePodRecord(key: string): void {
    const record = this.podRecords.get(key);
    if (!record) return;
    this.podRecords.delete(key);
    this.unindexPlacement(record);
    const old = record.info;
    if (old) {
      record.info = undefined;
      this.podsById.delete(old.id);
      this.updateIPClaims(record, old, undefined);
      this.pending.push({ type: 'podDeleted', pod: old });
    }
  }

  private refreshPods(keys: Set<string> | undefined): void {
    if (!keys) return;
    for (const key of keys) {
      const record = this.podRecords.get(key);
      if (record) this.refreshRecord(record);
    }
  }

  private afterLabelsMayHaveChanged(kind: KindKey, key: string, before: Record<string, string>, after: Record<string, string>): void {
    if (sameLabels(before, after)) return;
    if (kind === Kinds.Namespace) this.refreshPods(this.podKeysByNamespace.get(key));
    else if (kind === Kinds.Node) this.refreshPods(this.podKeysByNode.get(key));
  }

  /** Installs a record's new PodInfo: the id and IP indexes, then the event for listeners. */
  private commitPodInfo(record: PodRecord, old: PodInfo | undefined, next: PodInfo | undefined): void {
    record.info = next;
    if (old) this.podsById.delete(old.id);
    if (next) this.podsById.set(next.id, next);
    this.updateIPClaims(record, old, next);
    if (next) this.pending.push({ type: 'podUpserted', pod: next });
    else if (old) this.pending.push({ type: 'podDeleted', pod: old });
  }

  /** Recomputes one pod's PodInfo and running state, and emits what changed. */
  private refreshRecord(record: PodRecord): void {
    const old = record.info;
    const wasRunning = record.running;
    const next = this.derivePodInfo(record);
    record.running = record.object.status?.phase === 'Running';

    if (next && old && samePodInfo(old, next)) {
      if (wasRunning !== record.running) this.updateIPClaims(record, old, old);
      return;
    }
    this.commitPodInfo(record, old, next);
  }

  private derivePodInfo(record: PodRecord): PodInfo | undefined {
    const obj = record.object;
    const ips = podIPsOf(obj.status);
    if (ips.length === 0) return undefined;
    const namespace = obj.metadata.namespace ?? 'default';
    const nodeName = typeof obj.spec?.nodeName === 'string' ? obj.spec.nodeName : '';
    const namespaceObject = this.objectsByKind.get(Kinds.Namespace)?.get(namespace);
    const nodeObject = nodeName ? this.objectsByKind.get(Kinds.Node)?.get(nodeName) : undefined;
    return Object.freeze({
      id: record.id,
      name: obj.metadata.name,
      namespace,
      // Stored labels are already shared and frozen (stored-form.ts).
      podLabels: labelsOf(obj),
      namespaceLabels: sharedLabels({
        ...labelsOf(namespaceObject),
        [NAMESPACE_NAME_LABEL]: namespace,
        ...(this.multicluster ? { [CLUSTER_LABEL]: this.clusterId } : {}),
      }),
      nodeName,
      nodeLabels: labelsOf(nodeObject),
      clusterId: this.clusterId,
      containerPorts: sharedJson(containerPortsOf(obj.spec)),
      hostNetwork: obj.spec?.hostNetwork === true,
      ips: Object.freeze(ips) as string[],
    });
  }

  private indexPlacement(record: PodRecord): void {
    const namespace = record.object.metadata.namespace ?? 'default';
    const nodeName = record.object.spec?.nodeName;
    addToIndex(this.podKeysByNamespace, namespace, record.objectKey);
    if (typeof nodeName === 'string' && nodeName) addToIndex(this.podKeysByNode, nodeName, record.objectKey);
  }

  private unindexPlacement(record: PodRecord): void {
    const namespace = record.object.metadata.namespace ?? 'default';
    const nodeName = record.object.spec?.nodeName;
    removeFromIndex(this.podKeysByNamespace, namespace, record.objectKey);
    if (typeof nodeName === 'string' && nodeName) removeFromIndex(this.podKeysByNode, nodeName, record.objectKey);
  }

  /**
   * Moves `record`'s address claims from `before` to `after` and re-elects the
   * owner of every address involved. Host-networked pods claim nothing: their
   * address is the node's.
   */
  private updateIPClaims(record: PodRecord, before: PodInfo | undefined, after: PodInfo | undefined): void {
    const oldIPs = before && !before.hostNetwork ? before.ips : [];
    const newIPs = after && !after.hostNetwork ? after.ips : [];
    for (const ip of oldIPs) {
      if (newIPs.includes(ip)) continue;
      const claimants = this.ipClaims.get(ip);
      if (claimants === record) this.ipClaims.delete(ip);
      else if (claimants instanceof Set) {
        claimants.delete(record);
        if (claimants.size === 1) this.ipClaims.set(ip, claimants.values().next().value!);
      }
    }
    for (const ip of newIPs) {
      const claimants = this.ipClaims.get(ip);
      if (claimants === undefined) this.ipClaims.set(ip, record);
      else if (claimants instanceof Set) claimants.add(record);
      else if (claimants !== record) this.ipClaims.set(ip, new Set([claimants, record]));
    }
    for (const ip of new Set([...oldIPs, ...newIPs])) this.electIPOwner(ip);
  }

  /**
   * A local pod beats a remote one (a remote entry never shadows a local pod);
   * then a Running pod beats one that is not; among equals the newest pod
   * (highest id) wins.
   */
  private electIPOwner(ip: string): void {
    let winner: PodRecord | undefined;
    const claimants = this.ipClaims.get(ip);
    for (const candidate of claimants instanceof Set ? claimants : claimants ? [claimants] : []) {
      if (!candidate.info) continue;
      const candidateLocal = candidate.remote !== true;
      const winnerLocal = winner?.remote !== true;
      if (
        !winner ||
        (candidateLocal && !winnerLocal) ||
        (candidateLocal === winnerLocal &&
          ((candidate.running && !winner.running) || (candidate.running === winner.running && candidate.id > winner.id)))
      ) {
        winner = candidate;
      }
    }
    const bytes = parseIP(ip)!.bytes;
    if (bytes.length === 4) {
      if (winner) this.podsByIPv4.set(ipv4Key(bytes), winner.info!);
      else this.podsByIPv4.delete(ipv4Key(bytes));
    } else {
      if (winner) this.podsByIPv6.set(ipv6Key(bytes), winner.info!);
      else this.podsByIPv6.delete(ipv6Key(bytes));
    }
  }

  /**
   * Delivers the queued events once the state is consistent again, so a
   * listener that reads back sees the state the events describe. A throwing
   * listener does not stop the others; the first error is rethrown afterwards.
   */
  private flush(): void {
    const events = this.pending;
    this.pending = [];
    let firstError: unknown;
    let failed = false;
    for (const event of events) {
      for (const listener of [...this.listeners]) {
        try {
          switch (event.type) {
            case 'podUpserted':
              listener.podUpserted(event.pod);
              break;
            case 'podDeleted':
              listener.podDeleted(event.pod);
              break;
            case 'objectsReplaced':
              listener.objectsReplaced(event.kind, event.objects);
              break;
            case 'objectApplied':
              listener.objectApplied(event.kind, event.event);
              break;
          }
        } catch (err) {
          if (!failed) {
            failed = true;
            firstError = err;
          }
        }
      }
    }
    if (failed) throw firstError;
  }
}

function addToIndex(index: Map<string, Set<string>>, key: string, value: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(value);
}

function removeFromIndex(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}
