// Hostile evaluators for the real-agent sandbox proofs (test/sandbox/*.test.ts):
// each passes the upload's self-test (which decides port 80 with an empty
// configuration) and turns hostile only for a port, a configuration or a
// call the self-test does not make, the way a module written to get past
// validation would.
import { sandboxModule, DEFAULT_META, BIG_MEMORY } from '../fixtures/sandbox-modules.js';
import { Kinds } from '../../host/contract.js';

/** Where sandboxModule's single-record batch lives, and the fields of its record (sdk/ABI.md). */
const RECORD = 4096;
const DST_PORT = RECORD + 6;
const VERDICT = RECORD + 52;
const REASON = RECORD + 56;
/** A fill just under the module's 64 MiB memory. */
const FILL = 64 * 1024 * 1024 - 1024;

const meta = (name: string, extra: Record<string, unknown> = {}) => ({ ...DEFAULT_META, name, failurePolicy: 'fail-closed', ...extra });

/** What each hostile port makes kwp_decide do, forever. */
export const TIME_ATTACKS = {
  4242: ['memory.fill of 64 MiB in a loop', `(loop $l (memory.fill (i32.const 0) (i32.const 7) (i32.const ${FILL})) (br $l))`],
  4243: ['memory.copy of 64 MiB in a loop', `(loop $l (memory.copy (i32.const 0) (i32.const 1024) (i32.const ${FILL})) (br $l))`],
  4244: ['a plain loop', '(loop $l (global.set $sink (i32.add (global.get $sink) (i32.const 1))) (br $l))'],
  4245: ['unbounded recursion', '(drop (call $deeper (i32.const 0)))'],
  4246: ['memory.grow past the cap and a fill, in a loop', `(loop $l (drop (memory.grow (i32.const 16))) (memory.fill (i32.const 0) (i32.const 1) (i32.const ${FILL})) (br $l))`],
} as const;
/** kwp_explain fills memory forever for a decision of this port (the reason code is the port). */
export const EXPLAIN_ATTACK_PORT = 4247;

/**
 * Decides every flow Accept with the destination port as its reason code,
 * except the TIME_ATTACKS ports, for which it never returns on its own; its
 * kwp_explain never returns for EXPLAIN_ATTACK_PORT.
 */
export function slowForSomePorts(name: string): Uint8Array {
  const attacks = Object.entries(TIME_ATTACKS).map(([port, [, body]]) => `(if (i32.eq (local.get $p) (i32.const ${port})) (then ${body}))`).join('\n');
  return sandboxModule({
    memory: BIG_MEMORY,
    meta: meta(name),
    fields: ['(func $deeper (param $n i32) (result i32) (i32.add (call $deeper (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))'],
    decideBody: `(local $p i32) (local.set $p (i32.load16_u (i32.const ${DST_PORT})))
      ${attacks}
      (i32.store8 (i32.const ${VERDICT}) (i32.const 1)) (i32.store (i32.const ${REASON}) (local.get $p)) (i32.const 0)`,
    explainBody: `(if (i32.eq (local.get $reason) (i32.const ${EXPLAIN_ATTACK_PORT})) (then (loop $l (memory.fill (i32.const 0) (i32.const 7) (i32.const ${FILL})) (br $l)))) (i32.const 0)`,
  });
}

const STRAIGHT_LINE_LOOP = `(loop $l ${'(global.set $sink (i32.add (global.get $sink) (i32.const 7)))'.repeat(2000)} (br $l))`;

/** A module that never finishes in `where` (start function or kwp_configure), whatever the input: the self-test must stop it. */
export function neverStarts(name: string, where: 'start' | 'configure', how: 'fill' | 'loop'): Uint8Array {
  const body = how === 'fill'
    ? `(loop $l (memory.fill (i32.const 0) (i32.const 7) (i32.const ${FILL})) (br $l))`
    // 2,000 additions an iteration: fuelPerCall's tank (tens of ms of them) or the self-test deadline stops it.
    : STRAIGHT_LINE_LOOP;
  return sandboxModule({ memory: BIG_MEMORY, meta: meta(name), ...(where === 'start' ? { startBody: body } : { configureBody: `${body} (i32.const 0)` }) });
}

/**
 * A module that takes all the memory it may: its memory is `pages` at start
 * and, configured with anything but `{}` (the self-test's configuration),
 * it writes every page, so each stage of it really costs that much RSS.
 * Decides Next.
 */
export function fat(name: string, pages: number): Uint8Array {
  return sandboxModule({
    memory: `(memory (export "memory") ${pages} ${pages})`, meta: meta(name, { failurePolicy: 'fail-open' }),
    configureBody: `(if (i32.gt_u (local.get $len) (i32.const 2)) (then (memory.fill (i32.const 0) (i32.const 1) (i32.const ${pages * 65536})))) (i32.const 0)`,
  });
}

const LOG = '(import "kwp" "log" (func $log (param i32 i32 i32)))';
const ABORT = '(import "env" "abort" (func $abort (param i32 i32 i32 i32)))';

/**
 * Everything a module can make the host write, at once, on every decision:
 * 50 log lines each naming all 16 MiB of its memory, an explanation reason
 * claiming 32 MiB. Decides Next, so every stage of a pipeline of these is
 * asked. Configured with anything but `{}` (the self-test's configuration),
 * kwp_configure refuses with a text claiming 2 GiB.
 */
export function loud(name: string): Uint8Array {
  const MiB16 = 16 * 1024 * 1024;
  return sandboxModule({
    imports: [LOG],
    memory: '(memory (export "memory") 256 256)',
    meta: meta(name, { failurePolicy: 'fail-open' }),
    configureBody: '(if (i32.gt_u (local.get $len) (i32.const 2)) (then (return (i32.const 0x7fffffff)))) (i32.const 0)',
    decideBody: `(local $i i32)
      (loop $l (call $log (i32.const 3) (i32.const 0) (i32.const ${MiB16}))
        (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const 50))))
      (i32.store (i32.const ${REASON}) (i32.const 1)) (i32.const 0)`,
    explainBody: `(i32.const ${32 * 1024 * 1024})`,
  });
}

/** Answers a verdict the ABI does not define (9) for flows to `port`: its stage's failure line, on every packet. */
export function undefinedVerdict(name: string, port: number): Uint8Array {
  return sandboxModule({
    meta: meta(name, { failurePolicy: 'fail-open' }),
    decideBody: `(if (i32.eq (i32.load16_u (i32.const ${DST_PORT})) (i32.const ${port})) (then (i32.store8 (i32.const ${VERDICT}) (i32.const 9)))) (i32.const 0)`,
  });
}

/** For flows to `port`, aborts with a message whose header claims 63 MiB (all of it in memory). */
export function abortsLoudly(name: string, port: number): Uint8Array {
  return sandboxModule({
    imports: [ABORT],
    memory: `${BIG_MEMORY} (data (i32.const 4) "\\00\\00\\f0\\03")`,
    meta: meta(name, { failurePolicy: 'fail-open' }),
    decideBody: `(if (i32.eq (i32.load16_u (i32.const ${DST_PORT})) (i32.const ${port})) (then (call $abort (i32.const 8) (i32.const 8) (i32.const 1) (i32.const 2)))) (i32.const 0)`,
  });
}

export { meta as hostileMeta };

/** kwp_decide loops forever for this port on straight-line code, 2,000 additions an iteration. */
export const STRAIGHT_LINE_PORT = 4250;

/**
 * Decides every flow Accept, except STRAIGHT_LINE_PORT, for which kwp_decide
 * loops on 2,000 additions an iteration: with the largest tank the limits
 * allow (33 million units a decision, some 500 million instructions), a few
 * hundred ms, beyond decisionDeadlineMs: the wall-clock backstop stops it
 * first. Configured with anything but `{}`
 * (the self-test's configuration), kwp_configure loops the same way.
 */
export function straightLineLoops(name: string): Uint8Array {
  return sandboxModule({
    memory: BIG_MEMORY,
    meta: meta(name),
    decideBody: `(if (i32.eq (i32.load16_u (i32.const ${DST_PORT})) (i32.const ${STRAIGHT_LINE_PORT})) (then ${STRAIGHT_LINE_LOOP}))
      (i32.store8 (i32.const ${VERDICT}) (i32.const 1)) (i32.store (i32.const ${REASON}) (i32.const 1)) (i32.const 0)`,
    configureBody: `(if (i32.gt_u (local.get $len) (i32.const 2)) (then ${STRAIGHT_LINE_LOOP})) (i32.const 0)`,
  });
}

/**
 * Loop bodies of 50,000 instructions of straight-line code, each a way to
 * make one fuel charge (the loop header's) guard as much work as possible:
 * with one unit per charge, a tank of a few hundred thousand units lasted
 * hours. With charges weighted by the code they guard, each iteration pays
 * for its 50,000 instructions. `imports` and `fields` are what a body needs.
 */
export const STRAIGHT_LINE_RUNS = {
  'i32 arithmetic': {
    // 4 instructions each: global.get, i32.const, i32.add, global.set.
    body: '(global.set $sink (i32.add (global.get $sink) (i32.const 7)))'.repeat(12_500),
    imports: [] as string[],
    fields: [] as string[],
  },
  'memory loads and stores': {
    // 6 instructions each, every load reading what the store before it wrote.
    body: '(i32.store (i32.const 64) (i32.add (i32.load (i32.const 64)) (i32.const 7)))'.repeat(8_334),
    imports: [] as string[],
    fields: [] as string[],
  },
  call_indirect: {
    // 5 instructions each, calling kwp.log through the table: an import has no entry for fuel to be charged at.
    body: '(call_indirect (type $log) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))'.repeat(10_000),
    imports: ['(import "kwp" "log" (func $log (param i32 i32 i32)))'],
    fields: ['(type $log (func (param i32 i32 i32)))', '(table 1 1 funcref)', '(elem (i32.const 0) $log)'],
  },
} as const;
export type StraightLineRun = keyof typeof STRAIGHT_LINE_RUNS;
/** The ports for which straightLineRuns' kwp_decide loops, one per run. */
export const STRAIGHT_LINE_RUN_PORTS: Record<StraightLineRun, number> = { 'i32 arithmetic': 4260, 'memory loads and stores': 4261, call_indirect: 4262 };

const runLoop = (run: StraightLineRun) => `(loop $run ${STRAIGHT_LINE_RUNS[run].body} (br $run))`;

/**
 * Passes the self-test, then runs `run` forever in kwp_decide for its port
 * (STRAIGHT_LINE_RUN_PORTS) and in kwp_configure for any configuration but
 * `{}`. Fail-closed, so the flow of a stuck decision is denied.
 */
export function straightLineRuns(name: string, run: StraightLineRun): Uint8Array {
  return sandboxModule({
    meta: meta(name),
    imports: [...STRAIGHT_LINE_RUNS[run].imports],
    fields: [...STRAIGHT_LINE_RUNS[run].fields],
    decideBody: `(if (i32.eq (i32.load16_u (i32.const ${DST_PORT})) (i32.const ${STRAIGHT_LINE_RUN_PORTS[run]})) (then ${runLoop(run)}))
      (i32.store8 (i32.const ${VERDICT}) (i32.const 1)) (i32.store (i32.const ${REASON}) (i32.const 1)) (i32.const 0)`,
    configureBody: `(if (i32.gt_u (local.get $len) (i32.const 2)) (then ${runLoop(run)})) (i32.const 0)`,
  });
}

/**
 * Runs `run` forever in `where`: the start function, kwp_decide for every
 * flow (the self-test's probe too), or kwp_object for every NetworkPolicy
 * delivered (which the self-test does not deliver).
 */
export function straightLineRunIn(name: string, where: 'start' | 'decide' | 'object', run: StraightLineRun): Uint8Array {
  const loop = runLoop(run);
  const body = { start: { startBody: loop }, decide: { decideBody: `${loop} (i32.const 0)` }, object: { objectBody: `(if (i32.eq (local.get $op) (i32.const 0)) (then ${loop})) (i32.const 0)` } }[where];
  return sandboxModule({ meta: meta(name, where === 'object' ? { kinds: [Kinds.NetworkPolicy] } : {}), imports: [...STRAIGHT_LINE_RUNS[run].imports], fields: [...STRAIGHT_LINE_RUNS[run].fields], ...body });
}
