// The measure behind expectBounded's 1 s (bounded.ts): a watch reads how long
// the agent's own event loop was held, so the proofs must see a held loop as
// held. SIGSTOP holds the whole process, the event loop with it, as a module
// spinning on the main thread would; the timers the agent's delay monitor
// arms come due late by as long as it was stopped.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { LOOP_HELD_BOUND_MS } from './bounded.js';

const STOPPED_MS = 1500;

let agent: AgentProcess;
beforeAll(async () => { agent = await AgentProcess.start(BASIC_MANIFESTS); }, 120_000);
afterAll(() => agent?.stop());

describe('a watch reads the agent\'s own event-loop delay', () => {
  it('an agent held for 1.5 s shows its loop held past the bound, though every /healthz still answers', async () => {
    const { health } = await agent.during(async () => {
      await new Promise((r) => setTimeout(r, 300));
      process.kill(agent.child.pid!, 'SIGSTOP');
      await new Promise((r) => setTimeout(r, STOPPED_MS));
      process.kill(agent.child.pid!, 'SIGCONT');
      await new Promise((r) => setTimeout(r, 300));
    });
    expect(health.failures).toBe(0);
    expect(health.loopLagMaxMs).toBeGreaterThanOrEqual(LOOP_HELD_BOUND_MS);
    expect(health.loopLagMaxMs).toBeLessThan(Number.POSITIVE_INFINITY);
  }, 60_000);

  it('the window starts with the watch: a hold before it is not counted', async () => {
    process.kill(agent.child.pid!, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, STOPPED_MS));
    process.kill(agent.child.pid!, 'SIGCONT');
    const { health } = await agent.during(() => new Promise((r) => setTimeout(r, 500)));
    expect(health.checks).toBeGreaterThan(0);
    expect(health.loopLagMaxMs).toBeLessThan(LOOP_HELD_BOUND_MS);
  }, 60_000);
});
