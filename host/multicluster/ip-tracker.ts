// `kwp ip-tracker`: watches every cluster named by the kubeconfig files of a
// directory and keeps one etcd record per pod IP under a prefix, for the
// agents of a flat-network cluster set to resolve remote addresses with.
// Changes are coalesced into publish passes; a pass that fails (etcd away) is
// retried with backoff, and a pass also runs periodically and whenever a key
// disappears, which is how replicas cover for one another's expired leases.

import type { Etcd3, Watcher } from 'etcd3';
import { backoffDelay, type BackoffOptions } from '../sources/kubernetes/backoff.js';
import { ClusterWatch } from './cluster-watch.js';
import { openEtcd } from './etcd-client.js';
import { EtcdPublisher, type PublishResult } from './etcd-publisher.js';
import { DEFAULT_PREFIX, normalizePrefix } from './ip-record.js';
import { KubeconfigDirectory, type KubeconfigFile } from './kubeconfig-directory.js';
import { silentLogger, type HostLogger } from '../logger.js';

export interface IpTrackerOptions {
  kubeconfigDir: string;
  endpoints: string[];
  prefix?: string;
  /** kubeconfig context → cluster id. */
  clusterIds?: ReadonlyMap<string, string>;
  /** Default 15 s. */
  leaseTtlSeconds?: number;
  logger?: HostLogger;
  /** How often the directory is read; default 1 s. */
  directoryPollMs?: number;
  /** A full pass at least this often; default a third of the lease TTL. */
  resyncMs?: number;
  /** How long changes are gathered before a pass; default 50 ms. */
  coalesceMs?: number;
  /** Retry delays after a failed pass; default 200 ms doubling up to 5 s. */
  backoff?: BackoffOptions;
  /** Reconnect delays of the Kubernetes informers. */
  kubernetesBackoff?: BackoffOptions;
}

export interface ClusterStatus {
  file: string;
  context: string;
  server: string;
  clusterId: string | undefined;
  synced: boolean;
}

/** How long stop() waits for a running publish pass. */
const STOP_WAIT_MS = 2000;

export class IpTracker {
  readonly prefix: string;
  private readonly logger: HostLogger;
  private readonly clusters = new Map<string, ClusterWatch>();
  /** Ids of clusters whose kubeconfig went away: their keys are deleted on the next passes. */
  private readonly purging = new Set<string>();
  private readonly directory: KubeconfigDirectory;
  private readonly publisher: EtcdPublisher;
  private readonly backoff: BackoffOptions;
  private passTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private failures = 0;
  private stopped = false;
  private deleteWatchClient: Etcd3 | undefined;
  private deleteWatcher: Watcher | undefined;
  private passes = 0;
  private lastResult: PublishResult | undefined;
  private lastError: string | undefined;

  constructor(private readonly opts: IpTrackerOptions) {
    this.prefix = normalizePrefix(opts.prefix ?? DEFAULT_PREFIX);
    this.logger = opts.logger ?? silentLogger;
    this.backoff = opts.backoff ?? { initialMs: 200, maxMs: 5000 };
    const ttl = opts.leaseTtlSeconds ?? 15;
    this.publisher = new EtcdPublisher({ endpoints: opts.endpoints, prefix: this.prefix, leaseTtlSeconds: ttl, logger: this.logger });
    this.directory = new KubeconfigDirectory(opts.kubeconfigDir, {
      added: (entry) => this.background(this.addCluster(entry), entry.file),
      changed: (entry) => this.background(this.replaceCluster(entry), entry.file),
      removed: (file) => this.background(this.removeCluster(file), file),
      unreadable: (dir, err) => this.logger.warn({ dir, err: err.message }, 'kubeconfig directory unreadable; keeping the clusters already watched'),
    }, opts.directoryPollMs ?? 1000);
  }

  async start(): Promise<void> {
    await this.directory.start();
    if (this.clusters.size === 0) {
      this.logger.warn({ dir: this.opts.kubeconfigDir }, 'no kubeconfig files yet; clusters are picked up as files appear');
    }
    const resyncMs = this.opts.resyncMs ?? Math.max(1000, ((this.opts.leaseTtlSeconds ?? 15) * 1000) / 3);
    this.resyncTimer = setInterval(() => this.schedule(), resyncMs);
    this.watchDeletes();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.directory.stop();
    clearInterval(this.resyncTimer);
    clearTimeout(this.passTimer);
    this.closeDeleteWatch();
    // A pass blocked on an unreachable etcd must not hold the stop: wait for
    // it a little, then closing the publisher abandons it.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.running?.catch(() => undefined), new Promise((r) => { timer = setTimeout(r, STOP_WAIT_MS); })]);
    clearTimeout(timer);
    for (const c of this.clusters.values()) await c.stop();
    this.clusters.clear();
    this.publisher.close();
  }

  status(): { clusters: ClusterStatus[]; passes: number; lastResult?: PublishResult; lastError?: string } {
    return {
      clusters: [...this.clusters.values()].map((c) => ({ file: c.file, context: c.context, server: c.server, clusterId: c.clusterId(), synced: c.synced() })),
      passes: this.passes,
      lastResult: this.lastResult,
      lastError: this.lastError,
    };
  }

  /** Resolves once every watched cluster has been listed and a pass started after that has succeeded. */
  async flushed(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (![...this.clusters.values()].every((c) => c.synced())) {
      if (Date.now() > deadline) throw new Error(`ip tracker: not every cluster was listed within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const target = this.passes + (this.running ? 2 : 1);
    this.schedule(0);
    while (this.passes < target) {
      if (Date.now() > deadline) throw new Error(`ip tracker: no successful pass within ${timeoutMs} ms (last error: ${this.lastError ?? 'none'})`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  // ---- clusters ----

  private background(work: Promise<void>, file: string): void {
    work.catch((err) => this.logger.error({ file, err: (err as Error).message }, 'changing the watched clusters failed'));
  }

  private async addCluster(entry: KubeconfigFile): Promise<void> {
    let watch: ClusterWatch;
    try {
      watch = new ClusterWatch({
        file: entry.file,
        text: entry.text,
        clusterIds: this.opts.clusterIds ?? new Map(),
        logger: this.logger,
        onChange: () => this.schedule(),
        backoff: this.opts.kubernetesBackoff,
      });
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'KWP_ERR_KUBECONFIG';
      this.logger.error({ file: entry.file, code }, `${code}: ${(err as Error).message}; the other clusters go on`);
      return;
    }
    this.clusters.set(entry.file, watch);
    this.logger.info({ file: entry.file, context: watch.context, server: watch.server }, 'watching cluster');
    await watch.start();
  }

  private async replaceCluster(entry: KubeconfigFile): Promise<void> {
    await this.removeCluster(entry.file);
    await this.addCluster(entry);
  }

  private async removeCluster(file: string): Promise<void> {
    const watch = this.clusters.get(file);
    if (!watch) return;
    this.clusters.delete(file);
    const id = watch.clusterId();
    await watch.stop();
    if (id !== undefined) this.purging.add(id);
    this.logger.info({ file, context: watch.context, clusterId: id }, 'kubeconfig removed; deleting that cluster\'s records');
    this.schedule();
  }

  // ---- passes ----

  private schedule(delayMs = this.opts.coalesceMs ?? 50): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.passTimer) {
      if (delayMs > 0) return;
      clearTimeout(this.passTimer);
    }
    this.passTimer = setTimeout(() => {
      this.passTimer = undefined;
      this.running = this.pass().finally(() => {
        this.running = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          this.schedule();
        }
      });
    }, delayMs);
  }

  private async pass(): Promise<void> {
    const desired = new Map<string, string>();
    const authoritative = new Set<string>();
    for (const watch of this.clusters.values()) {
      for (const [key, value] of watch.records(this.prefix)) desired.set(key, value);
      if (watch.synced()) authoritative.add(watch.clusterId()!);
    }
    const purged = [...this.purging].filter((id) => !authoritative.has(id) && ![...this.clusters.values()].some((c) => c.clusterId() === id));
    for (const id of purged) authoritative.add(id);
    try {
      this.lastResult = await this.publisher.publish({ desired, authoritative });
      for (const id of purged) this.purging.delete(id);
      this.passes++;
      this.failures = 0;
      this.lastError = undefined;
      if (this.lastResult.put || this.lastResult.deleted) this.logger.debug({ ...this.lastResult, keys: desired.size }, 'published');
    } catch (err) {
      this.lastError = (err as Error).message;
      const delay = backoffDelay(this.failures++, this.backoff);
      this.logger.warn({ err: this.lastError, retryInMs: delay }, 'publishing to etcd failed; retrying');
      if (!this.stopped) setTimeout(() => this.schedule(0), delay).unref?.();
    }
  }

  /** A deleted key may be one a dead replica's lease took along: a pass writes it back if it is still wanted. */
  private watchDeletes(): void {
    void openEtcd(this.opts.endpoints).then((client) => {
      // stop() may have run while etcd3 was loading: nothing would close this client then.
      if (this.stopped) { client.close(); return undefined; }
      this.deleteWatchClient = client;
      return client.watch().prefix(this.prefix).create();
    }).then((watcher) => {
      if (!watcher) return;
      if (this.stopped) { void watcher.cancel().catch(() => undefined); return; }
      this.deleteWatcher = watcher;
      watcher.on('delete', () => this.schedule());
      watcher.on('connected', () => this.schedule());
      watcher.on('error', () => undefined);
    }, (err) => {
      this.logger.warn({ err: (err as Error).message }, 'cannot watch the prefix for deletes yet; periodic passes cover it');
      if (!this.stopped) setTimeout(() => { this.closeDeleteWatch(); if (!this.stopped) this.watchDeletes(); }, 2000).unref?.();
    });
  }

  private closeDeleteWatch(): void {
    this.deleteWatcher?.removeAllListeners();
    this.deleteWatcher = undefined;
    try {
      this.deleteWatchClient?.close();
    } catch {
      // already closed
    }
    this.deleteWatchClient = undefined;
  }
}
