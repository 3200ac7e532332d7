// NetworkPolicy (networking.k8s.io/v1) semantics for evaluators to build on:
//   import { NetworkPolicyEvaluator } from "kube-wasm-policies/sdk/networkpolicy/index";
// Register it as it is, or subclass it and override its hooks.

export { NetworkPolicyEvaluator } from "./evaluator";
export { Policy, Rule, Peer, compilePolicy, policyKey, PEER_PODS, PEER_NAMESPACES, PEER_IPBLOCK, PEER_NOTHING } from "./policy";
export { Isolation, PodTable, NOT_ISOLATED, NO_POLICIES } from "./podtable";
