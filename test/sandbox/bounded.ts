// Issue 14's "bounded", as the real-agent proofs check it on an AgentProcess
// (test/fixtures/agent-process.ts) they watched during an attack.
import { expect } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import type { AgentProcess, HealthRecord } from '../fixtures/agent-process.js';

/**
 * docs/sandbox.md: the agent's RSS stays below memoryBudgetMiB plus about
 * 150 MiB of base; with --module-threads each stage's thread is counted in
 * the budget (INSTANCE_THREAD_BYTES), so the bound is the same.
 */
export const rssBoundMiB = (memoryBudgetMiB = DEFAULT_LIMITS.memoryBudgetMiB) => memoryBudgetMiB + 150;

/** The longest the agent's event loop may be held during an attack (docs/sandbox.md: /healthz answers within 1 s). */
export const LOOP_HELD_BOUND_MS = 1000;

/**
 * Issue 14's "bounded": the agent is alive, every /healthz asked during the
 * attack answered (each within the checker's 5 s abort), the agent's own
 * event loop was never held for LOOP_HELD_BOUND_MS, and its RSS stayed below
 * the bound. The 1 s is asserted on the agent's own measure rather than on
 * the answers as this process timed them: on a loaded 2-core machine the
 * test process's and the agent's turns on a core put answers past 1 s with
 * nothing blocking the agent, while a module that holds the agent's main
 * thread shows in its event-loop delay all the same.
 */
export function expectBounded(a: AgentProcess, health: HealthRecord, rssBound = rssBoundMiB()): void {
  expect(a.alive, a.log.slice(-4000)).toBe(true);
  expect(health.checks).toBeGreaterThan(0);
  expect(health.failures).toBe(0);
  expect(health.loopLagMaxMs, `the agent's event loop was held ${health.loopLagMaxMs} ms (slowest /healthz as timed here: ${health.slowestMs} ms)`).toBeLessThan(LOOP_HELD_BOUND_MS);
  expect(health.peakRssMiB).toBeGreaterThan(0);
  expect(health.peakRssMiB).toBeLessThan(rssBound);
}
