// What the NetworkPolicy evaluator keeps per pod: the policies isolating it,
// kept beside its PodInfo in a PodTable (sdk/pod-table.ts).

export { PodTable } from "../pod-table";
import { Policy } from "./policy";
import { DirectionRules, indexRules } from "./rule-index";

/**
 * The policies isolating one pod, per direction, and their rules indexed by
 * port (null: too few rules to index). Shared by every pod isolated by the
 * same policies; immutable.
 */
export class Isolation {
  ingressRules: DirectionRules | null = null;
  egressRules: DirectionRules | null = null;
  constructor(public ingress: StaticArray<Policy>, public egress: StaticArray<Policy>) {
    this.ingressRules = indexRules(ingress, true);
    this.egressRules = indexRules(egress, false);
  }
  get any(): bool { return this.ingress.length > 0 || this.egress.length > 0; }
}

export const NO_POLICIES = new StaticArray<Policy>(0);
export const NOT_ISOLATED = new Isolation(NO_POLICIES, NO_POLICIES);

