// The node agent, wired in one place: sources feed the cluster state, the
// state feeds every stage of the policy engine, the dataplane asks the engine
// about each new connection, and the admin API changes the engine's pipeline.
// Nothing registers itself anywhere; this file is the whole composition.
import { readFileSync } from 'node:fs';
import type { ObjectSource } from './contract.js';
import { KwpError } from './errors.js';
import { ClusterState } from './state/cluster-state.js';
import { PolicyEngine } from './pipeline/engine.js';
import { BuiltinModules, type ModuleResolver } from './pipeline/modules.js';
import { defaultPipeline, parsePipelineText, type PipelineSpec } from './pipeline/spec.js';
import { ManifestSource } from './sources/manifests.js';
import { createLogger, instanceLogger, type Logger } from './log.js';
import type { Dataplane } from './dataplane/dataplane.js';
import { expireResolvedNamesPeriodically } from './state/resolved-name-expiry.js';

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
  dataplane?: boolean;
  failOpen?: boolean;
  strict?: boolean;
  tableName?: string;
  queueId?: number;
  dnsQueueId?: number;
  /** Lowest mark bit of the four the dataplane uses; distinct per agent on a node. */
  markBits?: number;
  logger?: Logger;
  /** Extra module resolvers tried before the built-ins (the admin API's store). */
  modules?: ModuleResolver[];
  /** Multicluster (flat network): etcd endpoints of the IP tracker; remote pods resolve through them. */
  ipTrackerEtcd?: string[];
  /** The tracker's key prefix; `/kwp/ips/` when absent. */
  ipTrackerPrefix?: string;
  /** This cluster's id in the cluster set; required with `ipTrackerEtcd` (the CLI derives it when not given). */
  clusterId?: string;
}

export function loadPipelineFile(file: string | undefined, verbose: boolean): PipelineSpec {
  if (!file) return defaultPipeline({ verbose });
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KwpError('KWP_ERR_PIPELINE_INVALID', `${file}: cannot read the pipeline file: ${(err as Error).message}`);
  }
  return parsePipelineText(text, file);
}

export class Agent {
  readonly log: Logger;
  readonly state: ClusterState;
  readonly engine: PolicyEngine;
  readonly sources: ObjectSource[] = [];
  dataplane: Dataplane | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private stopDnsExpiry: (() => void) | undefined;
  private unsubscribeState: (() => void) | undefined;
  private stopping = false;

  constructor(readonly config: AgentConfig) {
    this.log = config.logger ?? createLogger(config.verbosity ?? 0);
    if (config.ipTrackerEtcd?.length && !config.clusterId) {
      throw new KwpError('KWP_ERR_USAGE', 'kwp agent: --ip-tracker-etcd needs the local cluster id; pass --cluster-id');
    }
    this.state = new ClusterState(config.ipTrackerEtcd?.length ? { clusterId: config.clusterId, multicluster: true } : {});
    const builtins = new BuiltinModules();
    const resolvers = [...(config.modules ?? []), builtins];
    this.engine = new PolicyEngine({
      state: this.state,
      modules: { resolve: (ref) => { for (const r of resolvers) { const m = r.resolve(ref); if (m) return m; } return undefined; } },
      logger: instanceLogger(this.log),
    });
    if (config.manifests?.length) {
      this.sources.push(new ManifestSource(config.manifests, {
        watch: true,
        onWarning: (m) => this.log.warn({ source: 'manifests' }, m),
        onError: (e) => this.log.error({ source: 'manifests', code: e.code }, `${e.message}; keeping the last good state`),
        onReload: () => this.log.info({ source: 'manifests' }, 'manifests reloaded'),
      }));
    }
  }

  /** True once every source has delivered its first full snapshot. */
  ready(): boolean {
    return this.sources.every((s) => s.ready());
  }

  async start(pipeline?: PipelineSpec): Promise<void> {
    if (this.config.kubeconfig || this.config.inCluster) {
      const { KubernetesSource } = await import('./sources/kubernetes.js');
      this.sources.push(new KubernetesSource({ kubeconfig: this.config.kubeconfig, nodeName: this.config.nodeName, logger: this.log.child({ source: 'kubernetes' }) }));
    }
    if (this.sources.length === 0) {
      throw new KwpError('KWP_ERR_USAGE', 'kwp agent: no source of objects; pass --manifests DIR, --kubeconfig FILE, or run in a cluster');
    }
    let spec = pipeline ?? loadPipelineFile(this.config.pipelineFile, (this.config.verbosity ?? 0) > 0);
    if (this.config.ipTrackerEtcd?.length) {
      const { RemotePodSource } = await import('./multicluster/remote-pod-source.js');
      const { toMulticlusterPipeline, withLocalClusterId } = await import('./multicluster/pipeline.js');
      this.sources.push(new RemotePodSource({ endpoints: this.config.ipTrackerEtcd, prefix: this.config.ipTrackerPrefix, localClusterId: this.config.clusterId!, logger: this.log.child({ source: 'ip-tracker' }) }));
      // A pipeline file is taken as written (its multicluster stages get the id if they lack it); the default one gets the multicluster NetworkPolicy stage.
      spec = !pipeline && !this.config.pipelineFile ? toMulticlusterPipeline(spec, this.config.clusterId!) : withLocalClusterId(spec, this.config.clusterId!);
    }
    this.engine.activate(this.engine.build(spec, this.config.pipelineFile ?? 'default pipeline'));
    for (const s of this.sources) await s.start(this.state);
    if (this.config.dataplane) await this.startDataplane();
    this.log.info({ revision: this.engine.active.revision, stages: spec.stages.map((s) => s.name), ready: this.ready() }, 'agent started');
  }

  private async startDataplane(): Promise<void> {
    const { Dataplane } = await import('./dataplane/dataplane.js');
    const { marksAt } = await import('./dataplane/rules.js');
    const dp = new Dataplane({
      tableName: this.config.tableName ?? 'kube-wasm-policies',
      queueId: this.config.queueId ?? 100,
      dnsQueueId: this.config.dnsQueueId ?? 101,
      failOpen: this.config.failOpen ?? true,
      strict: this.config.strict ?? true,
      logger: this.log.child({ part: 'dataplane' }),
      onDnsAnswer: (name, address, ttl) => this.state.recordResolvedName(name, address, ttl),
      ...(this.config.markBits !== undefined ? { marks: marksAt(this.config.markBits) } : {}),
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

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearTimeout(this.refreshTimer);
    this.stopDnsExpiry?.();
    this.unsubscribeState?.();
    if (this.dataplane) await this.dataplane.stop();
    for (const s of this.sources) await s.stop();
    if (this.engine.hasActive) this.engine.active.dispose();
    this.log.info({}, 'agent stopped');
  }
}
