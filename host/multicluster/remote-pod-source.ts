// The agent's view of the other clusters of a flat-network cluster set: list,
// then watch, the IP tracker's prefix in etcd and keep the ClusterState's
// remote pods equal to it. While etcd is unreachable the last known entries
// stay (a partition must not flip verdicts for known peers); on reconnect, and
// after a compaction cuts the watch, the prefix is listed again and replaces
// the remote pods wholesale, so nothing missed in between survives.

import type { Etcd3, IKeyValue, Watcher } from 'etcd3';
import type { ObjectSink, ObjectSource } from '../contract.js';
import { KwpError } from '../errors.js';
import type { RemotePod } from '../state/cluster-state.js';
import { backoffDelay, type BackoffOptions } from '../sources/kubernetes/backoff.js';
import { openEtcd } from './etcd-client.js';
import { DEFAULT_PREFIX, decodeRecord, normalizePrefix, remotePodKey, remotePodOf, type IpRecord } from './ip-record.js';
import { silentLogger, type HostLogger } from '../logger.js';

/** What ClusterState offers for remote pods. */
export interface RemotePodSink {
  enterMulticluster(clusterId: string): void;
  upsertRemotePod(key: string, pod: RemotePod): void;
  deleteRemotePod(key: string): void;
  replaceRemotePods(pods: ReadonlyMap<string, RemotePod>): void;
}

export interface RemotePodSourceOptions {
  endpoints: string[];
  prefix?: string;
  /** Records of this cluster are skipped: the local informers are the authority on local pods. */
  localClusterId: string;
  logger?: HostLogger;
  /** Reconnect delays; default 200 ms doubling up to 10 s. */
  backoff?: BackoffOptions;
}

/** A list or watch that takes longer than this is taken as a dead connection. */
const CALL_DEADLINE_MS = 5000;

function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    timer.unref?.();
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

interface Entry {
  ip: string;
  record: IpRecord;
  podKey: string;
}

export class RemotePodSource implements ObjectSource {
  readonly name = 'ip-tracker';
  private readonly prefix: string;
  private readonly logger: HostLogger;
  private readonly backoff: BackoffOptions;
  private sink: RemotePodSink | undefined;
  private readonly entries = new Map<string, Entry>();
  /** podKey → the keys (one per IP) that currently name it. */
  private readonly keysByPod = new Map<string, Set<string>>();
  private synced = false;
  private connectedNow = false;
  private stopped = false;
  private client: Etcd3 | undefined;
  private watcher: Watcher | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private relists = 0;

  constructor(private readonly opts: RemotePodSourceOptions) {
    this.prefix = normalizePrefix(opts.prefix ?? DEFAULT_PREFIX);
    this.logger = opts.logger ?? silentLogger;
    this.backoff = opts.backoff ?? { initialMs: 200, maxMs: 10_000 };
  }

  async start(sink: ObjectSink): Promise<void> {
    const s = sink as ObjectSink & Partial<RemotePodSink>;
    if (typeof s.enterMulticluster !== 'function' || typeof s.upsertRemotePod !== 'function' || typeof s.deleteRemotePod !== 'function' || typeof s.replaceRemotePods !== 'function') {
      throw new KwpError('KWP_ERR_USAGE', 'the ip-tracker source needs a ClusterState as its sink (remote pods are not plain objects)');
    }
    if (this.loop) throw new Error('the ip-tracker source is already started');
    this.sink = s as RemotePodSink;
    // Remote pods only make sense with cluster identities on every pod.
    this.sink.enterMulticluster(this.opts.localClusterId);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    this.closeClient();
    // A call stuck on a dead connection ends at its deadline; stop need not wait that long.
    await Promise.race([this.loop, new Promise((r) => setTimeout(r, 1000).unref?.())]);
  }

  /** True once the prefix has been listed once; stays true while etcd is away (the last entries are kept). */
  ready(): boolean {
    return this.synced;
  }

  /** Whether a watch is open right now. */
  connected(): boolean {
    return this.connectedNow;
  }

  /** How many times the prefix has been listed (the first list included). */
  listCount(): number {
    return this.relists;
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      try {
        await this.listAndWatch(() => { attempt = 0; });
      } catch (err) {
        if (this.stopped) break;
        this.logger.warn({ source: this.name, err: (err as Error).message, keptPods: this.keysByPod.size }, 'etcd unreachable; keeping the last known remote pods');
      }
      this.connectedNow = false;
      this.closeClient();
      if (this.stopped) break;
      await this.sleep(backoffDelay(attempt++, this.backoff));
    }
  }

  /** One session: list, watch until the watch breaks. Returns when it should be retried. */
  private async listAndWatch(onHealthy: () => void): Promise<void> {
    const client = await openEtcd(this.opts.endpoints);
    this.client = client;
    // stop() closes this.client; had it run while etcd3 was loading, it saw none.
    if (this.stopped) { this.closeClient(); return; }
    const listing = await withDeadline(client.getAll().prefix(this.prefix).exec(), CALL_DEADLINE_MS, 'listing the prefix');
    if (this.stopped) return;
    this.replaceAll(listing.kvs);
    this.relists++;
    this.synced = true;
    const revision = BigInt(listing.header.revision);
    const watcher = await withDeadline(client.watch().prefix(this.prefix).startRevision(String(revision + 1n)).create(), CALL_DEADLINE_MS, 'opening the watch');
    if (this.stopped) return;
    this.watcher = watcher;
    this.connectedNow = true;
    onHealthy();
    this.logger.info({ source: this.name, revision: String(revision), remotePods: this.keysByPod.size }, 'remote pods listed; watching');
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      // etcd3 rethrows a handler's exception outside any promise, which would
      // end the process: a listener that fails on one pod must not do that.
      watcher.on('put', (kv) => this.guarded(() => this.applyPut(kv)));
      watcher.on('delete', (kv) => this.guarded(() => this.applyDelete(kv.key.toString())));
      // etcd3 would resume the watch itself, but events may have been compacted
      // away meanwhile; a fresh list is the only way to be sure.
      watcher.on('disconnected', () => resolve());
      watcher.on('error', (err) => {
        this.logger.warn({ source: this.name, err: (err as Error).message }, 'watch ended (compaction or cancel); listing again');
        resolve();
      });
      watcher.on('end', () => resolve());
    });
    this.wake = undefined;
  }

  private guarded(apply: () => void): void {
    try {
      apply();
    } catch (err) {
      this.logger.error({ source: this.name, err: (err as Error).message }, 'applying a remote pod change failed');
    }
  }

  private closeClient(): void {
    const client = this.client;
    this.client = undefined;
    this.watcher = undefined;
    if (client) {
      try {
        client.close();
      } catch {
        // closing an already broken channel
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.wake = undefined; resolve(); }, ms);
      this.wake = () => { clearTimeout(timer); this.wake = undefined; resolve(); };
    });
  }

  private decode(kv: IKeyValue): Entry | undefined {
    const key = kv.key.toString();
    const decoded = decodeRecord(this.prefix, key, kv.value.toString());
    if (!decoded.ok) {
      this.logger.warn({ source: this.name, key }, `ignoring ${key}: ${decoded.problem}`);
      return undefined;
    }
    if (decoded.record.clusterId === this.opts.localClusterId) return undefined;
    return { ip: decoded.ip, record: decoded.record, podKey: remotePodKey(decoded.record) };
  }

  private replaceAll(kvs: IKeyValue[]): void {
    this.entries.clear();
    this.keysByPod.clear();
    for (const kv of kvs) {
      const entry = this.decode(kv);
      if (entry) this.index(kv.key.toString(), entry);
    }
    const pods = new Map<string, RemotePod>();
    for (const podKey of this.keysByPod.keys()) pods.set(podKey, this.podOf(podKey)!);
    this.sink!.replaceRemotePods(pods);
  }

  private applyPut(kv: IKeyValue): void {
    const key = kv.key.toString();
    const entry = this.decode(kv);
    const previous = this.entries.get(key);
    if (previous) this.unindex(key, previous);
    if (entry) this.index(key, entry);
    if (previous && previous.podKey !== entry?.podKey) this.publish(previous.podKey);
    if (entry) this.publish(entry.podKey);
  }

  private applyDelete(key: string): void {
    const previous = this.entries.get(key);
    if (!previous) return;
    this.unindex(key, previous);
    this.publish(previous.podKey);
  }

  private index(key: string, entry: Entry): void {
    this.entries.set(key, entry);
    let keys = this.keysByPod.get(entry.podKey);
    if (!keys) this.keysByPod.set(entry.podKey, (keys = new Set()));
    keys.add(key);
  }

  private unindex(key: string, entry: Entry): void {
    this.entries.delete(key);
    const keys = this.keysByPod.get(entry.podKey);
    keys?.delete(key);
    if (keys && keys.size === 0) this.keysByPod.delete(entry.podKey);
  }

  /** The pod as its keys describe it now: the most recently written record, the IPs that still have keys. */
  private podOf(podKey: string): RemotePod | undefined {
    const keys = this.keysByPod.get(podKey);
    if (!keys || keys.size === 0) return undefined;
    const entries = [...keys].map((k) => this.entries.get(k)!);
    return remotePodOf(entries[entries.length - 1].record, entries.map((e) => e.ip));
  }

  private publish(podKey: string): void {
    const pod = this.podOf(podKey);
    if (pod) this.sink!.upsertRemotePod(podKey, pod);
    else this.sink!.deleteRemotePod(podKey);
  }
}
