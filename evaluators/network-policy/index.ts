// The networking.k8s.io/v1 NetworkPolicy evaluator: the SDK's
// NetworkPolicyEvaluator (sdk/networkpolicy/), registered as it is. The
// matching logic lives in the SDK so that evaluators extending NetworkPolicy
// semantics (multicluster-network-policy) reuse this very code through its
// hooks instead of copying it.

import { register } from "../../sdk/index";
import { NetworkPolicyEvaluator } from "../../sdk/networkpolicy/index";

register(new NetworkPolicyEvaluator());
export * from "../../sdk/exports";
