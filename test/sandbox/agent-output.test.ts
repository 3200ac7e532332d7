// Issue 14, output: everything a module can make the agent write — log
// lines, explanation reasons, abort messages, failure lines, refusal texts,
// metadata — from 18 stages at once, on a real `kwp agent --dataplane=off`
// over HTTP. The agent's log grows by at most what the rates and sizes
// allow, every answer stays small, /healthz answers within 1 s throughout,
// the agent lives and stays within its memory bound.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import { sandboxModule } from '../fixtures/sandbox-modules.js';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';
import { loud, abortsLoudly, undefinedVerdict, hostileMeta } from './hostile-modules.js';

/** Raised from 1024 so that 16 stages' reasons (both directions) are more than maxExplainBytes. */
const REASON_BYTES = 8192;
const LOUD_STAGES = 16;
const ABORT_PORT = 7001;
const BAD_VERDICT_PORT = 7002;
/**
 * One log line as the agent writes it (docs/sandbox.md): at most
 * maxLogLineBytes of the module's text, twice that once JSON escapes its
 * quotes and backslashes, plus the cut note and the fields around it.
 */
const LINE_BYTES = 2 * DEFAULT_LIMITS.maxLogLineBytes + 512;

let agent: AgentProcess;
beforeAll(async () => {
  agent = await AgentProcess.start([...BASIC_MANIFESTS, '--sandbox-limit', `maxReasonBytes=${REASON_BYTES}`]);
  for (const [name, bytes] of [['loud', loud('loud')], ['aborts', abortsLoudly('aborts', ABORT_PORT)], ['bad-verdict', undefinedVerdict('bad-verdict', BAD_VERDICT_PORT)]] as const) {
    const up = await agent.uploadPatiently(bytes, name, '0.0.1');
    expect(up.status, JSON.stringify(up.json)).toBe(201);
  }
  const stages = [
    ...Array.from({ length: LOUD_STAGES }, (_, i) => ({ name: `loud-${i}`, module: 'loud' })),
    { name: 'aborts', module: 'aborts' }, { name: 'bad-verdict', module: 'bad-verdict' },
  ];
  const put = await agent.request('PUT', '/v1/pipeline', { stages });
  expect(put.status, JSON.stringify(put.json)).toBe(200);
}, 180_000);
afterAll(() => agent?.stop());

describe('what 18 hostile stages make the agent write is bounded', () => {
  it('explaining flows for 3 s: the log grows by at most the line rate times the line size of each stage, each answer stays under twice maxExplainBytes', async () => {
    const before = agent.outputBytes;
    const started = Date.now();
    const { result, health } = await agent.during(async () => {
      let largest = 0;
      let n = 0;
      for (; Date.now() - started < 3000; n++) {
        const res = await agent.explain('x/a', 'x/b', [80, ABORT_PORT, BAD_VERDICT_PORT][n % 3]);
        expect(res.status).toBe(200);
        largest = Math.max(largest, res.bytes);
      }
      return { largest, n, last: await agent.explain('x/a', 'x/b', 80) };
    });
    // Let the last lines reach the pipe.
    await new Promise((r) => setTimeout(r, 500));
    const seconds = (Date.now() - started) / 1000;
    const written = agent.outputBytes - before;
    // LOUD_STAGES instances at logLinesPerSecond, each line at most LINE_BYTES; the rate's first second is a full burst.
    const bound = LOUD_STAGES * DEFAULT_LIMITS.logLinesPerSecond * (Math.ceil(seconds) + 1) * LINE_BYTES + 2 * 64 * 1024;
    expect(result.n).toBeGreaterThan(3);
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(bound);
    expect(result.largest).toBeLessThan(2 * DEFAULT_LIMITS.maxExplainBytes + 16 * 1024);
    const steps = [...result.last.json.egress, ...result.last.json.ingress];
    expect(steps.some((s: { reason?: string }) => /reason left out: .* sandbox limit maxExplainBytes/.test(s.reason ?? ''))).toBe(true);
    expect(steps.filter((s: { reason?: string }) => s.reason?.includes('more bytes cut')).length).toBeGreaterThan(0);
    expectBounded(agent, health);
  }, 120_000);

  it('a module log line names all 16 MiB of its memory, and the agent writes at most maxLogLineBytes of it, saying how much was cut', () => {
    const lines = agent.log.split('\n').filter((l) => l.includes('more bytes cut') && l.includes('"module":"loud"'));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line.length).toBeLessThan(LINE_BYTES + DEFAULT_LIMITS.maxLogLineBytes * 5);
  });

  it('an abort naming 63 MiB and a verdict the ABI lacks on every flow log at most failureLinesPerSecond lines each, every one short', () => {
    const aborts = agent.log.split('\n').filter((l) => l.includes('stage aborts'));
    expect(aborts.length).toBeGreaterThan(0);
    // The message and the file name, maxAbortMessageChars each: NULs, written as '?'.
    for (const line of aborts) expect(line.length).toBeLessThan(DEFAULT_LIMITS.maxAbortMessageChars * 2 * 2 + 2048);
    expect(aborts.some((l) => l.includes('more characters cut'))).toBe(true);
    const badVerdicts = agent.log.split('\n').filter((l) => l.includes('returned verdict 9'));
    expect(badVerdicts.length).toBeGreaterThan(0);
    expect(badVerdicts.length).toBeLessThanOrEqual(6);
    expect(agent.log).toMatch(/similar lines suppressed/);
  });

  it('a configuration refused with a text of 2 GiB answers PUT /v1/pipeline with at most maxReasonBytes of it', async () => {
    const { result, health } = await agent.during(() => agent.request('PUT', '/v1/pipeline', { stages: [{ name: 'refuses', module: 'loud', config: { please: 'refuse' } }] }));
    expect(result.status).toBe(422);
    expect(result.json.code).toBe('KWP_ERR_CONFIG_REJECTED');
    expect(result.bytes).toBeLessThan(2 * REASON_BYTES + 2048);
    expect(result.json.message).toMatch(/more bytes cut\)/);
    expectBounded(agent, health);
  }, 60_000);

  it.each([
    ['a description of 1 MB', { description: 'd'.repeat(1_000_000) }],
    ['a description over maxMetaStringChars', { description: 'd'.repeat(DEFAULT_LIMITS.maxMetaStringChars + 1) }],
    ['a kinds list of 1000 entries', { kinds: Array.from({ length: 1000 }, (_, i) => `v1/Kind${i}`) }],
  ])('an upload whose kwp.meta has %s is refused (422 KWP_ERR_METADATA), and GET /v1/modules stays small', async (_what, extra) => {
    const { result, health } = await agent.during(() => agent.uploadPatiently(sandboxModule({ meta: hostileMeta('big-meta', extra) }), 'big-meta', '0.0.1'));
    expect(result.status).toBe(422);
    expect(result.json.code).toBe('KWP_ERR_METADATA');
    expect(result.bytes).toBeLessThan(4096);
    expect((await agent.request('GET', '/v1/modules')).bytes).toBeLessThan(16 * 1024);
    expectBounded(agent, health);
  }, 60_000);
});
