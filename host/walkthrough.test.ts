// How one stage's step reads in a walkthrough: the module's reason text with
// the rule, peer and port of its attribution (ABI 1.3) put in after what the
// reason names first, whichever evaluator shape the reason has.
import { describe, it, expect } from 'vitest';
import { formatStep } from './walkthrough.js';
import type { StageTrace } from './contract.js';

const step = (verdict: StageTrace['verdict'], reason: string, attribution?: StageTrace['attribution'], label = 'CNP:Admin'): StageTrace =>
  ({ stage: 's', label, verdict, mode: 'enforce', reason, attribution });

describe('a walkthrough step', () => {
  it('puts the rule, peer and port after a reason that names the policy (NetworkPolicy)', () => {
    expect(formatStep(step('Accept', 'y/allow-web', { policy: 'y/allow-web', rule: 'ingress rule 0', peer: 'namespaceSelector team=frontend + podSelector app=web', port: 'http' }, 'NP')))
      .toBe('[NP] Accept (y/allow-web, ingress rule 0: namespaceSelector team=frontend + podSelector app=web, port http)');
  });

  it('names the policy before a reason that names the rule (a tiered rule with a name), then the peer and port, then its note', () => {
    const a = { policy: 'admin-guardrails', rule: 'pass-81', peer: 'namespaces all', port: 'TCP/81' };
    expect(formatStep(step('Pass', 'pass-81', a))).toBe('[CNP:Admin] Pass (admin-guardrails, pass-81: namespaces all, port TCP/81)');
    expect(formatStep(step('Deny', 'pass-81; note: policy "admin-guardrails" shares priority 10 with another policy', { ...a, port: 'any port' })))
      .toBe('[CNP:Admin] Deny (admin-guardrails, pass-81: namespaces all, any port; note: policy "admin-guardrails" shares priority 10 with another policy)');
    // A rule whose module names no clause still gets its policy.
    expect(formatStep(step('Deny', 'deny-from-z', { policy: 'guardrails', rule: 'deny-from-z' }, 'ANP'))).toBe('[ANP] Deny (guardrails, deny-from-z)');
  });

  it('puts them after an unnamed tiered rule, which its reason names with its policy', () => {
    expect(formatStep(step('Deny', 'anonymous, egress rule 0', { policy: 'anonymous', rule: 'egress rule 0', peer: 'networks 10.0.0.0/8', port: 'UDP/53' })))
      .toBe('[CNP:Admin] Deny (anonymous, egress rule 0: networks 10.0.0.0/8, port UDP/53)');
  });

  it('does not repeat what the reason already says (a rule that fails closed)', () => {
    expect(formatStep(step('Deny', 'future (fails closed: spec.egress[0].to[0]: unknown field "x")', { policy: 'p', rule: 'future', peer: 'fails closed: spec.egress[0].to[0]: unknown field "x"' })))
      .toBe('[CNP:Admin] Deny (p, future (fails closed: spec.egress[0].to[0]: unknown field "x"))');
  });

  it('leaves a reason it cannot place the attribution in as the module wrote it', () => {
    // A default deny names the isolating policies; a plugin's reason may be any text.
    expect(formatStep(step('Deny', 'no ingress rule of y/deny-all matched', { policy: 'y/deny-all', rule: 'default deny' }, 'NP')))
      .toBe('[NP] Deny (no ingress rule of y/deny-all matched)');
    expect(formatStep(step('Deny', 'pass-81x', { policy: 'p', rule: 'pass-81', peer: 'namespaces all' }))).toBe('[CNP:Admin] Deny (pass-81x)');
    expect(formatStep(step('Accept', 'accept all', { policy: 'accept all', rule: '' }))).toBe('[CNP:Admin] Accept (accept all)');
  });
});
