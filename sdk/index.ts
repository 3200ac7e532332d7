// kube-wasm-policies SDK for AssemblyScript evaluators. Import from here:
//   import { Evaluator, Decision, Verdict, register } from "kube-wasm-policies/sdk";
// and re-export the ABI from the entry file:
//   export * from "kube-wasm-policies/sdk/exports";

export { Evaluator, register } from "./evaluator";
export { Decision, Verdict, Direction } from "./decision";
export { PodInfo, ContainerPort, PodAddress, PROTO_ICMP, PROTO_TCP, PROTO_UDP, PROTO_ICMPV6, PROTO_SCTP } from "./podinfo";
export { Labels, NO_LABELS } from "./labels";
export { PodCache } from "./podcache";
export { pods } from "./registry";
export { JValue, JKind, parseJSON, parseJSONString } from "./json";
export { log } from "./log";
export { LabelSelector, LabelRequirement, SelectorOp } from "./selector";
export { CIDR, IPBlock, parseIP, cidrError } from "./cidr";
export { PortMatcher, portsMatch, protocolNumber, protocolName, portError, PROTO_ANY } from "./ports";
export { Attribution, packRule, ruleIsIngress, ruleIndex, rulePeer, rulePort, describeSelector, describePort } from "./attribution";
