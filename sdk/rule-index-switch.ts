// The stage config key `ruleIndex` (default true), taken out of the config by
// the SDK like `decisionCache`: false makes the built-in evaluators scan every
// rule of a subject's policies and match selectors without the memo — the
// unindexed evaluation the indexed one is tested against, kept in the same
// module so the two share everything but the index.

let enabled: bool = true;

export function ruleIndexEnabled(): bool { return enabled; }
export function setRuleIndexEnabled(on: bool): void { enabled = on; }
