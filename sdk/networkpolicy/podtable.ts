// What the NetworkPolicy evaluator keeps per pod: the policies isolating it,
// kept beside its PodInfo in a PodTable (sdk/pod-table.ts).

export { PodTable } from "../pod-table";
import { Policy } from "./policy";
import { indexRules } from "./rule-index";
import { PortIndex } from "../port-index";

/**
 * The policies isolating one pod, per direction, and their rules indexed by
 * port (null: too few rules to index). Shared by every pod isolated by the
 * same policies; immutable.
 */
export class Isolation {
  /** What decide reads: the indexes' data (null: scan), first in the object. */
  ingressRules: StaticArray<u32> | null = null;
  egressRules: StaticArray<u32> | null = null;
  /** The indexes themselves, which own what the data points at. */
  private ingressIndex: PortIndex | null = null;
  private egressIndex: PortIndex | null = null;
  constructor(public ingress: StaticArray<Policy>, public egress: StaticArray<Policy>, indexed: bool = true) {
    const i = indexed ? indexRules(ingress, true) : null;
    const e = indexed ? indexRules(egress, false) : null;
    this.ingressIndex = i;
    this.egressIndex = e;
    if (i != null) this.ingressRules = i.data;
    if (e != null) this.egressRules = e.data;
  }
  get any(): bool { return this.ingress.length > 0 || this.egress.length > 0; }
}

export const NO_POLICIES = new StaticArray<Policy>(0);
export const NOT_ISOLATED = new Isolation(NO_POLICIES, NO_POLICIES);

