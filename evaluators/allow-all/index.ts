// A stage that accepts everything: the "accept all" pipeline for benchmarks
// and for the demo's baseline.
import { Evaluator, Decision, Verdict, register } from "../../sdk/index";

class AllowAllEvaluator extends Evaluator {
  decide(d: Decision): Verdict { return Verdict.Accept; }
  explain(reason: u32): string { return "accept all"; }
}

register(new AllowAllEvaluator());
export * from "../../sdk/exports";
