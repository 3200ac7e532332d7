import { describe, it, expect, afterEach } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtinWasmDir } from '../pipeline/modules.js';
import { adminHarness, auth, type AdminHarness } from '../../test/fixtures/admin-harness.js';
import { closeHarnesses, slowestHealthAnswer } from '../../test/fixtures/health-watch.js';
import { sandboxModule, fillLoop, BIG_MEMORY, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';

// Hostile uploads whose self-test outlasts every bound fuel gives: a loop of
// 64 MiB fills under the largest tank the limits accept (about a minute of
// filling). selfTestTimeoutMs must stop them: the upload answered on time,
// the uploads behind it served, the agent's health endpoint answering
// throughout. Two clocks keep that deadline (node:vm inside the validation
// process, a timer in the agent that kills the process); with the metered
// fills either alone stops these modules, and with both removed every case
// here fails.
const SELF_TEST_MS = 300;
/** The documented bound, generously: instrumentation (binaryen on a loaded machine) plus the deadline and its grace. */
const ANSWER_BOUND_MS = 15_000;
const HEALTH_BOUND_MS = 1000;
const FRESH_THREAD_MS = 45_000;

const open: AdminHarness[] = [];
afterEach(() => closeHarnesses(open));

async function agent(): Promise<{ h: AdminHarness; url: string }> {
  const h = await adminHarness({
    validation: 'worker',
    limits: { fuelPerCall: 0x7fffffff, fuelPerDecision: Math.floor(0x7fffffff / 64), selfTestTimeoutMs: SELF_TEST_MS },
  });
  open.push(h);
  return { h, url: await h.server.listen() };
}

function upload(url: string, name: string, version: string, bytes: Uint8Array): Promise<{ status: number; body: { code?: string; message?: string }; ms: number }> {
  const started = performance.now();
  return fetch(`${url}/v1/modules?name=${name}&version=${version}`, {
    method: 'POST', headers: { ...auth, 'content-type': 'application/wasm' }, body: Buffer.from(bytes),
  }).then(async (res) => ({ status: res.status, body: await res.json() as { code?: string; message?: string }, ms: performance.now() - started }));
}


const hostile = (name: string, opts: Parameters<typeof sandboxModule>[0]) =>
  sandboxModule({ memory: BIG_MEMORY, meta: { ...DEFAULT_META, name }, ...opts });

describe('an upload whose self-test never ends is stopped on time', () => {
  const cases: Array<[string, Uint8Array]> = [
    ['kwp_configure', hostile('fills-in-configure', { configureBody: fillLoop(64 * 1024 * 1024 - 1024) })],
    ['the start function', hostile('fills-in-start', { startBody: fillLoop(64 * 1024 * 1024 - 1024).replace(/\(i32\.const 0\)$/, '') })],
    ['the self-test decision', hostile('fills-in-decide', { decideBody: fillLoop(64 * 1024 * 1024 - 1024) })],
  ];

  it.each(cases)('filling memory in a loop in %s: refused within the bound, /healthz answering throughout, and the upload queued behind it stored', async (_where, bytes) => {
    const { h, url } = await agent();
    // A first upload starts the validation process, so the hostile one's time is its instrumentation and its deadline.
    expect((await upload(url, 'warm-up', '0.0.1', sandboxModule({ meta: { ...DEFAULT_META, name: 'warm-up' } }))).status).toBe(201);
    const name = JSON.parse(new TextDecoder().decode(extractMeta(bytes))).name as string;
    const slow = upload(url, name, '0.0.1', bytes);
    // Queued behind the hostile one on the same validation process.
    const behind = upload(url, 'scripted', '1.0.0', readFileSync(join(builtinWasmDir(), 'fixtures', 'scripted.wasm')));
    const slowestHealth = await slowestHealthAnswer(url, Promise.all([slow, behind]));
    const refused = await slow;
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe('KWP_ERR_SELF_TEST');
    expect(refused.ms).toBeLessThan(ANSWER_BOUND_MS);
    const stored = await behind;
    expect(stored.status).toBe(201);
    // It waited for the hostile upload's bound only, then ran in a fresh process (which, on a loaded
    // machine, starts slowly: the generous figure covers loading the validator and binaryen anew).
    expect(stored.ms).toBeGreaterThan(refused.ms);
    expect(stored.ms - refused.ms).toBeLessThan(FRESH_THREAD_MS);
    expect(slowestHealth).toBeLessThan(HEALTH_BOUND_MS);
    expect(h.store.list().map((m) => m.name).sort()).toEqual(['scripted', 'warm-up']);
  }, 120_000);
});

/** The kwp.meta payload of a module built by sandboxModule (its only custom section). */
function extractMeta(bytes: Uint8Array): Uint8Array {
  const mod = new WebAssembly.Module(bytes as BufferSource);
  return new Uint8Array(WebAssembly.Module.customSections(mod, 'kwp.meta')[0]);
}
