// Issue 14, time, on the default agent (no --module-threads, so fuel is the
// only bound and the module runs on the thread that answers /healthz): a
// loop whose body is 50,000 instructions of straight-line code, in every
// place a module runs. Fuel charged one unit per loop header let each of
// these run for hours; charged by the code each header guards, the call
// ends on fuel within the bound docs/sandbox.md gives, /healthz answering
// within 1 s throughout, on a real `kwp agent --dataplane=off` over HTTP.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import { SELF_TEST_GRACE_MS } from '../../host/control/upload-validator.js';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';
import { STRAIGHT_LINE_RUNS, STRAIGHT_LINE_RUN_PORTS, straightLineRuns, straightLineRunIn, type StraightLineRun } from './hostile-modules.js';

/**
 * docs/sandbox.md: a decision's tank lasts a few ms and a call's tens of
 * ms (several times that on a loaded machine); these bounds add an HTTP
 * request, and a pipeline build, on a loaded 2-core machine.
 * Without the weighting each of these calls runs for hours.
 */
const DECISION_BOUND_MS = 3000;
const CALL_BOUND_MS = 10_000;
const UPLOAD_BOUND_MS = DEFAULT_LIMITS.selfTestTimeoutMs + SELF_TEST_GRACE_MS + 15_000;
const RUNS = Object.keys(STRAIGHT_LINE_RUNS) as StraightLineRun[];
const slug = (run: StraightLineRun) => run.replace(/[^a-z0-9]+/g, '-');

let agent: AgentProcess;
beforeAll(async () => {
  agent = await AgentProcess.start(BASIC_MANIFESTS);
  for (const run of RUNS) {
    for (const [name, bytes] of [[`runs-${slug(run)}`, straightLineRuns(`runs-${slug(run)}`, run)], [`objects-${slug(run)}`, straightLineRunIn(`objects-${slug(run)}`, 'object', run)]] as const) {
      const up = await agent.uploadPatiently(bytes, name, '0.0.1');
      if (up.status !== 201) throw new Error(`upload of ${name} answered ${up.status}: ${JSON.stringify(up.json)}`);
    }
  }
}, 180_000);
afterAll(() => agent?.stop());

const setPipeline = (module: string, config?: Record<string, unknown>) => agent.request('PUT', '/v1/pipeline', { stages: [{ name: 'hostile', module, ...(config ? { config } : {}) }] });

/** From a running pipeline of `run`'s module, `put` is refused on fuel within the bound, the agent bounded, and the running pipeline decides again. */
async function refusedOnFuel(run: StraightLineRun, put: () => ReturnType<typeof setPipeline>): Promise<void> {
  expect((await setPipeline(`runs-${slug(run)}`)).status).toBe(200);
  const { result, health } = await agent.during(put);
  expect(result.status).toBeGreaterThanOrEqual(400);
  expect(result.text).toContain('ran out of fuel');
  expect(result.ms).toBeLessThan(CALL_BOUND_MS);
  expectBounded(agent, health);
  await agent.decidedAgain();
}

describe.each(RUNS)('a loop of 50,000 instructions (%s) on the default agent', (run) => {
  it('in kwp_decide: that flow gets the fail-closed policy on fuel within the bound, /healthz answers throughout, and port 80 is decided again', async () => {
    expect((await setPipeline(`runs-${slug(run)}`)).status).toBe(200);
    await agent.decidedAgain();
    const { result, health } = await agent.during(() => agent.explain('x/a', 'x/b', STRAIGHT_LINE_RUN_PORTS[run]));
    expect(result.status).toBe(200);
    expect(result.json.verdict).toBe('deny');
    expect(result.json.egress[0]).toMatchObject({ stage: 'hostile', failure: 'fuel' });
    expect(result.ms).toBeLessThan(DECISION_BOUND_MS);
    expectBounded(agent, health);
    await agent.decidedAgain();
  }, 60_000);

  it('in kwp_configure: PUT /v1/pipeline is refused on fuel within the bound, /healthz answers throughout, and the running pipeline keeps deciding', async () => {
    await refusedOnFuel(run, () => setPipeline(`runs-${slug(run)}`, { hang: true }));
  }, 60_000);

  it("in kwp_object (for the cluster's NetworkPolicies): PUT /v1/pipeline is refused on fuel within the bound, /healthz answers throughout", async () => {
    await refusedOnFuel(run, () => setPipeline(`objects-${slug(run)}`));
  }, 60_000);

  it("in the upload self-test's decision: 422 KWP_ERR_SELF_TEST naming fuel within the bound, /healthz answering throughout", async () => {
    const name = `self-test-${slug(run)}`;
    const { result, health } = await agent.during(() => agent.uploadPatiently(straightLineRunIn(name, 'decide', run), name, '0.0.1'));
    expect(result.status).toBe(422);
    expect(result.json.code).toBe('KWP_ERR_SELF_TEST');
    // Not the self-test deadline: the decision's fuel ended it.
    expect(result.json.message).toContain('ran out of fuel');
    expect(result.ms).toBeLessThan(UPLOAD_BOUND_MS);
    expectBounded(agent, health);
  }, 60_000);

  it('in the start function: the upload is refused on fuel (KWP_ERR_INSTANTIATE) within the bound, /healthz answering throughout', async () => {
    const name = `start-${slug(run)}`;
    const { result, health } = await agent.during(() => agent.uploadPatiently(straightLineRunIn(name, 'start', run), name, '0.0.1'));
    expect(result.status).toBe(422);
    // The start function's tank (fuelPerCall, tens of ms) runs out long
    // before the self-test deadline: instantiation fails, on fuel.
    expect(result.json.code, JSON.stringify(result.json)).toBe('KWP_ERR_INSTANTIATE');
    expect(result.ms).toBeLessThan(UPLOAD_BOUND_MS);
    expectBounded(agent, health);
  }, 60_000);
});
