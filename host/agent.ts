// The node agent, wired in one place from the public API (./index.js) and
// nothing else, so an embedder can build the same thing: sources feed the
// cluster state, the state feeds every stage of the policy engine, the
// dataplane asks the engine about each new connection, and the admin API
// changes the engine's pipeline through the controller.
//
// The running agent is a plain ordered list of parts (`wire`), the way
// kube-network-policies' main.go lists its controllers: each part gets what
// it needs in its constructor or subscribes to the events it reacts to
// (ClusterState.subscribe, PolicyEngine.subscribe), so no part reaches into
// another's callbacks. Parts start in list order and stop in reverse order.
// Adding a part (a recorder of flows, say) is one entry in that list.
import {
  AdminMetrics, ClusterState, FleetWiring, KubernetesSource, KwpError, ManifestSource, ModuleStore, PipelineController, PolicyEngine,
  BuiltinModules, ChainedModules, Dataplane, createAdminServer, createLogger, defaultPipeline, expireResolvedNamesPeriodically,
  loadAdminToken, loadTrustedKeys, marksAt, readPipelineFile, ensureStateDir, loadNfqueue, refreshOnChange,
  DEFAULT_FAST_PATH, invalidateFastPathOnChange, registerFastPathMetrics,
  kubeSystemUid, loadKubeConfig, multiclusterPipeline, multiclusterSource,
  type AutoRollbackOptions, type SandboxLimits, type StageIsolation, type DataplaneOptions, type FleetConfig, type Logger, type ModuleResolver, type ObjectSource, type PipelineSpec,
  type AdminServer, type MulticlusterAgentConfig,
  endpointAddressesOf, ManifestRefusal, registerSourceMetrics, registerObjectRejectionMetrics, registerClusterStateMetrics, type SourceRefusal, FlowRecorder, FlowLogWriter,
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
  /**
   * The kernel fast path (docs/dataplane.md): on when absent or true (a
   * decided tuple stays 120 s in the kernel sets), or the seconds it stays;
   * off with false.
   */
  fastPath?: boolean | number;
  /** Test only: each fast-path invalidation reaches the kernel this many ms late (FastPathOptions.testFlushDelayMs). */
  fastPathTestFlushDelayMs?: number;
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
   * Where stages run their module instances: `thread` (default), in the
   * main thread, bounded by fuel alone; `worker` (`kwp agent
   * --module-threads`), each in a thread of its own that is stopped when a
   * call overruns its deadline (docs/sandbox.md, "The wall-clock backstop").
   * Not the default yet: the e2e suites saw verdicts change with it on a
   * loaded machine, not yet explained.
   */
  isolation?: StageIsolation;
  /**
   * Feed each new instance of a large state (500 pods and objects or more) in
   * a feed thread and make it from that instance's memory image, so a
   * stage's growth, rebuild or refeed runs no module call on the packet
   * path's thread (default true; docs/performance.md, "Feeding in a feed
   * thread"). Without it, the NetworkPolicy module's Synced step over
   * 100,000 policies is one call of seconds on the main thread.
   */
  feedThreads?: boolean;
  logger?: Logger;
  /** Extra module resolvers tried after the module store and before the built-ins. */
  modules?: ModuleResolver[];
  /** More sources, started after the built-in ones (and before the multicluster one). */
  extraSources?: ObjectSource[];
  /**
   * Multicluster mode (docs/multicluster.md): remote pods from the IP
   * tracker's etcd, and the multicluster NetworkPolicy stage in the pipeline.
   * Without a clusterId the agent derives it from the API server (the uid of
   * kube-system), as the IP tracker does.
   */
  multicluster?: Omit<MulticlusterAgentConfig, 'clusterId'> & { clusterId?: string };
  /** Flow recording (docs/flows.md); absent: off. */
  flows?: { ringSize?: number; intervalMs?: number; log?: string; logMaxBytes?: number };
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
    ...(config.fastPath === false ? {} : {
      fastPath: {
        ...DEFAULT_FAST_PATH,
        ...(typeof config.fastPath === 'number' ? { timeoutSeconds: config.fastPath } : {}),
        ...(config.fastPathTestFlushDelayMs ? { testFlushDelayMs: config.fastPathTestFlushDelayMs } : {}),
      },
    }),
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

/** One part of the running agent: started in the order of the list, stopped in reverse. */
interface AgentPart {
  readonly name: string;
  start?(): Promise<void> | void;
  /** Safe to call when start() never ran or failed: a failed start stops every part. */
  stop?(): Promise<void> | void;
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
  /** Set once the dataplane has started. */
  dataplane: Dataplane | undefined;
  /** The flow recorder, when config.flows asks for one. */
  flows: FlowRecorder | undefined;
  readonly fleet: FleetWiring | undefined;
  /** What stop() stops: the parts the constructor made until start() wires the rest. */
  private parts: AgentPart[];
  private stopping = false;

  constructor(readonly config: AgentConfig) {
    this.log = config.logger ?? createLogger(config.verbosity ?? 0);
    // Lists of thousands are taken in slices, so a relist does not hold the main thread (docs/sandbox.md, "State at cluster scale").
    this.state = new ClusterState({ sliceLargeLists: true, onError: (err) => this.log.error({ err }, 'a listener of the cluster state failed on a change taken after a sliced list') });
    const builtins = new BuiltinModules(config.limits);
    this.fleet = FleetWiring.for(config.fleet, config);
    if (config.stateDir) {
      ensureStateDir(config.stateDir);
      const storeOptions = {
        stateDir: config.stateDir, trustedKeys: loadTrustedKeys(config.trustedKeyFiles ?? []), logger: this.log, limits: config.limits, reservedNames: builtins.names(),
      };
      this.store = this.fleet ? this.fleet.createStore(storeOptions) : new ModuleStore(storeOptions);
    }
    const resolvers: ModuleResolver[] = [...(this.store ? [this.store] : []), ...(config.modules ?? []), builtins];
    this.engine = new PolicyEngine({ state: this.state, modules: new ChainedModules(resolvers), logger: this.log, limits: config.limits, isolation: config.isolation ?? 'thread', feedThreads: config.feedThreads ?? true });
    if (config.manifests?.length) {
      this.sources.push(new ManifestSource(config.manifests, {
        watch: true,
        onWarning: (m) => this.log.warn({ source: 'manifests' }, m),
        onError: (e) => this.log.error({ source: 'manifests', code: e.code, ...(e instanceof ManifestRefusal ? { files: e.files } : {}) }, `${e.message}; keeping the last good state`),
        onReload: () => this.log.info({ source: 'manifests' }, 'manifests reloaded'),
      }));
    }
    if (config.kubeconfig || config.inCluster) {
      this.sources.push(new KubernetesSource({ kubeconfig: config.kubeconfig, nodeName: config.nodeName, logger: this.log.child({ source: 'kubernetes' }) }));
    }
    this.sources.push(...(config.extraSources ?? []));
    this.parts = [this.storePart(), ...this.sources.map((s) => this.sourcePart(s))];
  }

  /** The sources refusing their current input (they keep the last good state). */
  refusals(): SourceRefusal[] {
    return this.sources.flatMap((s) => s.refusal?.() ?? []);
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
      this.parts = await this.wire(pipeline);
      for (const part of this.parts) await part.start?.();
    } catch (err) {
      await this.stop().catch((stopErr) => this.log.error({ err: stopErr }, 'stopping after a failed start failed'));
      throw err;
    }
    this.log.info({ revision: this.engine.active.revision, stages: this.engine.active.spec.stages.map((s) => s.name), ready: this.ready() }, 'agent started');
  }

  /**
   * Checks what can be checked before anything starts, makes every part, and
   * returns them in start order. Nothing is started here.
   */
  private async wire(pipeline: PipelineSpec | undefined): Promise<AgentPart[]> {
    const config = this.config;
    if (this.sources.length === 0 && !config.multicluster) {
      throw new KwpError('KWP_ERR_USAGE', 'kwp agent: no source of objects; pass --manifests DIR, --kubeconfig FILE, or run in a cluster');
    }
    if (config.adminAddress && !this.store) throw new KwpError('KWP_ERR_USAGE', 'kwp agent: the admin API needs --state-dir for uploaded modules and the pipeline it changes');
    const token = config.adminAddress ? loadAdminToken({ file: config.adminTokenFile }) : undefined;
    const admin = config.adminAddress ? splitAddress(config.adminAddress) : undefined;
    if (config.dataplane) loadNfqueue();
    let fallback = pipeline ?? loadPipelineFile(config.pipelineFile, (config.verbosity ?? 0) > 0);
    if (config.multicluster) {
      const mc = { ...config.multicluster, clusterId: config.multicluster.clusterId ?? await kubeSystemUid(loadKubeConfig(config.kubeconfig), 'kwp agent') };
      this.sources.push(multiclusterSource(mc, this.log.child({ source: 'ip-tracker' })));
      fallback = multiclusterPipeline(fallback, mc, pipeline === undefined && config.pipelineFile === undefined);
    }

    const controllerOptions = {
      engine: this.engine, fallback, stateDir: config.stateDir, logger: this.log, autoRollback: config.autoRollback, store: this.store,
    };
    const controller = this.fleet ? this.fleet.createController(controllerOptions) : new PipelineController(controllerOptions);
    this.controller = controller;
    const dataplane = config.dataplane ? new Dataplane({
      ...dataplaneSettings(config), logger: this.log.child({ part: 'dataplane' }), onDnsAnswer: (name, address, ttl) => this.recordDnsAnswer(name, address, ttl),
    }) : undefined;
    const flows = config.flows ? new FlowRecorder({
      state: this.state, node: config.nodeName ?? '', intervalMs: config.flows.intervalMs, ringSize: config.flows.ringSize,
      log: config.flows.log ? new FlowLogWriter({ target: config.flows.log, maxBytes: config.flows.logMaxBytes }) : undefined,
    }) : undefined;
    this.flows = flows;
    // Before the controller starts, so the startup swap is counted.
    const metrics = new AdminMetrics({ controller, store: this.store, dataplane, flows });
    registerSourceMetrics(metrics.registry, () => this.sources);
    registerClusterStateMetrics(metrics.registry, this.state);
    registerFastPathMetrics(metrics.registry, () => dataplane?.fastPath);
    registerObjectRejectionMetrics(metrics.registry, () => controller.livePipelines()[0]?.stages ?? []);

    return [
      this.pipelinePart(controller),
      // Stopped after the dataplane, so the last connections it decided are recorded too.
      ...(flows ? [{ name: 'flow recorder', start: () => flows.start(this.engine), stop: () => flows.stop() }] : []),
      this.storePart(),
      ...this.sources.map((s) => this.sourcePart(s)),
      ...(dataplane ? this.dataplaneParts(dataplane) : []),
      ...(admin && this.store ? [this.adminPart(admin, {
        store: this.store, controller, engine: this.engine, metrics,
        token, readsOpen: config.adminReadsOpen ?? false,
        ready: () => this.ready(), refusals: () => this.refusals(),
        dialledEndpoints: async (query) => (dataplane ? dataplane.dialledEndpoints(query) : []),
        ...(this.fleet?.statusReader ? { fleetStatus: this.fleet.statusReader } : {}),
        flows, recordedFlows: flows,
      })] : []),
      // Stopped before the admin API closes: a pipeline build in progress
      // would otherwise hold admin.close() until it activated, only for the
      // controller to dispose it moments later.
      { name: 'pipeline changes', stop: () => controller.stopChanges() },
      ...(this.fleet ? [this.fleetPart(this.fleet, controller, metrics)] : []),
    ];
  }

  // ---- the parts ----

  private pipelinePart(controller: PipelineController): AgentPart {
    return {
      name: 'pipeline',
      start: () => {
        controller.start();
        if (controller.startupProblem) this.log.error({ code: controller.startupProblem.code }, controller.startupProblem.message);
      },
      // After the dataplane stopped asking for decisions.
      stop: () => controller.stop(),
    };
  }

  private sourcePart(source: ObjectSource): AgentPart {
    return { name: `source ${source.name}`, start: () => source.start(this.state), stop: () => source.stop() };
  }

  private storePart(): AgentPart {
    return { name: 'module store', stop: () => this.store?.close() };
  }

  private dataplaneParts(dp: Dataplane): AgentPart[] {
    let stopRefresh: (() => void) | undefined;
    let stopExpiry: (() => void) | undefined;
    let stopInvalidation: (() => void) | undefined;
    const fastPath = dp.fastPath;
    return [
      // Before the dataplane starts, so no change between its start and this part's goes unseen.
      ...(fastPath ? [{
        name: 'fast path invalidation',
        start: () => { stopInvalidation = invalidateFastPathOnChange({ fastPath, state: this.state, engine: this.engine }); },
        stop: () => stopInvalidation?.(),
      }] : []),
      {
        name: 'dataplane',
        start: async () => { await dp.start(this.engine); this.dataplane = dp; },
        // In its configured fail mode.
        stop: () => dp.stop(),
      },
      { name: 'DNS name expiry', start: () => { stopExpiry = expireResolvedNamesPeriodically(this.state, 1000); }, stop: () => stopExpiry?.() },
      {
        name: 'dataplane refresh',
        start: () => {
          stopRefresh = refreshOnChange({
            dataplane: dp, state: this.state, engine: this.engine, delayMs: 50,
            onError: (err) => this.log.error({ err }, 'dataplane refresh failed'),
          });
        },
        stop: () => stopRefresh?.(),
      },
    ];
  }

  private adminPart(address: { host: string; port: number }, options: Omit<Parameters<typeof createAdminServer>[0], 'host' | 'port' | 'logger'>): AgentPart {
    return {
      name: 'admin API',
      start: async () => {
        this.admin = await createAdminServer({
          ...options, ...address,
          // Warnings and errors only (every 5xx, with its request id): request lines would drown the agent's log.
          logger: this.log.child({ part: 'admin-api' }, { level: 'warn' }),
        });
        this.adminUrl = await this.admin.listen();
        this.log.info({ url: this.adminUrl }, 'admin API listening');
      },
      // In-flight requests finish.
      stop: () => this.admin?.close(),
    };
  }

  private fleetPart(fleet: FleetWiring, controller: PipelineController, metrics: AdminMetrics): AgentPart {
    return {
      name: 'fleet',
      start: () => fleet.start({
        controller, engine: this.engine, store: this.store, registry: metrics.registry, ready: () => this.ready(), nodeName: this.config.nodeName, logger: this.log.child({ part: 'fleet' }),
      }),
      stop: () => fleet.stop(),
    };
  }

  /** A Service name answers with its ClusterIP; policies see its endpoints, so they are recorded under the name too. */
  private recordDnsAnswer(name: string, address: string, ttl: number): void {
    this.state.recordResolvedName(name, address, ttl);
    for (const endpoint of endpointAddressesOf(this.state, address)) this.state.recordResolvedName(name, endpoint, ttl);
  }

  /** Every part in reverse order: the fleet, the admin API (in-flight requests finish), the dataplane in its configured fail mode, the sources, the pipelines. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const part of [...this.parts].reverse()) await part.stop?.();
    this.log.info({}, 'agent stopped');
  }
}
