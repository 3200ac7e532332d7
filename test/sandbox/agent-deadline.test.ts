// Issue 14, time, the part fuel cannot promise: a module whose loop runs
// 2,000 instructions per unit of fuel, with the largest tanks the limits
// allow, on a real `kwp agent --dataplane=off` over HTTP. Only the
// wall-clock backstop (each stage instance in a thread of its own, stopped at
// its deadline) bounds it: the flow gets the fail-closed policy within the
// bound, /healthz answers within 1 s throughout, the agent lives within its
// memory bound, the overrun is counted, the stage is rebuilt, and a
// configuration that never returns is refused on time.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';
import { straightLineLoops, STRAIGHT_LINE_PORT } from './hostile-modules.js';

/** decisionDeadlineMs (50) plus stopping the thread and an HTTP round trip on a loaded machine. */
const DECISION_BOUND_MS = 3000;
/** feedDeadlineMs (2000 here) plus starting the stage's thread and a pipeline build. */
const CONFIGURE_BOUND_MS = 20_000;

let agent: AgentProcess;
beforeAll(async () => {
  agent = await AgentProcess.start([...BASIC_MANIFESTS, '--module-threads', '--sandbox-limit', 'fuelPerDecision=30000000', '--sandbox-limit', 'fuelPerCall=2000000000', '--sandbox-limit', 'feedDeadlineMs=2000']);
  await agent.runAlone(straightLineLoops('straight-line-loops'), 'straight-line-loops');
}, 120_000);
afterAll(() => agent?.stop());

describe('a call that fuel lets run for minutes is bounded by its deadline on a real agent', () => {
  it('kwp_decide: the flow is denied within the bound, /healthz answers, the overrun is counted and the stage rebuilt', async () => {
    await agent.decidedAgain();
    const { result, health } = await agent.during(() => agent.explain('x/a', 'x/b', STRAIGHT_LINE_PORT));
    expect(result.status).toBe(200);
    expect(result.json.verdict).toBe('deny');
    expect(result.json.egress[0]).toMatchObject({ stage: 'hostile', failure: 'deadline' });
    expect(result.ms).toBeLessThan(DECISION_BOUND_MS);
    expectBounded(agent, health);
    const metrics = await agent.request('GET', '/metrics');
    expect(metrics.text).toMatch(/kwp_stage_deadline_exceeded_total\{[^}]*stage="hostile"[^}]*\} 1/);
    expect(agent.log).toMatch(/stage hostile: module straight-line-loops: kwp_decide did not return within 50 ms \(sandbox limit decisionDeadlineMs\)/);
    await agent.decidedAgain();
  }, 60_000);

  it('kwp_configure: PUT /v1/pipeline is refused within the bound with KWP_ERR_DEADLINE_EXCEEDED, and the running pipeline keeps deciding', async () => {
    const { result, health } = await agent.during(() => agent.request('PUT', '/v1/pipeline', { stages: [{ name: 'hostile', module: 'straight-line-loops', config: { hang: true } }] }));
    expect(result.status).toBeGreaterThanOrEqual(400);
    expect(result.text).toContain('KWP_ERR_DEADLINE_EXCEEDED');
    expect(result.ms).toBeLessThan(CONFIGURE_BOUND_MS);
    expectBounded(agent, health);
    await agent.decidedAgain();
  }, 60_000);
});
