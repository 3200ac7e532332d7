import { loggerOf } from '../logger.js';
import { describe, it, expect } from 'vitest';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { LineRate } from './line-rate.js';
import { ObjectOp } from '../abi/objects.js';
import type { SandboxLimits } from './limits.js';
import { KwpError } from '../errors.js';
import { Stage } from '../pipeline/stage.js';
import { Pipeline } from '../pipeline/pipeline.js';
import { ClusterState } from '../state/cluster-state.js';
import { sandboxModule, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';

const LOG = '(import "kwp" "log" (func $log (param i32 i32 i32)))';
const ABORT = '(import "env" "abort" (func $abort (param i32 i32 i32 i32)))';
const MiB16 = 16 * 1024 * 1024;
const load = (bytes: Uint8Array, limits: Partial<SandboxLimits> = {}) => compileEvaluator(bytes, { source: 'hostile.wasm', limits });

function lines(bytes: Uint8Array, limits: Partial<SandboxLimits> = {}) {
  const out: string[] = [];
  const inst = new EvaluatorInstance(load(bytes, limits), loggerOf((_l, m) => out.push(m)));
  return { inst, out };
}

describe('what a module writes is bounded', () => {
  it('one kwp.log call naming 16 MiB of memory logs at most maxLogLineBytes, saying how much was cut', () => {
    const { inst, out } = lines(sandboxModule({ imports: [LOG], memory: '(memory (export "memory") 512 512)', decideBody: `(call $log (i32.const 1) (i32.const 0) (i32.const ${MiB16})) (i32.const 0)` }));
    inst.decideOne(new Uint8Array(64));
    expect(out).toHaveLength(1);
    expect(out[0].length).toBeLessThan(4096 + 100);
    expect(out[0]).toMatch(new RegExp(`… \\(${MiB16 - 4096} more bytes cut\\)$`));
  });

  it('what a module writes reaches the log without control characters, so a line cannot forge another or grow sixfold when escaped', () => {
    // Memory holds "a\nb", a NUL, "\u2028" (3 bytes) and an invalid byte.
    const { inst, out } = lines(sandboxModule({
      imports: [LOG], memory: '(memory (export "memory") 1 16) (data (i32.const 0) "a\\0ab\\00\\e2\\80\\a8\\ff")',
      decideBody: '(call $log (i32.const 1) (i32.const 0) (i32.const 8)) (i32.const 0)',
    }));
    inst.decideOne(new Uint8Array(64));
    expect(out).toEqual(['a?b???']);
    expect(new TextEncoder().encode(out[0]).length).toBeLessThanOrEqual(8);
  });

  it('log lines past logLinesPerSecond are dropped and counted, and the next line let through says how many', () => {
    let now = 0;
    const rate = new LineRate(3, () => now);
    const taken = Array.from({ length: 10 }, () => rate.take());
    expect(taken).toEqual(['', '', '', undefined, undefined, undefined, undefined, undefined, undefined, undefined]);
    now += 1000;
    expect(rate.take()).toBe(' (7 similar lines suppressed)');
    expect(rate.dropped).toBe(7);
    const { inst, out } = lines(sandboxModule({ imports: [LOG], decideBody: '(call $log (i32.const 1) (i32.const 0) (i32.const 2)) (i32.const 0)' }), { logLinesPerSecond: 2 });
    for (let i = 0; i < 50; i++) inst.decideOne(new Uint8Array(64));
    expect(out).toHaveLength(2);
    expect(inst.droppedLogLines).toBe(48);
  });

  it('an abort message claiming 64 MiB is copied only up to maxAbortMessageChars', () => {
    // The string header word before address 8 says the string is 64 MiB long; memory is 64 MiB.
    const inst = new EvaluatorInstance(load(sandboxModule({
      imports: [ABORT], memory: '(memory (export "memory") 1024 1024) (data (i32.const 4) "\\00\\00\\00\\03")',
      decideBody: '(call $abort (i32.const 8) (i32.const 0) (i32.const 1) (i32.const 2)) (i32.const 0)',
    })));
    let err: KwpError | undefined;
    try { inst.decideOne(new Uint8Array(64)); } catch (e) { err = e as KwpError; }
    expect(err?.code).toBe('KWP_ERR_TRAP');
    expect(err!.message.length).toBeLessThan(2000);
    expect(err!.message).toMatch(/more characters cut/);
  });

  it('an explanation reason of 32 MiB is cut to maxReasonBytes, and one explained flow shares maxExplainBytes across its stages', () => {
    // Every decision: verdict Next with reason 1; kwp_explain claims a 32 MiB text at kwp_result's address.
    const bytes = sandboxModule({
      memory: '(memory (export "memory") 1024 1024)',
      decideBody: '(i32.store (i32.const 4152) (i32.const 1)) (i32.const 0)',
      explainBody: '(i32.const 33554432)',
    });
    const compiled = load(bytes, { maxReasonBytes: 100, maxExplainBytes: 300 });
    const inst = new EvaluatorInstance(compiled);
    const reason = inst.explain(1);
    expect(reason).toMatch(new RegExp(`^\\?{100}… \\(${33554432 - 100} more bytes cut\\)$`));
    const state = new ClusterState();
    const stages = ['a', 'b'].map((name) => { const s = new Stage({ name, module: 'x' }, compiled, state); s.start(); return s; });
    const p = new Pipeline({ stages: stages.map((s) => s.spec) }, stages, 1, state);
    const d = p.evaluate({ family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]), srcPort: 1, dstPort: 2, icmpType: 0, icmpCode: 0 });
    const reasons = [...d.egress.trace, ...d.ingress.trace].map((t) => t.reason ?? '');
    expect(reasons.slice(0, 2).every((r) => r.startsWith('?'.repeat(100)))).toBe(true);
    expect(reasons[2]).toMatch(/reason left out: this explanation's reasons are over 300 bytes, sandbox limit maxExplainBytes/);
    expect(reasons.join('').length).toBeLessThan(300 + 200);
    p.dispose();
  });
});

describe("a refusal's text is bounded like a reason", () => {
  // kwp_configure's and kwp_object's status is the length of their refusal text: 0x7fffffff names all of a 64 MiB memory.
  const refusing = () => load(sandboxModule({
    memory: '(memory (export "memory") 1024 1024)', configureBody: '(i32.const 0x7fffffff)', objectBody: '(i32.const 0x7fffffff)',
    meta: { ...DEFAULT_META, kinds: ['v1/ConfigMap'] },
  }), { logLinesPerSecond: 2 });

  it('a configuration refusal claiming 2 GiB of text is copied only up to maxReasonBytes, saying how much was cut', () => {
    const inst = new EvaluatorInstance(refusing());
    let err: KwpError | undefined;
    try { inst.configure({}); } catch (e) { err = e as KwpError; }
    expect(err?.code).toBe('KWP_ERR_CONFIG_REJECTED');
    expect(err!.message.length).toBeLessThan(1024 + 200);
    expect(err!.message).toMatch(new RegExp(`… \\(${0x7fffffff - 1024} more bytes cut\\)$`));
  });

  it('object refusals are cut the same way and share the module log rate, so refusing every object is not a line of megabytes per delivery', () => {
    const out: string[] = [];
    const inst = new EvaluatorInstance(refusing(), loggerOf((_l, m) => out.push(m)));
    for (let i = 0; i < 50; i++) inst.object(0, ObjectOp.Upsert, new Uint8Array(8));
    expect(out).toHaveLength(2);
    expect(out.every((line) => line.length < 1024 + 200)).toBe(true);
    expect(inst.droppedLogLines).toBe(48);
  });
});

describe('kwp.meta is bounded', () => {
  const meta = (extra: object) => sandboxModule({ meta: { ...DEFAULT_META, ...extra } });
  function refusal(bytes: Uint8Array, limits: Partial<SandboxLimits> = {}): KwpError {
    try { load(bytes, limits); } catch (err) { if (err instanceof KwpError) return err; throw err; }
    throw new Error('accepted');
  }
  it.each([
    ['a 1 MB description', { description: 'd'.repeat(1_000_000) }, /kwp\.meta is \d+ bytes but the host allows 16384 \(sandbox limit maxMetaBytes\)/, {}],
    ['a description over maxMetaStringChars', { description: 'd'.repeat(2000) }, /"description" is 2000 characters but the host allows 1024 \(sandbox limit maxMetaStringChars\)/, {}],
    ['a kind string over maxMetaStringChars', { kinds: ['k'.repeat(1500)] }, /"kinds\[0\]" is 1500 characters/, {}],
    ['a kinds list over maxMetaKinds', { kinds: Array.from({ length: 100 }, (_, i) => `v1/K${i}`) }, /"kinds" lists 100 kinds but the host allows 64 \(sandbox limit maxMetaKinds\)/, {}],
  ])('%s is refused with KWP_ERR_METADATA naming the field and the limit', (_name, extra, message, limits) => {
    const err = refusal(meta(extra), limits);
    expect(err.code).toBe('KWP_ERR_METADATA');
    expect(err.message).toMatch(message);
  });
  it('the limits are what refused: raised, the same metadata loads', () => {
    expect(load(meta({ description: 'd'.repeat(2000) }), { maxMetaStringChars: 4000 }).meta.description).toHaveLength(2000);
    expect(load(meta({ kinds: Array.from({ length: 100 }, (_, i) => `v1/K${i}`) }), { maxMetaKinds: 100 }).meta.kinds).toHaveLength(100);
  });
});

describe("a stage's failure-policy error line is rate-limited like module logs", () => {
  it('a module answering an undefined verdict on every packet logs failureLinesPerSecond lines, not one per packet', () => {
    const logged: string[] = [];
    const compiled = load(sandboxModule({ decideBody: '(i32.store8 (i32.const 4148) (i32.const 9)) (i32.const 0)' }));
    const stage = new Stage({ name: 'bad', module: 'x' }, compiled, new ClusterState(), loggerOf((_l, m) => logged.push(m)));
    stage.start();
    for (let i = 0; i < 1000; i++) stage.decide(new Uint8Array(64));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/stage bad: module sandbox-fixture returned verdict 9/);
    expect(stage.suppressedFailureLines).toBe(999);
    stage.dispose();
  });
});
