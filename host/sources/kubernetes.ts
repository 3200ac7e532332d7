// The Kubernetes API server as an object source: one list-then-watch informer
// per kind, all writing into the same sink. Readiness means "every kind has
// been fully listed once and none has been out of sync for longer than the
// grace period", so a node that lost its API server keeps enforcing the last
// known state but stops claiming to be current.

import { existsSync } from 'node:fs';
// KubeConfig without the package's index, which loads the whole generated API (see narrow-client.ts).
import { KubeConfig } from './kubernetes/narrow-client.js';
import type { KindKey, ObjectSink, ObjectSource } from '../contract.js';
import { KwpError } from '../errors.js';
import type { BackoffOptions } from './kubernetes/backoff.js';
import { KindInformer, type KindStatus } from './kubernetes/kind-informer.js';
import { defaultWatchedKinds, parseKindKey } from './kubernetes/resources.js';
import { silentLogger, type HostLogger } from '../logger.js';

export { defaultWatchedKinds } from './kubernetes/resources.js';
export type { KindStatus } from './kubernetes/kind-informer.js';

export interface KubernetesSourceOptions {
  /** Path of a kubeconfig file; the in-cluster service-account config when absent. */
  kubeconfig?: string;
  /** An already-loaded KubeConfig (multicluster, tests); wins over `kubeconfig`. */
  kubeConfig?: KubeConfig;
  /** Kinds to watch; `defaultWatchedKinds` when absent. */
  kinds?: readonly KindKey[];
  /** This node's name; only identifies the agent in logs. Every pod, node and policy is watched cluster-wide. */
  nodeName?: string;
  logger?: HostLogger;
  /** Reconnect delays; default 500 ms doubling up to 30 s. */
  backoff?: BackoffOptions;
  /** How long sync may be lost before `ready()` turns false; default 120 s. */
  readinessGraceMs?: number;
  /** How often a kind whose CRD is not installed is checked again; default 30 s. */
  missingKindRecheckMs?: number;
  /** Asks the server to end each watch after this long (then it is resumed); default 300 s. */
  watchTimeoutSeconds?: number;
  /** Objects per list page; default 500. */
  listPageSize?: number;
  /** The source's name in logs and status; default `kubernetes`. */
  name?: string;
}

/** Loads the kubeconfig the way the agent's `--kubeconfig` flag means it. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) {
    if (!existsSync(file)) throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${file} does not exist; pass --kubeconfig with a readable file`);
    try {
      kc.loadFromFile(file);
    } catch (err) {
      throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${file} could not be loaded: ${(err as Error).message}`, { cause: err });
    }
  } else {
    if (!process.env.KUBERNETES_SERVICE_HOST || !process.env.KUBERNETES_SERVICE_PORT) {
      throw new KwpError('KWP_ERR_KUBECONFIG', 'not running in a pod (KUBERNETES_SERVICE_HOST/PORT are unset) and no --kubeconfig given; pass --kubeconfig FILE');
    }
    kc.loadFromCluster();
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${file ?? '(in-cluster)'} has no current context with a cluster; set current-context`);
  return kc;
}

export class KubernetesSource implements ObjectSource {
  readonly name: string;
  readonly kinds: readonly KindKey[];
  private readonly opts: KubernetesSourceOptions;
  private readonly logger: HostLogger;
  private readonly readinessGraceMs: number;
  private informers: KindInformer[] = [];

  constructor(opts: KubernetesSourceOptions = {}) {
    this.opts = opts;
    this.name = opts.name ?? 'kubernetes';
    this.kinds = [...new Set(opts.kinds ?? defaultWatchedKinds)];
    for (const kind of this.kinds) {
      try {
        parseKindKey(kind);
      } catch (err) {
        throw new KwpError('KWP_ERR_USAGE', (err as Error).message);
      }
    }
    this.logger = opts.logger ?? silentLogger;
    this.readinessGraceMs = opts.readinessGraceMs ?? 120_000;
  }

  /** Loads the kubeconfig and starts every informer; resolves without waiting for the first sync (see `ready()`). */
  async start(sink: ObjectSink): Promise<void> {
    if (this.informers.length > 0) throw new Error(`source ${this.name} is already started`);
    const kubeConfig = this.opts.kubeConfig ?? loadKubeConfig(this.opts.kubeconfig);
    const server = kubeConfig.getCurrentCluster()?.server;
    this.logger.info({ source: this.name, server, node: this.opts.nodeName, kinds: this.kinds }, 'watching the API server');
    this.informers = this.kinds.map(
      (kind) =>
        new KindInformer(kind, {
          kubeConfig,
          sink,
          logger: this.logger,
          backoff: this.opts.backoff ?? { initialMs: 500, maxMs: 30_000 },
          missingKindRecheckMs: this.opts.missingKindRecheckMs ?? 30_000,
          watchTimeoutSeconds: this.opts.watchTimeoutSeconds ?? 300,
          listPageSize: this.opts.listPageSize ?? 500,
        }),
    );
    for (const informer of this.informers) informer.start();
  }

  async stop(): Promise<void> {
    for (const informer of this.informers) informer.stop();
    this.informers = [];
  }

  /** Every kind has delivered its first full snapshot (a missing CRD counts as an empty one). Never turns false again. */
  synced(): boolean {
    return this.informers.length > 0 && this.informers.every((i) => i.isSynced());
  }

  /** 0 while every kind is in sync; otherwise ms since the longest-lost kind was last in sync (or since start). */
  lastSyncAgeMs(): number {
    return Math.max(0, ...this.informers.map((i) => i.syncAgeMs()));
  }

  /** Synced once, and not out of sync for longer than `readinessGraceMs`. */
  ready(): boolean {
    return this.synced() && this.lastSyncAgeMs() <= this.readinessGraceMs;
  }

  /** Per-kind state for the admin API and `kwp status`. */
  status(): KindStatus[] {
    return this.informers.map((i) => i.status());
  }

  /** Resolves true once `ready()`, false after `timeoutMs`. */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ready()) {
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now()))));
    }
    return true;
  }
}
