import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileEvaluator } from './loader.js';
import { EvaluatorInstance } from './instance.js';
import { sandboxModule, INFINITE_LOOP, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { ClusterState } from '../state/cluster-state.js';
import { Stage } from '../pipeline/stage.js';
import { Verdict } from '../contract.js';
import { builtinWasmDir } from '../pipeline/modules.js';
import { codeOf } from '../../test/fixtures/error-code.js';


const load = (bytes: Uint8Array, limits = {}) => compileEvaluator(bytes, { source: 'fixture.wasm', limits });

describe('the loader refuses modules that break the ABI or the sandbox', () => {
  const cases: Array<[string, () => Uint8Array, string, object?]> = [
    ['bytes that are not WebAssembly', () => new TextEncoder().encode('(module)'), 'KWP_ERR_MODULE_INVALID'],
    ['a module larger than the size cap', () => sandboxModule(), 'KWP_ERR_MODULE_TOO_LARGE', { maxModuleBytes: 64 }],
    ['a module without kwp_abi_version', () => sandboxModule({ abiVersion: null }), 'KWP_ERR_ABI_VERSION'],
    ['a module speaking ABI major version 2', () => sandboxModule({ abiVersion: 0x00020000 }), 'KWP_ERR_ABI_VERSION'],
    ['a module without the kwp.meta section', () => sandboxModule({ meta: null }), 'KWP_ERR_METADATA'],
    ['a module whose kwp.meta has no failure policy', () => sandboxModule({ meta: { ...DEFAULT_META, failurePolicy: 'maybe' } }), 'KWP_ERR_METADATA'],
    ['a module importing a WASI function', () => sandboxModule({ imports: ['(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))'] }), 'KWP_ERR_IMPORT_NOT_ALLOWED'],
    ['a module importing a host function under an allowed module name', () => sandboxModule({ imports: ['(import "env" "seed" (func (result f64)))'] }), 'KWP_ERR_IMPORT_NOT_ALLOWED'],
    ['a module whose memory has no maximum', () => sandboxModule({ memory: '(memory (export "memory") 1)' }), 'KWP_ERR_MEMORY_UNBOUNDED'],
    ['a module whose memory maximum is above the cap', () => sandboxModule({ memory: '(memory (export "memory") 1 100)' }), 'KWP_ERR_MEMORY_TOO_LARGE', { maxMemoryPages: 64 }],
    ['a module whose imported memory starts above the cap', () => sandboxModule({ memory: '(import "env" "memory" (memory 100))' }), 'KWP_ERR_MEMORY_TOO_LARGE', { maxMemoryPages: 64 }],
    ['a module without kwp_decide', () => sandboxModule({ omitExports: ['kwp_decide'] }), 'KWP_ERR_EXPORT_MISSING'],
    ['a module exporting the reserved fuel name', () => sandboxModule({ imports: [], decideBody: '(i32.const 0)', memory: '(memory (export "memory") 1 16) (global (export "kwp_fuel") i32 (i32.const 0))' }), 'KWP_ERR_IMPORT_NOT_ALLOWED'],
  ];
  it.each(cases)('%s is refused', (_name, build, code, limits) => {
    expect(codeOf(() => load(build(), limits))).toBe(code);
  });

  it('a well-formed module is accepted and reports its metadata and ABI version', () => {
    const m = load(sandboxModule());
    expect(m.meta).toMatchObject({ name: 'sandbox-fixture', failurePolicy: 'fail-closed', abi: { major: 1, minor: 0 } });
    expect(m.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('an imported memory without a maximum is accepted because the host sets the maximum', () => {
    const m = load(sandboxModule({ memory: '(import "env" "memory" (memory 1))' }), { maxMemoryPages: 8 });
    const inst = new EvaluatorInstance(m);
    expect(inst.memoryBytes).toBe(65536);
  });

  it('error messages name the module and say what to fix', () => {
    try {
      load(sandboxModule({ memory: '(memory (export "memory") 1)' }));
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/fixture\.wasm: .*no maximum.*--maximumMemory/);
    }
  });
});

describe('fuel bounds a module that never returns', () => {
  it('an infinite loop in kwp_decide ends with KWP_ERR_FUEL_EXHAUSTED instead of hanging the host', () => {
    const inst = new EvaluatorInstance(load(sandboxModule({ decideBody: INFINITE_LOOP }), { fuelPerDecision: 100_000 }));
    const started = Date.now();
    expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_FUEL_EXHAUSTED');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(inst.broken?.code).toBe('KWP_ERR_FUEL_EXHAUSTED');
  });

  it('an infinite loop in the start function fails instantiation', () => {
    const m = load(sandboxModule({ startBody: '(loop $l (global.set $sink (i32.add (global.get $sink) (i32.const 1))) (br $l))' }), { fuelPerCall: 1_000_000 });
    expect(codeOf(() => new EvaluatorInstance(m))).toBe('KWP_ERR_INSTANTIATE');
  });

  it('a trap in kwp_decide is a KWP_ERR_TRAP and the instance refuses further calls', () => {
    const inst = new EvaluatorInstance(load(sandboxModule({ decideBody: '(unreachable)' })));
    expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_TRAP');
    expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_TRAP');
  });
});

describe('pointers a module hands the host are checked against its memory', () => {
  // kwp_alloc answers a sane buffer for the self-test's `{}` (2 bytes) and one past the end of memory for anything longer.
  it.each([['-16', '(i32.const -16)'], ['0x7ffffff0', '(i32.const 0x7ffffff0)'], ['the last byte of memory', '(i32.const 65535)']])(
    'a kwp_alloc buffer at %s is a trap of that call (KWP_ERR_TRAP), not a bare RangeError, and the instance refuses further calls', (_what, ptr) => {
      const alloc = `(func (export "kwp_alloc") (param $n i32) (result i32) (if (result i32) (i32.le_u (local.get $n) (i32.const 2)) (then (i32.const 1024)) (else ${ptr})))`;
      const inst = new EvaluatorInstance(load(sandboxModule({ memory: '(memory (export "memory") 1 1)', omitExports: ['kwp_alloc'], fields: [alloc] })));
      inst.configure({});
      let message = '';
      expect(codeOf(() => { try { inst.configure({ egress: 'Accept' }); } catch (err) { message = (err as Error).message; throw err; } })).toBe('KWP_ERR_TRAP');
      expect(message).toContain('kwp_alloc(');
      expect(message).toContain("outside the module's memory");
      expect(codeOf(() => inst.decideOne(new Uint8Array(64)))).toBe('KWP_ERR_TRAP');
    });
});

describe('a broken module costs its stage failure policy, never the agent', () => {
  const scripted = () => compileEvaluator(readFileSync(join(builtinWasmDir(), 'fixtures', 'scripted.wasm')), { source: 'scripted', limits: { fuelPerDecision: 200_000 } });
  const record = (port: number) => {
    const r = new Uint8Array(64);
    r[1] = 4; r[2] = 6; r[6] = port & 0xff; r[7] = port >> 8;
    return r;
  };
  const stage = (failurePolicy: 'fail-open' | 'fail-closed') => {
    const s = new Stage({ name: 's', module: 'scripted', failurePolicy, config: { egress: 'Accept', ingress: 'Accept', trapPort: 666, loopPort: 777, growPort: 888 } }, scripted(), new ClusterState());
    s.start();
    return s;
  };

  it.each([
    ['fail-closed', 666, Verdict.Deny],
    ['fail-open', 666, Verdict.Next],
    ['fail-closed', 777, Verdict.Deny],
    ['fail-open', 777, Verdict.Next],
  ] as const)('a %s stage answers its failure policy when the module breaks on port %i', (policy, port, expected) => {
    const s = stage(policy);
    expect(s.decide(record(80))).toBe(Verdict.Accept);
    expect(s.decide(record(port))).toBe(expected);
    expect(s.counters.traps + s.counters.fuelExhausted).toBe(1);
    // Until the rebuild runs, the stage keeps answering its failure policy.
    expect(s.decide(record(80))).toBe(expected);
    s.dispose();
  });

  it('a stage rebuilds a fresh instance after a trap and decides normally again', async () => {
    const s = stage('fail-closed');
    expect(s.decide(record(666))).toBe(Verdict.Deny);
    // The rebuild runs off the packet path and is fed in time slices, so on a busy machine it can take
    // several turns of the event loop: wait for the rebuild itself, then check what it left.
    const started = Date.now();
    while (s.counters.rebuilds === 0 && Date.now() - started < 30_000) await new Promise((r) => setTimeout(r, 5));
    expect(s.counters.rebuilds).toBe(1);
    expect(s.healthy).toBe(true);
    expect(s.decide(record(80))).toBe(Verdict.Accept);
    s.dispose();
  });

  it('memory.grow past the cap fails inside the module instead of growing the host', () => {
    const s = new Stage({ name: 's', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept', growPort: 888 } },
      compileEvaluator(readFileSync(join(builtinWasmDir(), 'fixtures', 'scripted.wasm')), { source: 'scripted', limits: { maxMemoryPages: 1024 } }), new ClusterState());
    s.start();
    const before = s.memoryBytes;
    expect(s.decide(record(888))).toBe(Verdict.Deny);
    expect(s.memoryBytes).toBe(before);
    expect(s.healthy).toBe(true);
    s.dispose();
  });

  it('two instances of one module do not share memory or state', () => {
    const m = scripted();
    const a = new Stage({ name: 'a', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept' } }, m, new ClusterState());
    const b = new Stage({ name: 'b', module: 'scripted', config: { egress: 'Deny', ingress: 'Deny' } }, m, new ClusterState());
    a.start(); b.start();
    expect(a.decide(record(80))).toBe(Verdict.Accept);
    expect(b.decide(record(80))).toBe(Verdict.Deny);
    a.dispose(); b.dispose();
  });
});
