// The multicluster pipeline: the default order with the NetworkPolicy stage
// replaced by its multicluster variant, which keeps subjects local and applies
// the peer-scope annotation to pods of other clusters.

import type { PipelineSpec } from '../pipeline/spec.js';

export const MULTICLUSTER_MODULE = 'multicluster-network-policy';

/** `spec` with every `network-policy` stage swapped for the multicluster evaluator configured with `clusterId`. */
export function toMulticlusterPipeline(spec: PipelineSpec, clusterId: string): PipelineSpec {
  return {
    stages: spec.stages.map((s) => {
      const [module] = s.module.split('@');
      if (module !== 'network-policy') return s;
      return { ...s, module: MULTICLUSTER_MODULE, config: { ...(s.config ?? {}), clusterId } };
    }),
  };
}
