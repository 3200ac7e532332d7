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

/**
 * Issue 14's "bounded": the agent is alive, every /healthz asked during the
 * attack answered (within 1 s), and its RSS stayed below the bound.
 */
export function expectBounded(a: AgentProcess, health: HealthRecord, rssBound = rssBoundMiB()): void {
  expect(a.alive, a.log.slice(-4000)).toBe(true);
  expect(health.checks).toBeGreaterThan(0);
  expect(health.failures).toBe(0);
  expect(health.slowestMs).toBeLessThan(1000);
  expect(health.peakRssMiB).toBeGreaterThan(0);
  expect(health.peakRssMiB).toBeLessThan(rssBound);
}
