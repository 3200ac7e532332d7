// NetworkPolicy in a flat-network cluster set (the NPEP-311 model): policies
// are local, selectors are global. The NetworkPolicy semantics come from the
// SDK's NetworkPolicyEvaluator unchanged; this module only adds the cluster
// rules through its hooks:
// - subjects are pods of this cluster (config `clusterId`), never remote ones;
// - a policy annotated `multicluster.kube-wasm-policies.io/scope: cluster-local`
//   sees pods of other clusters as plain addresses (its ipBlocks still apply,
//   its pod and namespace selectors do not); `cross-cluster`, the default,
//   matches them like local pods, a podSelector-only peer by namespace
//   sameness (same namespace name in every cluster).

import { register, JValue, JKind, PodInfo, log } from "../../sdk/index";
import { NetworkPolicyEvaluator, Policy } from "../../sdk/networkpolicy/index";

const SCOPE_ANNOTATION = "multicluster.kube-wasm-policies.io/scope";
const CLUSTER_LOCAL: u32 = 1;

class MulticlusterNetworkPolicyEvaluator extends NetworkPolicyEvaluator {
  clusterId: string = "";

  configure(config: JValue): string | null {
    const id = config.get("clusterId");
    if (id == null || id.kind != JKind.String || id.s.length == 0) {
      return "config.clusterId must name this cluster as the agent does (its --cluster-id), e.g. {\"clusterId\": \"east\"}";
    }
    this.clusterId = id.s;
    return null;
  }

  canBeSubject(pod: PodInfo): bool {
    return pod.clusterId == this.clusterId;
  }

  peerFor(policyFlags: u32, peer: PodInfo | null): PodInfo | null {
    if (peer != null && (policyFlags & CLUSTER_LOCAL) != 0 && peer.clusterId != this.clusterId) return null;
    return peer;
  }

  policyCompiled(policy: Policy, obj: JValue): void {
    const scope = annotation(obj, SCOPE_ANNOTATION);
    if (scope == null || scope == "cross-cluster") return;
    if (scope != "cluster-local") {
      // The narrower reading: a typo must not open a policy to other clusters.
      log.warn("NetworkPolicy " + policy.key + ": " + SCOPE_ANNOTATION + " is \"" + scope! + "\", not cluster-local or cross-cluster; treated as cluster-local");
    }
    policy.flags |= CLUSTER_LOCAL;
  }
}

function annotation(obj: JValue, key: string): string | null {
  const annotations = obj.path("metadata.annotations");
  if (annotations == null || annotations.kind != JKind.Object) return null;
  const v = annotations.get(key);
  return v != null && v.kind == JKind.String ? v.s : null;
}

register(new MulticlusterNetworkPolicyEvaluator());
export * from "../../sdk/exports";
