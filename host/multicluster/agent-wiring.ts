// What an agent needs for multicluster mode, in two calls, so the agent's
// composition stays a list of parts: the IP-tracker source (which also puts
// the cluster state into multicluster mode when it starts) and the pipeline
// with the multicluster NetworkPolicy stage.

import type { ObjectSource } from '../contract.js';
import type { PipelineSpec } from '../pipeline/spec.js';
import { toMulticlusterPipeline, withLocalClusterId } from './pipeline.js';
import { RemotePodSource } from './remote-pod-source.js';
import type { HostLogger } from '../logger.js';

export interface MulticlusterAgentConfig {
  /** etcd endpoints of the IP tracker (`--ip-tracker-etcd`). */
  ipTrackerEtcd: string[];
  /** `--ip-tracker-prefix`; `/kwp/ips/` when absent. */
  ipTrackerPrefix?: string;
  /** This cluster's id (`--cluster-id`, or the kube-system uid). */
  clusterId: string;
}

/** The source to add to the agent's sources; start it with the agent's ClusterState. */
export function multiclusterSource(config: MulticlusterAgentConfig, logger?: HostLogger): ObjectSource {
  return new RemotePodSource({ endpoints: config.ipTrackerEtcd, prefix: config.ipTrackerPrefix, localClusterId: config.clusterId, logger });
}

/**
 * The pipeline to run: the built-in default gets the multicluster NetworkPolicy
 * stage; a pipeline someone wrote is kept, with the cluster id filled into
 * multicluster stages that lack one.
 */
export function multiclusterPipeline(spec: PipelineSpec, config: MulticlusterAgentConfig, isBuiltinDefault: boolean): PipelineSpec {
  return isBuiltinDefault ? toMulticlusterPipeline(spec, config.clusterId) : withLocalClusterId(spec, config.clusterId);
}
