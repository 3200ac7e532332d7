// The host's one copy of the cluster: every object the sources deliver, in
// its stored form (stored-form.ts decides which fields an agent keeps), the
// PodInfo records derived from Pods, Namespaces and Nodes, the IP index the
// packet path resolves addresses with, and the DNS answers ClusterNetworkPolicy
// `domainNames` peers match on. Everything downstream (evaluator instances, the
// admin API, `kwp eval`) reads from here and learns of changes by subscribing.
//
// This class keeps the objects and the pod records and says when things
// change; each job has its own file: pod-info.ts derives PodInfo (local and
// remote), pod-placement.ts finds the pods of a namespace or node,
// ip-owners.ts elects each address's owner, resolved-names.ts is the DNS
// cache, state-events.ts queues events and delivers them.

import {
  Kinds,
  type KindKey,
  type KubeObject,
  type ObjectEvent,
  type ObjectSink,
  type PodInfo,
} from '../contract.js';
import { parseIP } from '../net/ip.js';
import { IpOwners } from './ip-owners.js';
import { EMPTY_LABELS, labelsOf, localPodInfo, podNodeName, remotePodInfo, sameLabels, samePodInfo, type RemotePod } from './pod-info.js';
import { PodPlacement } from './pod-placement.js';
import { ResolvedNames } from './resolved-names.js';
import { StateEvents, type StateEvent, type StateListener } from './state-events.js';
import { storedForm } from './stored-form.js';
import { TimeSlices } from '../time-slices.js';

export type { StateListener } from './state-events.js';
export { CLUSTER_LABEL, NAMESPACE_NAME_LABEL, type RemotePod } from './pod-info.js';

export interface ClusterStateOptions {
  /** Written into every PodInfo; "" for the local cluster. */
  clusterId?: string;
  /**
   * Multicluster mode: every PodInfo's namespace labels gain
   * `cluster.clusterset.k8s.io: <cluster id>`, so ordinary namespace selectors
   * can pick a cluster; remote pods (`upsertRemotePod`) get their own cluster's id.
   */
  multicluster?: boolean;
  /**
   * Take a list of SLICED_LIST_ITEMS objects or more in slices, yielding to
   * the event loop (the agent: a relist of 100,000 NetworkPolicies or 20,000
   * pods held its main thread for seconds); the changes that follow it wait
   * behind it. Off by default: `replace` then changes the state before it
   * returns, as `kwp eval` and the tests expect.
   */
  sliceLargeLists?: boolean;
  /** Where a change taken later (behind a sliced list) reports what its listeners threw. */
  onError?: (err: unknown) => void;
}

/** A list this long (or a Namespace or Node list with this many pods known) is taken in slices under `sliceLargeLists`. */
export const SLICED_LIST_ITEMS = 1000;
/** The longest a slice of a list's work runs before the event loop gets a turn. */
const SLICE_MS = 2;

/** What a pod's id is stable for: its uid ("" when it has none). */
function podIdentity(obj: KubeObject): string {
  return typeof obj.metadata.uid === 'string' ? obj.metadata.uid : '';
}

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

export class ClusterState implements ObjectSink {
  private clusterId: string;
  private multicluster: boolean;
  /** Remote pods by the caller's key; kept apart from `podRecords`, whose keys are local `namespace/name`. */
  private readonly remoteRecords = new Map<string, PodRecord>();
  private readonly objectsByKind = new Map<KindKey, Map<string, KubeObject>>();
  // Not readonly: a sliced list builds them anew and swaps them in (podIndexesInSlices).
  private podRecords = new Map<string, PodRecord>();
  private podsById = new Map<number, PodInfo>();
  private placement = new PodPlacement();
  private ipOwners = new IpOwners<PodRecord>();
  private readonly resolvedNames = new ResolvedNames();
  private readonly events = new StateEvents();
  private nextPodId = 1;
  private changeCount = 0;
  private readonly replaced = new Map<KindKey, number>();
  private readonly sliceLargeLists: boolean;
  private readonly onError: (err: unknown) => void;
  /** Changes waiting behind a list taken in slices, in order; undefined when none is. */
  private waiting: Array<{ change: () => void | Promise<void>; kind: KindKey; objects: number }> | undefined;
  private taking: { kind: KindKey; objects: number } | undefined;
  private draining = false;
  private readonly settledWaiters: Array<() => void> = [];

  constructor(options: ClusterStateOptions = {}) {
    this.clusterId = options.clusterId ?? '';
    this.multicluster = options.multicluster === true;
    this.sliceLargeLists = options.sliceLargeLists === true;
    this.onError = options.onError ?? ((err) => { throw err; });
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
    return this.events.subscribe(listener);
  }

  // ---- ObjectSink ----

  /**
   * Takes a full snapshot of `kind`. With `sliceLargeLists`, a list of at
   * least SLICED_LIST_ITEMS objects (or a Namespace or Node list while as many
   * pods are known) is taken in slices: the stored forms and the PodInfos it
   * leads to are worked out between turns of the event loop, against the
   * current state, which nothing changes meanwhile (later changes wait in
   * order behind it); then everything is installed in one synchronous step.
   * So a reader sees the kind as it was or as it is after the list, never
   * half of it.
   */
  replace(kind: KindKey, objects: KubeObject[]): void {
    const large = this.sliceLargeLists && (objects.length >= SLICED_LIST_ITEMS || ((kind === Kinds.Namespace || kind === Kinds.Node) && this.podRecords.size >= SLICED_LIST_ITEMS));
    if (this.waitingOthers || large) {
      this.later(large ? () => this.replaceInSlices(kind, objects) : () => this.replace(kind, objects), kind, objects.length);
      return;
    }
    const next = new Map<string, KubeObject>();
    for (const obj of objects) {
      const trimmed = storedForm(kind, obj);
      next.set(objectKeyOf(trimmed), trimmed);
    }
    this.install(kind, next);
  }

  /**
   * `replace`, its work done in slices of at most SLICE_MS. For a Pod,
   * Namespace or Node list the pod records, the id, placement and IP indexes
   * are built anew beside the current ones, so the state changes only in the
   * last, synchronous step, which swaps them in.
   */
  private async replaceInSlices(kind: KindKey, objects: KubeObject[]): Promise<void> {
    const next = new Map<string, KubeObject>();
    const slices = new TimeSlices(SLICE_MS);
    for (let i = 0; i < objects.length; i++) {
      const trimmed = storedForm(kind, objects[i]);
      next.set(objectKeyOf(trimmed), trimmed);
      if (slices.dueAt(i, 15)) await slices.yield();
    }
    if (kind !== Kinds.Pod && kind !== Kinds.Namespace && kind !== Kinds.Node) return this.install(kind, next);
    const pods = kind === Kinds.Pod ? next : this.objectsByKind.get(Kinds.Pod) ?? new Map<string, KubeObject>();
    const built = await this.podIndexesInSlices(pods, slices, kind === Kinds.Pod ? undefined : kind, next);
    this.objectsByKind.set(kind, next);
    this.podRecords = built.records;
    this.podsById = built.byId;
    this.placement = built.placement;
    this.ipOwners = built.owners;
    for (const e of built.events) this.events.queue(e);
    this.announceReplaced(kind, next);
  }

  /**
   * The local pod records of `pods` (what the Pod objects will be), with
   * their id, placement and IP indexes, built beside the current ones in
   * slices; remote pods are carried over as they are. `kind`'s objects are
   * read from `objects` instead of the state (a Namespace or Node list not
   * installed yet). `events` are what listeners hear once it is swapped in:
   * as the unsliced path tells them, deletes first, then the pods that are
   * new or whose PodInfo changed (an unchanged pod keeps its PodInfo object).
   */
  private async podIndexesInSlices(pods: ReadonlyMap<string, KubeObject>, slices: TimeSlices, kind?: KindKey, objects?: ReadonlyMap<string, KubeObject>) {
    const records = new Map<string, PodRecord>();
    const byId = new Map<number, PodInfo>();
    const placement = new PodPlacement();
    const owners = new IpOwners<PodRecord>();
    const deletes: StateEvent[] = [];
    const upserts: StateEvent[] = [];
    for (const remote of this.remoteRecords.values()) {
      if (!remote.info) continue;
      byId.set(remote.info.id, remote.info);
      owners.update(remote, undefined, remote.info);
    }
    let i = 0;
    for (const [key, old] of this.podRecords) {
      const obj = pods.get(key);
      // Gone, or the same name with another uid: a new pod with a new id, as upsertPodRecord decides.
      if (old.info && (!obj || podIdentity(obj) !== old.identity)) deletes.push({ type: 'podDeleted', pod: old.info });
      if (slices.dueAt(i++, 15)) await slices.yield();
    }
    for (const [key, obj] of pods) {
      const old = this.podRecords.get(key);
      const identity = podIdentity(obj);
      const same = old !== undefined && old.identity === identity;
      const id = same ? old.id : this.nextPodId++;
      let info = this.derivePodInfo(id, obj, kind, objects);
      if (same && info && old.info && samePodInfo(old.info, info)) info = old.info;
      else if (info) upserts.push({ type: 'podUpserted', pod: info });
      else if (same && old.info) deletes.push({ type: 'podDeleted', pod: old.info });
      // Every field in the literal, as upsertPodRecord writes it.
      const record: PodRecord = { objectKey: key, identity, id, object: obj, running: obj.status?.phase === 'Running', info, remote: false };
      records.set(key, record);
      placement.add(key, obj);
      if (info) byId.set(id, info);
      owners.update(record, undefined, info);
      if (slices.dueAt(i++, 15)) await slices.yield();
    }
    return { records, byId, placement, owners, events: [...deletes, ...upserts] };
  }

  /**
   * Installs `next` as the objects of `kind` and re-derives the pods it
   * touches, then tells listeners, in one synchronous step.
   */
  private install(kind: KindKey, next: Map<string, KubeObject>): void {
    const previous = this.objectsByKind.get(kind) ?? new Map<string, KubeObject>();
    this.objectsByKind.set(kind, next);

    if (kind === Kinds.Pod) {
      for (const key of [...this.podRecords.keys()]) if (!next.has(key)) this.deletePodRecord(key);
      for (const [key, obj] of next) this.upsertPodRecord(key, obj);
    } else if (kind === Kinds.Namespace) {
      for (const name of new Set([...previous.keys(), ...next.keys()])) {
        if (!sameLabels(labelsOf(previous.get(name)), labelsOf(next.get(name)))) this.refreshPods(this.placement.inNamespace(name));
      }
    } else if (kind === Kinds.Node) {
      for (const name of new Set([...previous.keys(), ...next.keys()])) {
        if (!sameLabels(labelsOf(previous.get(name)), labelsOf(next.get(name)))) this.refreshPods(this.placement.onNode(name));
      }
    }
    this.announceReplaced(kind, next);
  }

  /** The last of a replace: the snapshot's event after the pods' ones, the version and the count, and the flush. */
  private announceReplaced(kind: KindKey, next: Map<string, KubeObject>): void {
    this.events.queue({ type: 'objectsReplaced', kind, objects: [...next.values()] });
    this.changeCount++;
    this.replaced.set(kind, (this.replaced.get(kind) ?? 0) + 1);
    this.events.flush();
  }

  /** Lists taken whole per kind since the start (`kwp_cluster_state_replaces_total`). */
  get replaceCounts(): ReadonlyMap<KindKey, number> {
    return this.replaced;
  }

  /**
   * While a list is being taken in slices (`sliceLargeLists`), what it is:
   * the state answers as it was before the list meanwhile, and the changes
   * that came after it wait (`/readyz` says so).
   */
  get pendingList(): { kind: KindKey; objects: number; waiting: number } | undefined {
    if (!this.waiting) return undefined;
    // Before the first slice ran, the list is the first change waiting.
    const list = this.taking ?? this.waiting[0];
    return { kind: list.kind, objects: list.objects, waiting: this.waiting.length - (this.taking ? 0 : 1) };
  }

  /** Resolves once no change is waiting behind a sliced list (at once when none is). */
  async settled(): Promise<void> {
    while (this.waiting) await new Promise<void>((resolve) => this.settledWaiters.push(resolve));
  }

  /** Runs `change` after the changes already waiting (a sliced list first of all), in order. */
  private later(change: () => void | Promise<void>, kind: KindKey, objects: number): void {
    const first = this.waiting === undefined;
    (this.waiting ??= []).push({ change, kind, objects });
    if (first) void this.drain();
  }

  private async drain(): Promise<void> {
    const queue = this.waiting!;
    // Let the caller finish its turn (a source delivering several kinds queues them all) before the first slice.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (queue.length > 0) {
      const { change, kind, objects } = queue.shift()!;
      this.taking = { kind, objects };
      try {
        // Not through `replace`/`apply` again: they would queue it behind itself.
        this.draining = true;
        const result = change();
        this.draining = false;
        await result;
      } catch (err) {
        this.onError(err);
      } finally {
        this.draining = false;
        this.taking = undefined;
      }
    }
    this.waiting = undefined;
    for (const resolve of this.settledWaiters.splice(0)) resolve();
  }

  /** While `drain` runs a queued change: replace and apply act at once instead of queueing. */
  private get waitingOthers(): boolean {
    return this.waiting !== undefined && !this.draining;
  }

  apply(kind: KindKey, event: ObjectEvent): void {
    if (this.waitingOthers) {
      this.later(() => this.apply(kind, event), kind, 1);
      return;
    }
    if (event.type === 'delete') {
      const key = objectKeyOf(storedForm(kind, event.object));
      const stored = this.objectsByKind.get(kind)?.get(key);
      if (!stored) return;
      this.objectsByKind.get(kind)!.delete(key);
      if (kind === Kinds.Pod) this.deletePodRecord(key);
      else this.afterLabelsMayHaveChanged(kind, key, labelsOf(stored), EMPTY_LABELS);
      this.events.queue({ type: 'objectApplied', kind, event: { type: 'delete', object: stored } });
    } else {
      const trimmed = storedForm(kind, event.object);
      const key = objectKeyOf(trimmed);
      let store = this.objectsByKind.get(kind);
      if (!store) this.objectsByKind.set(kind, (store = new Map()));
      const previous = store.get(key);
      store.set(key, trimmed);
      if (kind === Kinds.Pod) this.upsertPodRecord(key, trimmed);
      else this.afterLabelsMayHaveChanged(kind, key, labelsOf(previous), labelsOf(trimmed));
      this.events.queue({ type: 'objectApplied', kind, event: { type: 'upsert', object: trimmed } });
    }
    this.changeCount++;
    this.events.flush();
  }

  // ---- Remote pods (multicluster) ----

  /**
   * Switches to multicluster mode under `clusterId` (what the IP-tracker
   * source does when it starts, so an agent only has to add that source):
   * local PodInfos get the id and the cluster namespace label, and listeners
   * hear about every pod that changed.
   */
  enterMulticluster(clusterId: string): void {
    if (this.waitingOthers) return this.later(() => this.enterMulticluster(clusterId), Kinds.Pod, 1);
    if (this.multicluster && this.clusterId === clusterId) return;
    this.clusterId = clusterId;
    this.multicluster = true;
    for (const record of this.podRecords.values()) this.refreshRecord(record);
    this.changeCount++;
    this.events.flush();
  }

  get multiclusterMode(): boolean {
    return this.multicluster;
  }

  /** Adds or changes a pod of another cluster under `key` (the caller's identity for it, e.g. `cluster/ns/name`). */
  upsertRemotePod(key: string, pod: RemotePod): void {
    if (this.waitingOthers) return this.later(() => this.upsertRemotePod(key, pod), Kinds.Pod, 1);
    this.putRemoteRecord(key, pod);
    this.changeCount++;
    this.events.flush();
  }

  deleteRemotePod(key: string): void {
    if (this.waitingOthers) return this.later(() => this.deleteRemotePod(key), Kinds.Pod, 1);
    if (!this.remoteRecords.has(key)) return;
    this.dropRemoteRecord(key);
    this.changeCount++;
    this.events.flush();
  }

  /** A full snapshot of the remote pods (after a relist): keys absent from `pods` are deleted. */
  replaceRemotePods(pods: ReadonlyMap<string, RemotePod>): void {
    if (this.waitingOthers) return this.later(() => this.replaceRemotePods(pods), Kinds.Pod, 1);
    for (const key of [...this.remoteRecords.keys()]) if (!pods.has(key)) this.dropRemoteRecord(key);
    for (const [key, pod] of pods) this.putRemoteRecord(key, pod);
    this.changeCount++;
    this.events.flush();
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
    const next = remotePodInfo(record.id, pod, this.multicluster);
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
    this.ipOwners.update(record, old, undefined);
    this.events.queue({ type: 'podDeleted', pod: old });
  }

  // ---- Reading ----

  /** The pod that owns `ip` (4 or 16 bytes, or text), host-networked pods excluded. Allocation-free for 4 bytes. */
  podByIP(ip: Uint8Array | string): PodInfo | undefined {
    if (typeof ip === 'string') {
      const parsed = parseIP(ip);
      if (!parsed) return undefined;
      ip = parsed.bytes;
    }
    return this.ipOwners.ownerOf(ip);
  }

  /** `podByIP(ip)?.id ?? 0` for the batched packet path, which needs only the id: an IPv4 lookup reads the index's slot, not the PodInfo. */
  podIdByIP(ip: Uint8Array): number {
    return this.ipOwners.ownerIdOf(ip);
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
    const changed = this.resolvedNames.record(name, address, ttlSeconds, now);
    if (changed !== undefined) this.emitResolvedName(changed);
  }

  /** Forgets addresses whose TTL has run out; a name with none left is deleted. */
  expireResolvedNames(now: number = Date.now()): void {
    this.resolvedNames.expire(now, (name) => this.emitResolvedName(name));
  }

  /** When the next address expires (ms since the epoch), for scheduling `expireResolvedNames`. */
  nextResolvedNameExpiry(): number | undefined {
    return this.resolvedNames.nextExpiry();
  }

  /** The addresses `name` currently resolves to, sorted (IPv4 first). */
  resolvedAddresses(name: string): string[] {
    return this.resolvedNames.addresses(name);
  }

  /** Stores the ResolvedName object of `name` (normalized) as its addresses now are, or deletes it, and tells listeners. */
  private emitResolvedName(name: string): void {
    const addresses = this.resolvedNames.addresses(name);
    let store = this.objectsByKind.get(Kinds.ResolvedName);
    if (!store) this.objectsByKind.set(Kinds.ResolvedName, (store = new Map()));
    if (addresses.length === 0) {
      const last = store.get(name);
      store.delete(name);
      if (last) this.events.queue({ type: 'objectApplied', kind: Kinds.ResolvedName, event: { type: 'delete', object: last } });
    } else {
      const object: KubeObject = {
        apiVersion: 'dns.kwp.io/v1',
        kind: 'ResolvedName',
        metadata: { name },
        addresses,
      };
      store.set(name, object);
      this.events.queue({ type: 'objectApplied', kind: Kinds.ResolvedName, event: { type: 'upsert', object } });
    }
    this.changeCount++;
    this.events.flush();
  }

  // ---- Pods ----

  private upsertPodRecord(key: string, obj: KubeObject): void {
    // The uid itself (no prefix): records are found by `namespace/name`, so "" means "the pod under this name".
    const identity = podIdentity(obj);
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
      this.placement.remove(record.objectKey, record.object);
    }
    record.object = obj;
    this.placement.add(record.objectKey, record.object);
    this.refreshRecord(record);
  }

  private deletePodRecord(key: string): void {
    const record = this.podRecords.get(key);
    if (!record) return;
    this.podRecords.delete(key);
    this.placement.remove(record.objectKey, record.object);
    const old = record.info;
    if (old) {
      record.info = undefined;
      this.podsById.delete(old.id);
      this.ipOwners.update(record, old, undefined);
      this.events.queue({ type: 'podDeleted', pod: old });
    }
  }

  private refreshPods(keys: ReadonlySet<string> | undefined): void {
    if (!keys) return;
    for (const key of keys) {
      const record = this.podRecords.get(key);
      if (record) this.refreshRecord(record);
    }
  }

  private afterLabelsMayHaveChanged(kind: KindKey, key: string, before: Record<string, string>, after: Record<string, string>): void {
    if (sameLabels(before, after)) return;
    if (kind === Kinds.Namespace) this.refreshPods(this.placement.inNamespace(key));
    else if (kind === Kinds.Node) this.refreshPods(this.placement.onNode(key));
  }

  /** Installs a record's new PodInfo: the id and IP indexes, then the event for listeners. */
  private commitPodInfo(record: PodRecord, old: PodInfo | undefined, next: PodInfo | undefined): void {
    record.info = next;
    if (old) this.podsById.delete(old.id);
    if (next) this.podsById.set(next.id, next);
    this.ipOwners.update(record, old, next);
    if (next) this.events.queue({ type: 'podUpserted', pod: next });
    else if (old) this.events.queue({ type: 'podDeleted', pod: old });
  }

  /** Recomputes one pod's PodInfo and running state, and emits what changed. */
  private refreshRecord(record: PodRecord): void {
    const old = record.info;
    const wasRunning = record.running;
    const next = this.derivePodInfo(record.id, record.object);
    record.running = record.object.status?.phase === 'Running';

    if (next && old && samePodInfo(old, next)) {
      if (wasRunning !== record.running) this.ipOwners.update(record, old, old);
      return;
    }
    this.commitPodInfo(record, old, next);
  }

  /** The PodInfo of pod `obj` under `id`; `kind`'s objects are read from `objects` instead (a list not installed yet). */
  private derivePodInfo(id: number, obj: KubeObject, kind?: KindKey, objects?: ReadonlyMap<string, KubeObject>): PodInfo | undefined {
    const nodeName = podNodeName(obj);
    const namespaces = kind === Kinds.Namespace ? objects : this.objectsByKind.get(Kinds.Namespace);
    const nodes = kind === Kinds.Node ? objects : this.objectsByKind.get(Kinds.Node);
    const namespaceObject = namespaces?.get(obj.metadata.namespace ?? 'default');
    const nodeObject = nodeName ? nodes?.get(nodeName) : undefined;
    return localPodInfo(id, obj, namespaceObject, nodeObject, { clusterId: this.clusterId, multicluster: this.multicluster });
  }
}
