// AdminNetworkPolicy and BaselineAdminNetworkPolicy (policy.networking.k8s.io
// v1alpha1, the v0.1.7 shape). {"tier": "Admin"} evaluates the ANPs;
// {"tier": "Baseline"} evaluates the cluster's single BANP, which must be
// named "default".
import { JValue, register, log } from "../../sdk/index";
import { TieredPolicyEvaluator } from "../cluster-common/tiered-evaluator";
import { Dialect, parsePolicy } from "../cluster-common/parse";
import { Policy } from "../cluster-common/policy";

const KIND_ANP = 0;
const KIND_BANP = 1;
const KIND_NODE = 2;
const KIND_RESOLVED_NAME = 3;

const anp = new Dialect();
anp.kindName = "AdminNetworkPolicy";
anp.acceptWord = "Allow";
anp.passAllowed = true;
anp.domainNamesAllowed = true;
anp.protocolsField = false;

const banp = new Dialect();
banp.kindName = "BaselineAdminNetworkPolicy";
banp.acceptWord = "Allow";
banp.passAllowed = false;
banp.domainNamesAllowed = false;
banp.protocolsField = false;

class AdminNetworkPolicyEvaluator extends TieredPolicyEvaluator {
  protected kindCount(): i32 { return 4; }
  protected nodeKind(): i32 { return KIND_NODE; }
  protected resolvedNameKind(): i32 { return KIND_RESOLVED_NAME; }
  protected instanceName(): string {
    return this.tier == "Admin" ? "AdminNetworkPolicy tier" : "BaselineAdminNetworkPolicy tier";
  }

  protected compile(kind: i32, obj: JValue): Policy | null {
    if (this.tier == "Admin") return kind == KIND_ANP ? parsePolicy(obj, anp, true) : null;
    if (kind != KIND_BANP) return null;
    const meta = obj.get("metadata");
    const name = meta != null ? meta.str("name") : "";
    if (name != "default") {
      log.warn("BaselineAdminNetworkPolicy \"" + name + "\" is ignored: the cluster's only BaselineAdminNetworkPolicy must be named \"default\"");
      return null;
    }
    return parsePolicy(obj, banp, false);
  }
}

register(new AdminNetworkPolicyEvaluator());
export * from "../../sdk/exports";
