// The node agent, wired in one place from the public API (./index.js) and
// nothing else, so an embedder can build the same thing: sources feed the
// cluster state, the state feeds every stage of the policy engine, the
// dataplane asks the engine about each new connection, and the admin API
// changes the engine's pipeline through the controller.
import {
  AdminMetrics, ClusterState, FleetWiring, KubernetesSource, KwpError, ManifestSource, ModuleStore, PipelineController, PolicyEngine,
  BuiltinModules, ChainedModules, Dataplane, createAdminServer, createLogger, defaultPipeline, expireResolvedNamesPeriodically,
  instanceLogger, loadAdminToken, loadTrustedKeys, marksAt, readPipelineFile, ensureStateDir, loadNfqueue,
  type AdminServer, type AutoRollbackOptions, type SandboxLimits, type StageIsolation, type DataplaneOptions, type FleetConfig, type Logger, type ModuleResolver, type ObjectSource, type PipelineSpec,
  endpointAddressesOf,
} from './index.js';

export interface AgentConfig {
  /** Manifest files or directories, watched for edits. */
  manifests?: string[];
  /** Kubeconfig file; with `inCluster`, the service account instead. */
  kubeconfig?: string;
  inCluster?: boolean;
  nodeName?: string;
  /** Pipeline file; the default pipeline when absent. */
  pipelineFile?: string;
  verbosity?: number;
  /** Enforce through NFQUEUE (root); false keeps state and the admin API only. */
  dataplane?: boolean;
  failOpen?: boolean;
  strict?: boolean;
  tableName?: string;
  queueId?: number;
  dnsQueueId?: number;
  /** Lowest mark bit of the four the dataplane uses; distinct per agent on a node. */
  markBits?: number;
  /** Nice value (-20..19) for the packet thread; unset leaves it alone (see DataplaneOptions.packetThreadNice). */
  packetThreadNice?: number;
  /** Uploaded modules and the active pipeline persist here; without it nothing persists and uploads are refused. */
  stateDir?: string;
  /** `host:port` of the admin API; absent or empty for none. */
  adminAddress?: string;
  adminTokenFile?: string;
  adminReadsOpen?: boolean;
  /** ed25519 public keys (PEM files); when given, uploads must be signed by one of them. */
  trustedKeyFiles?: string[];
  autoRollback?: AutoRollbackOptions;
  /** The sandbox limits (docs/sandbox.md); defaults for any not given. */
  limits?: Partial<SandboxLimits>;
  /**
   * Where stages run their module instances: `worker` (default), each in a
   * thread of its own that is stopped when a call overruns its deadline
   * (docs/sandbox.md, "The wall-clock backstop"); `thread`, in the main
   * thread, bounded by fuel alone.
   */
  isolation?: StageIsolation;
  logger?: Logger;
  /** Extra module resolvers tried after the module store and before the built-ins. */
  modules?: ModuleResolver[];
  /** More sources (e.g. the multicluster IP tracker), started after the built-in ones. */
  extraSources?: ObjectSource[];
  /** The fleet (docs/fleet.md): a node by default when there is an API server and a node name. */
  fleet?: FleetConfig;
}

/** The Dataplane settings an agent configuration asks for; the Agent adds its logger and DNS hook. */
export function dataplaneSettings(config: AgentConfig): Omit<DataplaneOptions, 'logger' | 'onDnsAnswer'> {
  return {
    tableName: config.tableName ?? 'kube-wasm-policies',
    queueId: config.queueId ?? 100,
    dnsQueueId: config.dnsQueueId ?? 101,
    failOpen: config.failOpen ?? true,
    strict: config.strict ?? true,
    ...(config.markBits !== undefined ? { marks: marksAt(config.markBits) } : {}),
    ...(config.packetThreadNice !== undefined ? { packetThreadNice: config.packetThreadNice } : {}),
  };
}

export function loadPipelineFile(file: string | undefined, verbose: boolean): PipelineSpec {
  return file ? readPipelineFile(file) : defaultPipeline({ verbose });
}

function splitAddress(address: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) throw new KwpError('KWP_ERR_USAGE', `kwp agent: --admin-address must be HOST:PORT, got "${address}"`);
  return { host: m[1] || '127.0.0.1', port };
}

export class Agent {
  readonly log: Logger;
  readonly state: ClusterState;
  readonly engine: PolicyEngine;
  readonly sources: ObjectSource[] = [];
  readonly store: ModuleStore | undefined;
  controller: PipelineController | undefined;
  admin: AdminServer | undefined;
  adminUrl: string | undefined;
  dataplane: Dataplane | undefined;
  readonly fleet: FleetWiring | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private stopDnsExpiry: (() => void) | undefined;
  private unsubscribeState: (() => void) | undefined;
  private stopping = false;

  constructor(readonly config: AgentConfig) {
    this.log = config.logger ?? createLogger(config.verbosity ?? 0);
    this.state = new ClusterState();
    const ilog = instanceLogger(this.log);
    const builtins = new BuiltinModules(config.limits);
    this.fleet = FleetWiring.for(config.fleet, config);
    if (config.stateDir) {
      ensureStateDir(config.stateDir);
      const storeOptions = {
        stateDir: config.stateDir, trustedKeys: loadTrustedKeys(config.trustedKeyFiles ?? []), logger: ilog, limits: config.limits, reservedNames: builtins.names(),
      };
      this.store = this.fleet ? this.fleet.createStore(storeOptions) : new ModuleStore(storeOptions);
    }
    const resolvers: ModuleResolver[] = [...(this.store ? [this.store] : []), ...(config.modules ?? []), builtins];
    this.engine = new PolicyEngine({ state: this.state, modules: new ChainedModules(resolvers), logger: ilog, limits: config.limits, isolation: config.isolation ?? 'worker' });
    if (config.manifests?.length) {
      this.sources.push(new ManifestSource(config.manifests, {
        watch: true,
        onWarning: (m) => this.log.warn({ source: 'manifests' }, m),
        onError: (e) => this.log.error({ source: 'manifests', code: e.code }, `${e.message}; keeping the last good state`),
        onReload: () => this.log.info({ source: 'manifests' }, 'manifests reloaded'),
      }));
    }
    if (config.kubeconfig || config.inCluster) {
      this.sources.push(new KubernetesSource({ kubeconfig: config.kubeconfig, nodeName: config.nodeName, logger: this.log.child({ source: 'kubernetes' }) }));
    }
    this.sources.push(...(config.extraSources ?? []));
  }

  /** True once every source has delivered its first full snapshot. */
  ready(): boolean {
    return this.sources.every((s) => s.ready());
  }

  /**
   * Starts every part, or none: on any error what was started is stopped
   * again before the error is thrown, so a failed start leaves no half-started
   * agent (no open admin port, no rules without a pipeline behind them).
   */
  async start(pipeline?: PipelineSpec): Promise<void> {
    try {
      await this.startParts(pipeline);
    } catch (err) {
      await this.stop().catch((stopErr) => this.log.error({ err: stopErr }, 'stopping after a failed start failed'));
      throw err;
    }
  }

  private async startParts(pipeline?: PipelineSpec): Promise<void> {
    if (this.sources.length === 0) {
      throw new KwpError('KWP_ERR_USAGE', 'kwp agent: no source of objects; pass --manifests DIR, --kubeconfig FILE, or run in a cluster');
    }
    // What can be checked before anything starts is checked first.
    if (this.config.adminAddress && !this.store) throw new KwpError('KWP_ERR_USAGE', 'kwp agent: the admin API needs --state-dir for uploaded modules and the pipeline it changes');
    const token = this.config.adminAddress ? loadAdminToken({ file: this.config.adminTokenFile }) : undefined;
    if (this.config.dataplane) loadNfqueue();
    const fallback = pipeline ?? loadPipelineFile(this.config.pipelineFile, (this.config.verbosity ?? 0) > 0);
    const controllerOptions = {
      engine: this.engine, fallback, stateDir: this.config.stateDir, logger: instanceLogger(this.log), autoRollback: this.config.autoRollback,
    };
    const controller = this.fleet ? this.fleet.createController(controllerOptions) : new PipelineController(controllerOptions);
    this.controller = controller;
    this.store?.setUsage(() => controller.moduleUsage());
    const metrics = new AdminMetrics({ controller, store: this.store, dataplane: () => this.dataplane });
    controller.start();
    if (controller.startupProblem) this.log.error({ code: controller.startupProblem.code }, controller.startupProblem.message);
    for (const s of this.sources) await s.start(this.state);
    if (this.config.dataplane) await this.startDataplane();
    if (this.config.adminAddress && this.store) {
      const { host, port } = splitAddress(this.config.adminAddress);
      this.admin = await createAdminServer({
        store: this.store, controller, engine: this.engine, metrics,
        token, readsOpen: this.config.adminReadsOpen ?? false,
        ready: () => this.ready(), host, port,
        // Warnings and errors only (every 5xx, with its request id): request lines would drown the agent's log.
        logger: this.log.child({ part: 'admin-api' }, { level: 'warn' }),
        dialledEndpoints: async (query) => (this.dataplane ? this.dataplane.dialledEndpoints(query) : []),
      });
      this.adminUrl = await this.admin.listen();
      this.log.info({ url: this.adminUrl }, 'admin API listening');
    }
    await this.fleet?.start({
      controller, engine: this.engine, store: this.store, registry: metrics.registry, ready: () => this.ready(), nodeName: this.config.nodeName, logger: this.log.child({ part: 'fleet' }),
    });
    this.log.info({ revision: this.engine.active.revision, stages: this.engine.active.spec.stages.map((s) => s.name), ready: this.ready() }, 'agent started');
  }

  private async startDataplane(): Promise<void> {
    const dp = new Dataplane({
      ...dataplaneSettings(this.config),
      logger: this.log.child({ part: 'dataplane' }),
      onDnsAnswer: (name, address, ttl) => {
        this.state.recordResolvedName(name, address, ttl);
        // A Service name answers with its ClusterIP; policies see its endpoints.
        for (const endpoint of endpointAddressesOf(this.state, address)) this.state.recordResolvedName(name, endpoint, ttl);
      },
    });
    await dp.start(this.engine);
    this.dataplane = dp;
    // Policy or pod changes move what must be queued and, in strict mode, which
    // established connections must be cut: coalesce bursts into one refresh.
    const schedule = () => {
      if (this.refreshTimer || this.stopping) return;
      this.refreshTimer = setTimeout(() => {
        this.refreshTimer = undefined;
        dp.refresh().catch((err) => this.log.error({ err }, 'dataplane refresh failed'));
      }, 50);
    };
    this.unsubscribeState = this.state.subscribe({ podUpserted: schedule, podDeleted: schedule, objectsReplaced: schedule, objectApplied: schedule });
    this.engine.onActivate = schedule;
    this.stopDnsExpiry = expireResolvedNamesPeriodically(this.state, 1000);
  }

  /** Admin API first (in-flight requests finish), then the dataplane in its configured fail mode, then the sources. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    // A pipeline build in progress would otherwise hold admin.close() until it
    // activated, only for stop() to dispose it moments later.
    await this.fleet?.stop();
    this.controller?.stopChanges();
    await this.admin?.close();
    clearTimeout(this.refreshTimer);
    this.stopDnsExpiry?.();
    this.unsubscribeState?.();
    if (this.dataplane) await this.dataplane.stop();
    for (const s of this.sources) await s.stop();
    await this.store?.close();
    this.controller?.stop();
    this.log.info({}, 'agent stopped');
  }
}
