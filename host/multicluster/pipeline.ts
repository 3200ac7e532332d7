// The multicluster pipeline: the NetworkPolicy stage replaced by its
// multicluster variant, which keeps subjects local and applies the peer-scope
// annotation to pods of other clusters. The variant needs the local cluster
// id in its config; a pipeline file written before the id is known (the
// install manifests, when the id is the kube-system uid) leaves it out and the
// agent fills it in.

import type { PipelineSpec } from '../pipeline/spec.js';

export const MULTICLUSTER_MODULE = 'multicluster-network-policy';

function moduleName(ref: string): string {
  return ref.split('@')[0];
}

/** `spec` with every `network-policy` stage swapped for the multicluster evaluator (configured with `clusterId` when given). */
export function toMulticlusterPipeline(spec: PipelineSpec, clusterId?: string): PipelineSpec {
  return {
    stages: spec.stages.map((s) => {
      if (moduleName(s.module) !== 'network-policy') return s;
      const config = { ...(s.config ?? {}), ...(clusterId !== undefined ? { clusterId } : {}) };
      return { ...s, module: MULTICLUSTER_MODULE, config };
    }),
  };
}

/** `spec` with `clusterId` written into every multicluster stage that does not name one. */
export function withLocalClusterId(spec: PipelineSpec, clusterId: string): PipelineSpec {
  return {
    stages: spec.stages.map((s) => {
      if (moduleName(s.module) !== MULTICLUSTER_MODULE || typeof s.config?.clusterId === 'string') return s;
      return { ...s, config: { ...(s.config ?? {}), clusterId } };
    }),
  };
}
