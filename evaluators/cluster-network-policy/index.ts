// ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2). The pipeline runs
// this module twice, once per tier ({"tier": "Admin"} before NetworkPolicy,
// {"tier": "Baseline"} after it); each instance only evaluates the policies
// whose spec.tier is its own.
import { JValue, register, log } from "../../sdk/index";
import { TieredPolicyEvaluator } from "../cluster-common/tiered-evaluator";
import { Dialect, parsePolicy } from "../cluster-common/parse";
import { Policy } from "../cluster-common/policy";

const KIND_CNP = 0;
const KIND_NODE = 1;
const KIND_RESOLVED_NAME = 2;

const dialect = new Dialect();
dialect.kindName = "ClusterNetworkPolicy";
dialect.acceptWord = "Accept";
dialect.passAllowed = true;
dialect.domainNamesAllowed = true;
dialect.protocolsField = true;

class ClusterNetworkPolicyEvaluator extends TieredPolicyEvaluator {
  protected kindCount(): i32 { return 3; }
  protected nodeKind(): i32 { return KIND_NODE; }
  protected resolvedNameKind(): i32 { return KIND_RESOLVED_NAME; }
  protected instanceName(): string { return "ClusterNetworkPolicy " + this.tier + " tier"; }

  protected compile(kind: i32, obj: JValue): Policy | null {
    if (kind != KIND_CNP) return null;
    const spec = obj.get("spec");
    const tier = spec != null ? spec.str("tier") : "";
    if (tier != "Admin" && tier != "Baseline") {
      const meta = obj.get("metadata");
      // Both tier instances see the object; let only the Admin one say so.
      if (this.tier == "Admin") {
        log.warn("ClusterNetworkPolicy \"" + (meta != null ? meta.str("name") : "") + "\": spec.tier \"" + tier
          + "\" is not Admin or Baseline; the policy is ignored");
      }
      return null;
    }
    if (tier != this.tier) return null;
    return parsePolicy(obj, dialect, true);
  }
}

register(new ClusterNetworkPolicyEvaluator());
export * from "../../sdk/exports";
