// The validation queue is bounded. Each upload waiting for the validation
// process holds its body, and one upload may hold the process for up to the
// watchdog's minute, while the rate limits let 120 a minute in: unbounded,
// the queue grew by hundreds of MiB a minute that an attacker kept it fed,
// and every later upload waited behind it.
import { describe, it, expect, afterEach } from 'vitest';
import { ProcessValidator } from './upload-validator.js';
import { resolveLimits } from '../runtime/limits.js';
import { neverStarts } from '../../test/sandbox/hostile-modules.js';
import { sandboxModule, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { codeOfAsync } from '../../test/fixtures/error-code.js';

const validators: ProcessValidator[] = [];
afterEach(async () => { await Promise.all(validators.splice(0).map((v) => v.close())); });

const limits = resolveLimits({ selfTestTimeoutMs: 300 });
const request = (bytes: Uint8Array, name: string) => ({ bytes, name, version: '0.0.1', limits, selfTestConfig: {}, selfTestTimeoutMs: 300 });

describe('uploads waiting for validation are bounded', () => {
  it('past the bound, an upload is refused at once with KWP_ERR_RATE_LIMITED while the ones admitted are all answered', async () => {
    const v = new ProcessValidator(60_000, limits.validationHeapMiB, 2);
    validators.push(v);
    // Each of these holds the process until its self-test deadline kills it.
    const hanging = Array.from({ length: 5 }, (_, i) => v.validate(request(neverStarts(`hangs-${i}`, 'configure', 'loop'), `hangs-${i}`)));
    const codes = await Promise.all(hanging.map((p) => codeOfAsync(p)));
    expect(codes.slice(0, 2)).toEqual(['KWP_ERR_SELF_TEST', 'KWP_ERR_SELF_TEST']);
    expect(codes.slice(2)).toEqual(['KWP_ERR_RATE_LIMITED', 'KWP_ERR_RATE_LIMITED', 'KWP_ERR_RATE_LIMITED']);
  }, 90_000);

  it('the message says why, and once the queue is answered uploads are validated again', async () => {
    const v = new ProcessValidator(60_000, limits.validationHeapMiB, 1);
    validators.push(v);
    const first = v.validate(request(neverStarts('hangs', 'configure', 'loop'), 'hangs'));
    let message = '';
    await v.validate(request(sandboxModule(), DEFAULT_META.name)).catch((err: Error) => { message = err.message; });
    expect(message).toMatch(/1 uploads are being validated or waiting for it/);
    expect(await codeOfAsync(first)).toBe('KWP_ERR_SELF_TEST');
    expect(await codeOfAsync(v.validate(request(sandboxModule(), DEFAULT_META.name)))).toBeUndefined();
  }, 90_000);
});
