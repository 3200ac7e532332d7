// The host's side of rule attribution (ABI 1.3): the rule code is read only
// from modules that declare 1.3, so the bytes an ABI 1.0–1.2 module leaves at
// offset 60 (reserved then) never become a rule; kwp_attribution is called
// when exported, and older modules' attribution is their reason text.
import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { sandboxModule, BIG_MEMORY } from '../../test/fixtures/sandbox-modules.js';
import { RECORD_SIZE } from '../abi/record.js';
import { abiVersionWord } from '../abi/version.js';

// Batch at 4096, result buffer at 2048 (sandboxModule's layout): Accept, reason 7, and 9 at offset 60.
const DECIDE = `(i32.store8 (i32.const 4148) (i32.const 1)) (i32.store (i32.const 4152) (i32.const 7)) (i32.store (i32.const 4156) (i32.const 9)) (i32.const 0)`;
const REASON_TEXT = `(data (i32.const 3000) "y/allow-web")`;
const EXPLAIN = `(memory.copy (i32.const 2048) (i32.const 3000) (i32.const 11)) (i32.const 11)`;
const JSON_TEXT = '{"policy":"y/allow-web","rule":"ingress rule 2","peer":"podSelector app=web","port":"http"}';
const ATTRIBUTION_FN = (reasonCheck: string) => `(func (export "kwp_attribution") (param $reason i32) (param $rule i32) (result i32)
    (if (i32.eqz (${reasonCheck})) (then (return (i32.const 0))))
    (memory.copy (i32.const 2048) (i32.const 3100) (i32.const ${JSON_TEXT.length})) (i32.const ${JSON_TEXT.length}))`;

function instanceOf(minor: number, withExport: boolean): EvaluatorInstance {
  const fields = [REASON_TEXT, `(data (i32.const 3100) "${JSON_TEXT.replace(/"/g, '\\"')}")`];
  if (withExport) fields.push(ATTRIBUTION_FN('i32.and (i32.eq (local.get $reason) (i32.const 7)) (i32.eq (local.get $rule) (i32.const 9))'));
  const bytes = sandboxModule({ abiVersion: abiVersionWord(1, minor), decideBody: DECIDE, explainBody: EXPLAIN, fields });
  return new EvaluatorInstance(compileEvaluator(bytes, { source: `abi-1.${minor}.wasm` }));
}

const record = () => new Uint8Array(RECORD_SIZE);

describe('rule attribution on the host', () => {
  it.each([0, 1, 2])('ignores offset 60 of an ABI 1.%i module and attributes its reason text as the policy', (minor) => {
    const inst = instanceOf(minor, false);
    expect(inst.decideOne(record())).toBe(1);
    expect(inst.lastReason()).toBe(7);
    expect(inst.lastRule()).toBe(0);
    expect(inst.attribution(inst.lastReason(), inst.lastRule())).toEqual({ policy: 'y/allow-web', rule: '' });
  });

  it('does not call kwp_attribution of a module that declares an older minor version', () => {
    const inst = instanceOf(2, true);
    inst.decideOne(record());
    expect(inst.attribution(7, 9)).toEqual({ policy: 'y/allow-web', rule: '' });
  });

  it('reads the rule code of an ABI 1.3 module and asks its kwp_attribution for the text', () => {
    const inst = instanceOf(3, true);
    inst.decideOne(record());
    expect(inst.lastRule()).toBe(9);
    expect(inst.attribution(inst.lastReason(), inst.lastRule())).toEqual({ policy: 'y/allow-web', rule: 'ingress rule 2', peer: 'podSelector app=web', port: 'http' });
    // The module said nothing for another pair.
    expect(inst.attribution(7, 8)).toBeUndefined();
  });

  it('copies reasons and rules out of a batch only for a 1.3 module', () => {
    for (const [minor, rule] of [[2, 0], [3, 9]]) {
      const inst = instanceOf(minor, false);
      const verdicts = new Uint8Array(1);
      const reasons = new Uint32Array(1);
      const rules = new Uint32Array(1);
      inst.decideInto(record(), 0, 1, verdicts, reasons, rules);
      expect([verdicts[0], reasons[0], rules[0]]).toEqual([1, 7, rule]);
    }
  });

  it('takes malformed attribution output as no attribution, keeping the decision', () => {
    const bytes = sandboxModule({
      abiVersion: abiVersionWord(1, 3), decideBody: DECIDE,
      fields: ['(data (i32.const 3100) "{\\"policy\\":42}")', '(func (export "kwp_attribution") (param i32 i32) (result i32) (memory.copy (i32.const 2048) (i32.const 3100) (i32.const 13)) (i32.const 13))'],
    });
    const inst = new EvaluatorInstance(compileEvaluator(bytes, { source: 'bad-attribution.wasm' }));
    expect(inst.decideOne(record())).toBe(1);
    expect(inst.attribution(7, 9)).toBeUndefined();
  });

  it('gives kwp_attribution and kwp_explain a delivery call\'s tank, so text that costs more than a decision does not break the instance', () => {
    // A 4 MB fill costs 250,000 units: more than this decision tank, well within the call tank
    // (as a step of the module's collector over its state may cost, run by an allocation while it writes text).
    const limits = { fuelPerDecision: 100_000, fuelPerCall: 5_000_000 };
    const fill = '(memory.fill (i32.const 65536) (i32.const 0) (i32.const 4000000))';
    const bytes = sandboxModule({
      memory: BIG_MEMORY, abiVersion: abiVersionWord(1, 3), decideBody: DECIDE, explainBody: `${fill} ${EXPLAIN}`,
      fields: [REASON_TEXT, `(data (i32.const 3100) "${JSON_TEXT.replace(/"/g, '\\"')}")`,
        `(func (export "kwp_attribution") (param i32 i32) (result i32) ${fill} (memory.copy (i32.const 2048) (i32.const 3100) (i32.const ${JSON_TEXT.length})) (i32.const ${JSON_TEXT.length}))`],
    });
    const inst = new EvaluatorInstance(compileEvaluator(bytes, { source: 'costly-text.wasm', limits }));
    expect(inst.decideOne(record())).toBe(1);
    expect(inst.attribution(7, 9)).toEqual({ policy: 'y/allow-web', rule: 'ingress rule 2', peer: 'podSelector app=web', port: 'http' });
    expect(inst.explain(7)).toBe('y/allow-web');
    expect(inst.broken).toBeUndefined();
    expect(inst.decideOne(record())).toBe(1);
  });
});
