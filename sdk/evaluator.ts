// The one class a plugin author extends. Every method but decide has a
// do-nothing default, so the smallest evaluator is a decide function.

import { JValue } from "./json";
import { PodInfo } from "./podinfo";
import { Decision, Verdict } from "./decision";
import { Attribution } from "./attribution";

export abstract class Evaluator {
  /** Accept or refuse the stage config; return an error text to refuse it. */
  configure(config: JValue): string | null { return null; }

  /** `kind` is the index of the object's kind in module.json's `kinds`. */
  objectUpserted(kind: i32, obj: JValue): void {}
  objectDeleted(kind: i32, obj: JValue): void {}
  /** A full snapshot of `kind` follows: forget what you have of it. */
  objectsReset(kind: i32): void {}
  /** The snapshot of `kind` is complete. */
  objectsSynced(kind: i32): void {}

  podUpserted(pod: PodInfo, previous: PodInfo | null): void {}
  podDeleted(pod: PodInfo): void {}

  /** Decide one record. Set d.reason to say which policy/rule decided. */
  abstract decide(d: Decision): Verdict;

  /** Text for a reason code set in decide. */
  explain(reason: u32): string { return ""; }

  /**
   * Which policy and rule a (reason, rule) pair set in decide stands for
   * (ABI 1.3, kwp_attribution), or null when there is nothing to say. Off the
   * packet path. By default the explanation of the reason names the policy and
   * no rule, so every evaluator attributes at least that much.
   */
  attribution(reason: u32, rule: u32): Attribution | null {
    if (reason == 0) return null;
    const text = this.explain(reason);
    return text.length > 0 ? new Attribution(text) : null;
  }

  /**
   * True lets the SDK remember verdicts (sdk/decision-cache.ts): return it only
   * when decide's verdict and reason depend on nothing but the record (its
   * source port excepted), the config, the delivered objects and the PodInfos
   * of the record's two pods — no counters, no other pods' state, no logging
   * per packet. A stage can still turn the memo off with `decisionCache: false`.
   */
  cachesDecisions(): bool { return false; }

  /**
   * True lets the host ask for both directions of a record in one module call
   * (ABI 1.4, kwp_decide_pair): then a stage may be asked a direction the
   * one-direction walk would not have reached (a later stage denies the other
   * one), so this holds only when decide has no side effects. By default,
   * what cachesDecisions() says.
   */
  decidesPairs(): bool { return this.cachesDecisions(); }

  /** True when the module must see all traffic (cluster-wide policies); false to name subjects with isSubject. */
  needsAllTraffic(): bool { return true; }
  /** With needsAllTraffic() false: whether traffic to or from this pod must be shown to the module. */
  isSubject(pod: PodInfo): bool { return false; }
}

let current: Evaluator | null = null;
let pairs: bool = false;

/** Installs the module's evaluator; call once at the top level of the entry file. */
export function register(e: Evaluator): void {
  current = e;
  // Asked once, here: kwp_pair_results then reads a global, not the heap (the host asks it of every new instance).
  pairs = e.decidesPairs();
}

/** What the registered evaluator's decidesPairs() said (false before register). */
export function registeredDecidesPairs(): bool { return pairs; }

export function registered(): Evaluator {
  if (current == null) abort("no evaluator registered: call register(new MyEvaluator()) in the entry file");
  return current!;
}
