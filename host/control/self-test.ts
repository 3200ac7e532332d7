// The last gate of an upload: run the module once, for real, before it is
// stored. Instantiation (with its start function), configuration (`{}` unless
// the uploader names a config the module needs) and one decision in each
// direction all run under a wall-clock deadline. Fuel already bounds each
// call, but fuel per call is generous (configuration may parse big objects).
// node:vm's timeout gives the phase that overran, but V8 checks it only at
// loop headers and calls, so a module can outlast it (a bulk instruction in
// progress is not interrupted): the guarantee is WorkerValidator's, which
// stops the whole thread (upload-validator.ts).
import { runInNewContext } from 'node:vm';
import { KwpError } from '../errors.js';
import { Verdict } from '../contract.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import { EvaluatorInstance } from '../runtime/instance.js';
import { DEFAULT_LIMITS } from '../runtime/limits.js';
import { encodeRecord, OFF_DIRECTION, RECORD_SIZE, RecordDirection } from '../abi/record.js';

export const DEFAULT_SELF_TEST_TIMEOUT_MS = DEFAULT_LIMITS.selfTestTimeoutMs;

type Phase = 'instantiation' | 'configuration' | 'the self-test decision';

/** A TCP packet between two unknown addresses: every evaluator must answer it without trapping. */
function probeRecord(direction: 0 | 1): Uint8Array {
  const rec = new Uint8Array(RECORD_SIZE);
  encodeRecord(rec, 0, {
    family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]),
    srcPort: 40000, dstPort: 80, icmpType: 0, icmpCode: 0,
  }, 0, 0);
  rec[OFF_DIRECTION] = direction;
  return rec;
}

export function runSelfTest(compiled: CompiledEvaluator, timeoutMs = DEFAULT_SELF_TEST_TIMEOUT_MS, config: Record<string, unknown> = {}): void {
  const source = compiled.source;
  let phase = 'instantiation' as Phase;
  const run = (): void => {
    const inst = new EvaluatorInstance(compiled);
    phase = 'configuration';
    inst.configure(config);
    phase = 'the self-test decision';
    for (const dir of [RecordDirection.Egress, RecordDirection.Ingress]) {
      const v = inst.decideOne(probeRecord(dir));
      if (v > Verdict.Pass) {
        throw new KwpError('KWP_ERR_SELF_TEST', `${source}: the self-test decision returned verdict ${v}, which ABI 1 does not define; return Accept, Deny, Next or Pass`);
      }
    }
  };
  try {
    runInNewContext('run()', { run }, { timeout: timeoutMs, displayErrors: false });
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      throw new KwpError('KWP_ERR_SELF_TEST', `${source}: ${phase} did not finish within ${timeoutMs} ms; the module loops or does far too much work per call`);
    }
    if (err instanceof KwpError) {
      if (phase === 'the self-test decision' && (err.code === 'KWP_ERR_TRAP' || err.code === 'KWP_ERR_FUEL_EXHAUSTED')) {
        const what = err.code === 'KWP_ERR_TRAP' ? 'trapped' : 'ran out of fuel';
        throw new KwpError('KWP_ERR_SELF_TEST', `${source}: the self-test decision (TCP 10.0.0.1 -> 10.0.0.2:80, unknown pods) ${what}: ${err.message}; run it with "kwp eval" to see where`, { cause: err });
      }
      if (phase === 'configuration' && (err.code === 'KWP_ERR_TRAP' || err.code === 'KWP_ERR_FUEL_EXHAUSTED')) {
        throw new KwpError('KWP_ERR_SELF_TEST', `${source}: configuration with ${JSON.stringify(config)} failed: ${err.message}`, { cause: err });
      }
      if (err.code === 'KWP_ERR_CONFIG_REJECTED') {
        throw new KwpError('KWP_ERR_CONFIG_REJECTED', `${source}: the self-test ${err.message}; give a config it accepts for the self-test (query "config", or kwp module push --self-test-config JSON)`, { cause: err });
      }
      throw err;
    }
    throw new KwpError('KWP_ERR_SELF_TEST', `${source}: ${phase} failed: ${(err as Error).message}`, { cause: err });
  }
}
