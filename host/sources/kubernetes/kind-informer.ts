// List-then-watch for one kind, with the recovery rules the agent needs: a
// missing CRD is waited for, 410 Gone means relist, anything else means retry
// with backoff from the last resourceVersion. The sink only ever gets a full
// `replace` from a successful list — never an empty one because of an error —
// so the last known state survives an unreachable API server.
//
// client-node's ListWatch informer gives up on the first error and hides 410s
// inside its own cache; this keeps the same building block (its Watch class,
// real HTTP) but owns the retry loop.

// Watch's own module, not the package's index (see narrow-client.ts).
import { Watch } from '@kubernetes/client-node/dist/watch.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KindKey, KubeObject, ObjectSink } from '../../contract.js';
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { getJson } from './request.js';
import { collectionPath, groupVersionPath, knownResource, parseKindKey, type ResourceRef } from './resources.js';
import type { HostLogger } from '../../logger.js';


export type InformerState = 'idle' | 'listing' | 'watching' | 'missing' | 'retrying' | 'stopped';

export interface KindStatus {
  kind: KindKey;
  state: InformerState;
  /** The first full snapshot (or "CRD not installed") has been delivered. */
  synced: boolean;
  /** False while the CRD is not installed. */
  installed: boolean;
  resourceVersion: string;
  /** 0 while in sync; otherwise how long since it last was (or since start). */
  syncAgeMs: number;
  lastError?: string;
}

export interface KindInformerOptions {
  kubeConfig: KubeConfig;
  sink: ObjectSink;
  logger: HostLogger;
  backoff: BackoffOptions;
  missingKindRecheckMs: number;
  watchTimeoutSeconds: number;
  /** Objects per list page; large clusters are listed in pages of this size. */
  listPageSize: number;
  now?: () => number;
}

/** A watch that lasted this long or carried an event counts as healthy and resets the backoff. */
const HEALTHY_WATCH_MS = 1000;

export class KindInformer {
  private state: InformerState = 'idle';
  private synced = false;
  private installed = true;
  private resourceVersion = '';
  private lostSince: number | undefined;
  private lastError: string | undefined;
  private attempt = 0;
  private failing = false;
  private lastExpiredAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private listAbort: AbortController | undefined;
  private watchAbort: AbortController | undefined;
  private readonly watch: Watch;
  private readonly now: () => number;

  constructor(
    readonly kind: KindKey,
    private readonly opts: KindInformerOptions,
  ) {
    parseKindKey(kind);
    this.watch = new Watch(opts.kubeConfig);
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    this.lostSince = this.now();
    void this.listAndWatch();
  }

  stop(): void {
    this.state = 'stopped';
    clearTimeout(this.timer);
    this.listAbort?.abort();
    this.watchAbort?.abort();
  }

  status(): KindStatus {
    return {
      kind: this.kind,
      state: this.state,
      synced: this.synced,
      installed: this.installed,
      resourceVersion: this.resourceVersion,
      syncAgeMs: this.syncAgeMs(),
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  isSynced(): boolean {
    return this.synced;
  }

  syncAgeMs(): number {
    return this.lostSince === undefined ? 0 : this.now() - this.lostSince;
  }

  private get stopped(): boolean {
    return this.state === 'stopped';
  }

  private log(): HostLogger {
    return this.opts.logger;
  }

  private schedule(step: () => Promise<void> | void, delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void step(), delayMs);
  }

  private markInSync(): void {
    if (this.failing) this.log().info({ kind: this.kind, attempts: this.attempt }, 'API server reachable again');
    this.failing = false;
    this.lostSince = undefined;
    this.lastError = undefined;
  }

  private retry(err: unknown, during: string, next: () => Promise<void> | void): void {
    if (this.stopped) return;
    this.lostSince ??= this.now();
    const message = err instanceof Error ? err.message : String(err);
    this.lastError = `${during}: ${message}`;
    const delayMs = backoffDelay(this.attempt, this.opts.backoff);
    this.attempt += 1;
    const hint = (err as { statusCode?: number }).statusCode === 403 ? 'the service account lacks list/watch on this kind (see the ClusterRole from kwp manifests)' : undefined;
    const fields = { kind: this.kind, during, err: message, retryInMs: delayMs, attempt: this.attempt, ...(hint ? { hint } : {}) };
    // The first failure of a streak is worth a warning; the retries after it are noise.
    if (!this.failing) this.log().warn(fields, 'lost sync with the API server; keeping the last known objects');
    else this.log().debug(fields, 'still failing');
    this.failing = true;
    this.state = 'retrying';
    this.schedule(next, delayMs);
  }

  /** The kind's resource, or undefined when the API server does not serve it (CRD not installed). */
  private async resolve(signal: AbortSignal): Promise<ResourceRef | undefined> {
    const known = knownResource(this.kind);
    if (known) return known;
    const { group, version, kindName } = parseKindKey(this.kind);
    let list: any;
    try {
      list = await getJson(this.opts.kubeConfig, groupVersionPath(group, version), signal);
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw err;
    }
    const found = (list?.resources ?? []).find((r: any) => r.kind === kindName && typeof r.name === 'string' && !r.name.includes('/'));
    return found ? { kind: this.kind, group, version, kindName, plural: found.name, namespaced: Boolean(found.namespaced) } : undefined;
  }

  private async listAndWatch(): Promise<void> {
    if (this.stopped) return;
    this.state = 'listing';
    const abort = new AbortController();
    this.listAbort = abort;
    try {
      const ref = await this.resolve(abort.signal);
      if (this.stopped) return;
      if (!ref) return this.onMissing();
      const list = await this.listAll(ref, abort.signal);
      if (this.stopped) return;
      const items = list.items;
      if (!this.installed) this.log().info({ kind: this.kind }, 'CRD is now installed; watching it');
      this.installed = true;
      this.opts.sink.replace(this.kind, items);
      this.resourceVersion = list.resourceVersion;
      this.synced = true;
      this.markInSync();
      this.log().debug({ kind: this.kind, objects: items.length, resourceVersion: this.resourceVersion }, 'listed');
      void this.watchFrom(ref);
    } catch (err) {
      if (this.stopped) return;
      const status = (err as { statusCode?: number }).statusCode;
      if (status === 404) return this.onMissing();
      // A continue token outlived the server's history: the list starts over.
      if (status === 410) return this.onExpired(() => this.listAndWatch());
      this.retry(err, 'list', () => this.listAndWatch());
    } finally {
      if (this.listAbort === abort) this.listAbort = undefined;
    }
  }

  /**
   * Every page of a list, normalized page by page (at 100,000 objects, doing
   * it all once the last page came held the main thread for a few hundred ms);
   * all pages share the first page's resourceVersion.
   */
  private async listAll(ref: ResourceRef, signal: AbortSignal): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    const items: KubeObject[] = [];
    let resourceVersion: string | undefined;
    let token: string | undefined;
    do {
      const query = new URLSearchParams({ limit: String(this.opts.listPageSize) });
      if (token) query.set('continue', token);
      const page = await getJson(this.opts.kubeConfig, `${collectionPath(ref)}?${query}`, signal);
      // A loop, not push(...items): a server that ignores `limit` may send more items than a call takes arguments.
      for (const item of page.items ?? []) items.push(normalize(item, ref));
      resourceVersion ??= String(page.metadata?.resourceVersion ?? '');
      token = page.metadata?.continue || undefined;
    } while (token && !this.stopped);
    return { items, resourceVersion: resourceVersion ?? '' };
  }

  /** One expiry is routine (compaction, a restarted server); expiries back to back mean something is wrong. */
  private onExpired(next: () => Promise<void>): void {
    this.log().info({ kind: this.kind, resourceVersion: this.resourceVersion }, 'resourceVersion expired; relisting');
    this.resourceVersion = '';
    const routine = this.lastExpiredAt === undefined || this.now() - this.lastExpiredAt > this.opts.backoff.initialMs;
    this.lastExpiredAt = this.now();
    if (routine) return this.schedule(next, 0);
    this.retry(new Error('410 Gone twice in a row'), 'list', next);
  }

  private onMissing(): void {
    if (this.installed) {
      // Not served means no objects: an empty snapshot, whether the CRD never was installed or was just removed.
      if (this.synced) this.log().warn({ kind: this.kind }, 'CRD was removed; dropping its objects');
      else this.log().info({ kind: this.kind, recheckMs: this.opts.missingKindRecheckMs }, 'CRD not installed; will start watching when it appears');
      this.opts.sink.replace(this.kind, []);
    }
    this.installed = false;
    this.synced = true;
    this.resourceVersion = '';
    this.attempt = 0;
    this.markInSync();
    this.state = 'missing';
    this.schedule(() => this.listAndWatch(), this.opts.missingKindRecheckMs);
  }

  private async watchFrom(ref: ResourceRef): Promise<void> {
    if (this.stopped) return;
    this.state = 'watching';
    let finished = false;
    let relist = false;
    let events = 0;
    let connectedAt: number | undefined;
    let controller: AbortController | undefined;
    const abortWatch = () => controller?.abort();

    const onEvent = (type: string, obj: any) => {
      if (finished || this.stopped) return;
      if (type !== 'ERROR') events += 1;
      switch (type) {
        case 'ADDED':
        case 'MODIFIED':
          this.opts.sink.apply(this.kind, { type: 'upsert', object: normalize(obj, ref) });
          break;
        case 'DELETED':
          this.opts.sink.apply(this.kind, { type: 'delete', object: normalize(obj, ref) });
          break;
        case 'BOOKMARK':
          break;
        case 'ERROR':
          // Only Status objects arrive as ERROR; 410 means our resourceVersion was compacted away.
          if (obj?.code === 410) relist = true;
          else this.lastError = `watch: ${obj?.message ?? 'error event'}`;
          abortWatch();
          return;
        default:
          return;
      }
      const rv = obj?.metadata?.resourceVersion;
      if (rv) this.resourceVersion = String(rv);
    };

    const onDone = (err: any) => {
      if (finished) return;
      finished = true;
      if (this.watchAbort === controller) this.watchAbort = undefined;
      if (this.stopped) return;
      const healthy = connectedAt !== undefined && (events > 0 || this.now() - connectedAt >= HEALTHY_WATCH_MS);
      if (healthy) this.attempt = 0;
      const status = err?.statusCode ?? err?.code;
      if (relist || status === 410) return this.onExpired(() => this.listAndWatch());
      if (status === 404) {
        // The resource went away (its CRD was removed): the list says whether for good. Not a lost sync.
        const delayMs = healthy ? 0 : backoffDelay(this.attempt++, this.opts.backoff);
        this.log().debug({ kind: this.kind, retryInMs: delayMs }, 'watch answered 404; listing again');
        return this.schedule(() => this.listAndWatch(), delayMs);
      }
      if (err && err.name !== 'AbortError') return this.retry(err, 'watch', () => this.watchFrom(ref));
      if (err) return this.retry(new Error(this.lastError ?? 'watch aborted'), 'watch', () => this.watchFrom(ref));
      // A clean end (the server's timeoutSeconds, a graceful shutdown): pick up where we were.
      if (healthy) return this.schedule(() => this.watchFrom(ref), 0);
      this.retry(new Error('watch closed immediately'), 'watch', () => this.watchFrom(ref));
    };

    try {
      controller = await this.watch.watch(
        collectionPath(ref),
        { resourceVersion: this.resourceVersion || undefined, allowWatchBookmarks: true, timeoutSeconds: this.opts.watchTimeoutSeconds },
        onEvent,
        onDone,
      );
    } catch (err) {
      return onDone(err);
    }
    if (finished) return;
    if (this.stopped) return void controller.abort();
    this.watchAbort = controller;
    if (relist) return void controller.abort();
    connectedAt = this.now();
    this.markInSync();
  }
}

/** The JSON shape every source delivers: apiVersion/kind set (list items lack them), managedFields gone. */
export function normalize(obj: any, ref: Pick<ResourceRef, 'group' | 'version' | 'kindName'>): KubeObject {
  const apiVersion = ref.group === '' ? ref.version : `${ref.group}/${ref.version}`;
  const { apiVersion: _a, kind: _k, metadata, ...rest } = obj ?? {};
  const { managedFields: _m, ...meta } = metadata ?? {};
  return { apiVersion, kind: ref.kindName, metadata: meta, ...rest } as KubeObject;
}
