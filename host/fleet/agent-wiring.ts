// How the agent takes part in the fleet, chosen once from its configuration:
// as a node (with a kubeconfig and a node name: follow the cluster's objects,
// report status), as the cluster-level admin API (`--fleet`: publish uploads
// and pipeline changes, run the rollout controller), or not at all.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { KwpError } from '../errors.js';
import { ModuleStore, type ModuleStoreOptions } from '../control/module-store.js';
import { PipelineController, type PipelineControllerOptions } from '../control/pipeline-controller.js';
import type { PolicyEngine } from '../pipeline/engine.js';
import { loadKubeConfig } from '../sources/kubernetes.js';
import { FleetMetrics } from './metrics.js';
import { ModuleFetcher } from './module-fetcher.js';
import { FleetNode } from './node-agent.js';
import { OciClient } from './oci.js';
import { FleetPublisher } from './publisher.js';
import { PublishingModuleStore, PublishingPipelineController } from './publishing-services.js';
import { RolloutController } from './rollout-controller.js';
import { ControllerRuntime } from './runtime.js';
import type { NodeReport } from './objects.js';
import { readFleetStatus, type FleetStatus } from './fleet-status.js';
import type { HostLogger } from '../logger.js';

export interface FleetConfig {
  /** `node`: follow the cluster's Pipeline and EvaluatorModules; `cluster`: the cluster-level admin API and rollout controller; `off`. */
  mode: 'node' | 'cluster' | 'off';
  /** cluster: `HOST[:PORT]/PREFIX` modules are pushed to; ConfigMaps without it. */
  registry?: string;
  /** Registries (HOST:PORT) spoken to over plain HTTP besides loopback ones. */
  plainHttpRegistries?: string[];
  /** cluster: where module ConfigMaps go. */
  namespace?: string;
  /** cluster: the Pipeline object written (and followed). Default `default`. */
  pipelineName?: string;
  /** node: how often counters are reported when nothing else changed. Default 10 s. */
  statusIntervalMs?: number;
}

export interface FleetParts {
  controller: PipelineController;
  engine: PolicyEngine;
  store?: ModuleStore;
  registry: Registry;
  ready: () => boolean;
  nodeName?: string;
  logger: HostLogger;
}

export class FleetWiring {
  readonly kubeConfig: KubeConfig;
  private readonly oci: OciClient;
  private readonly publisher: FleetPublisher | undefined;
  private node: FleetNode | undefined;
  private rollouts: RolloutController | undefined;
  private trustedKeys: ModuleStoreOptions['trustedKeys'] = [];

  constructor(private readonly config: FleetConfig, kubeconfig: string | undefined) {
    this.kubeConfig = loadKubeConfig(kubeconfig);
    this.oci = new OciClient({ plainHttp: config.plainHttpRegistries });
    if (config.mode === 'cluster') {
      if (config.registry) FleetPublisher.parseRegistry(config.registry);
      this.publisher = new FleetPublisher({
        kubeConfig: this.kubeConfig, oci: this.oci, registry: config.registry,
        namespace: config.namespace ?? 'kube-system', pipelineName: config.pipelineName ?? 'default',
      });
    }
  }

  /** The agent's fleet part, or undefined when it has no API server or the fleet is off. */
  static for(config: FleetConfig | undefined, api: { kubeconfig?: string; inCluster?: boolean }): FleetWiring | undefined {
    const fleet = config ?? { mode: 'node' };
    if (fleet.mode === 'off') return undefined;
    if (!api.kubeconfig && !api.inCluster) {
      if (fleet.mode === 'cluster') throw new KwpError('KWP_ERR_USAGE', 'kwp agent: --fleet needs the API server: pass --kubeconfig FILE or run in a cluster');
      return undefined;
    }
    return new FleetWiring(fleet, api.kubeconfig);
  }

  createStore(options: ModuleStoreOptions): ModuleStore {
    this.trustedKeys = options.trustedKeys ?? [];
    return this.publisher ? new PublishingModuleStore(options, this.publisher) : new ModuleStore(options);
  }

  createController(options: PipelineControllerOptions): PipelineController {
    return this.publisher ? new PublishingPipelineController(options, this.publisher) : new PipelineController(options);
  }

  async start(parts: FleetParts): Promise<void> {
    const metrics = new FleetMetrics(parts.registry);
    const fetcher = parts.store ? new ModuleFetcher({ store: parts.store, oci: this.oci, kubeConfig: this.kubeConfig, metrics, trustedKeys: this.trustedKeys }) : undefined;
    const runtime = new ControllerRuntime(parts.controller, parts.engine, parts.ready);
    if (this.publisher) {
      this.rollouts = new RolloutController({ kubeConfig: this.kubeConfig, logger: parts.logger });
      await this.rollouts.start();
      this.node = new FleetNode({ kubeConfig: this.kubeConfig, nodeName: parts.nodeName ?? 'fleet-controller', runtime, fetcher, metrics, logger: parts.logger, follow: this.publisher.pipelineName });
      await this.node.start();
      parts.logger.info({ pipeline: this.publisher.pipelineName, registry: this.config.registry ?? null }, 'fleet: cluster-level admin API; changes go to the cluster');
      return;
    }
    if (!parts.nodeName) {
      parts.logger.info({}, 'fleet: no --node-name, so this agent does not follow the cluster Pipeline');
      return;
    }
    this.node = new FleetNode({ kubeConfig: this.kubeConfig, nodeName: parts.nodeName, runtime, fetcher, metrics, logger: parts.logger, statusIntervalMs: this.config.statusIntervalMs });
    await this.node.start();
  }

  /** The cluster-level admin API's read of the fleet (GET /v1/fleet/status); undefined on a node. */
  get statusReader(): (() => Promise<FleetStatus>) | undefined {
    return this.publisher ? () => readFleetStatus(this.kubeConfig, 'GET /v1/fleet/status') : undefined;
  }

  /** What this agent's fleet part runs and has seen (the cluster-level agent writes no status object of its own). */
  report(): NodeReport | undefined {
    return this.node?.report();
  }

  async stop(): Promise<void> {
    await this.node?.stop();
    await this.rollouts?.stop();
  }
}
