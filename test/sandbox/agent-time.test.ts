// Issue 14, time: a module that never returns, whichever way it goes about
// it, costs one flow its stage's failure policy within the bound, on a real
// `kwp agent --dataplane=off` over HTTP; /healthz answers within 1 s
// throughout, the agent lives and stays within its memory bound, and other
// flows are decided. An upload whose self-test never ends is refused on time.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import { SELF_TEST_GRACE_MS } from '../../host/control/upload-validator.js';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';
import { slowForSomePorts, neverStarts, TIME_ATTACKS, EXPLAIN_ATTACK_PORT } from './hostile-modules.js';

/**
 * docs/sandbox.md: a decision's tank of fuelPerDecision lasts a few ms of
 * 64 MiB fills; 5 s only tells an answer from a hang on a loaded machine.
 */
const DECISION_BOUND_MS = 5000;
/** The self-test deadline plus its grace, plus starting a validation process and instrumenting on a loaded machine. */
const UPLOAD_BOUND_MS = DEFAULT_LIMITS.selfTestTimeoutMs + SELF_TEST_GRACE_MS + 15_000;

let agent: AgentProcess;
beforeAll(async () => {
  agent = await AgentProcess.start(BASIC_MANIFESTS);
  await agent.runAlone(slowForSomePorts('slow-for-some-ports'), 'slow-for-some-ports');
}, 120_000);
afterAll(() => agent?.stop());

describe('a decision that never returns on its own is bounded on a real agent', () => {
  it.each(Object.entries(TIME_ATTACKS).map(([port, [what]]) => [port, what]))('port %s (%s): that flow gets the fail-closed policy within the bound, /healthz answers throughout, and port 80 is decided again', async (port, what) => {
    await agent.decidedAgain();
    const { result, health } = await agent.during(() => agent.explain('x/a', 'x/b', Number(port)));
    expect(result.status).toBe(200);
    expect(result.json.verdict, what).toBe('deny');
    expect(result.json.egress[0]).toMatchObject({ stage: 'hostile', failure: expect.stringMatching(/^(fuel|trap)$/) });
    expect(result.ms).toBeLessThan(DECISION_BOUND_MS);
    expectBounded(agent, health);
    await agent.decidedAgain();
  }, 60_000);

  it("an explanation that never returns: its reason is dropped within the bound, and the rest of the flow gets the stage's failure policy while the instance is rebuilt", async () => {
    await agent.decidedAgain();
    const { result, health } = await agent.during(() => agent.explain('x/a', 'x/b', EXPLAIN_ATTACK_PORT));
    expect(result.status).toBe(200);
    expect(result.json.egress[0]).toMatchObject({ stage: 'hostile', verdict: 'Accept' });
    expect(result.json.egress[0].reason).toBeUndefined();
    expect(result.json.ingress[0]).toMatchObject({ stage: 'hostile', verdict: 'Deny', failure: 'unavailable' });
    expect(result.ms).toBeLessThan(DECISION_BOUND_MS);
    expectBounded(agent, health);
  }, 60_000);
});

describe('an upload whose self-test never ends is refused within selfTestTimeoutMs', () => {
  it.each([
    ['a start function filling memory forever', 'start', 'fill'],
    ['a start function looping forever', 'start', 'loop'],
    ['a configuration filling memory forever', 'configure', 'fill'],
  ] as const)('%s: 422 KWP_ERR_SELF_TEST within the bound, /healthz answering throughout', async (_what, where, how) => {
    const name = `never-${where}-${how}`;
    const { result, health } = await agent.during(() => agent.uploadPatiently(neverStarts(name, where, how), name, '0.0.1'));
    expect(result.status).toBe(422);
    // The start function's or the configuration's tank (fuelPerCall, about
    // tens of ms of either loop on a quiet machine) may run out before the
    // deadline, or the deadline may come first on a loaded one: refused on
    // time either way, by the fuel (a trap in the start function fails
    // instantiation) or by the deadline.
    expect(['KWP_ERR_SELF_TEST', 'KWP_ERR_INSTANTIATE'], JSON.stringify(result.json)).toContain(result.json.code);
    expect(result.ms).toBeLessThan(UPLOAD_BOUND_MS);
    expectBounded(agent, health);
  }, 60_000);
});
