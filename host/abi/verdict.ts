// The verdict byte a module writes at OFF_VERDICT (sdk/ABI.md, "The decision
// record"). Any other value is a broken module: its stage's failure policy answers.

/** Pass is an explicit Next: the engine treats both alike, explanations tell them apart. */
export const Verdict = { Next: 0, Accept: 1, Deny: 2, Pass: 3 } as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];
export type VerdictName = 'Next' | 'Accept' | 'Deny' | 'Pass';
export const verdictName = (v: number): VerdictName =>
  v === Verdict.Accept ? 'Accept' : v === Verdict.Deny ? 'Deny' : v === Verdict.Pass ? 'Pass' : 'Next';
