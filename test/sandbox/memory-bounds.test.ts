// Done means (issue 14): a hostile upload is answered within a bound, /healthz
// answers within 1 s throughout, the agent process stays alive, and its RSS
// stays below the documented budget (docs/sandbox.md).
import { describe, it, expect, afterEach } from 'vitest';
import { DEFAULT_LIMITS } from '../../host/runtime/limits.js';
import { manyTables, sandboxModule, DEFAULT_META } from '../fixtures/sandbox-modules.js';
import { AgentProcess } from './agent-process.js';

/** docs/sandbox.md: the agent's RSS stays below memoryBudgetMiB plus about 150 MiB of base. */
const RSS_BOUND_MIB = DEFAULT_LIMITS.memoryBudgetMiB + 150;
const named = (name: string, bytes: (meta: Record<string, unknown>) => Uint8Array) => bytes({ ...DEFAULT_META, name });

let agent: AgentProcess | undefined;
afterEach(async () => { await agent?.stop(); agent = undefined; });

function expectBounded(a: AgentProcess, health: { slowestMs: number; failures: number; checks: number; peakRssMiB: number }, rssBound = RSS_BOUND_MIB) {
  expect(a.alive, a.log).toBe(true);
  expect(health.checks).toBeGreaterThan(0);
  expect(health.failures).toBe(0);
  expect(health.slowestMs).toBeLessThan(1000);
  expect(health.peakRssMiB).toBeLessThan(rssBound);
}

describe('the agent stays bounded against uploads that declare a lot in a few bytes', () => {
  it('an upload of under 1 KB declaring 40 tables of 10 million elements is refused at once (maxTables), and the agent answers throughout', async () => {
    agent = await AgentProcess.start();
    const bytes = manyTables(40, 10_000_000);
    expect(bytes.length).toBeLessThan(1024);
    agent.watch();
    const res = await agent.upload(bytes, 'sandbox-fixture', '0.0.1');
    const health = await agent.unwatch();
    expect(res.status).toBe(422);
    expect(res.json.code).toBe('KWP_ERR_TABLE_TOO_LARGE');
    expect(res.ms).toBeLessThan(30_000);
    expectBounded(agent, health);
    expect((await agent.request('GET', '/v1/modules')).json.modules).toEqual([]);
  }, 120_000);

  it('with the table limits lifted, the same upload exhausts only the validation process (validationHeapMiB): refused, and the agent lives on', async () => {
    agent = await AgentProcess.start(['--sandbox-limit', 'maxTables=100', '--sandbox-limit', 'maxTableElements=10000000', '--sandbox-limit', 'validationHeapMiB=256']);
    agent.watch();
    const res = await agent.upload(manyTables(40, 10_000_000), 'sandbox-fixture', '0.0.1');
    const health = await agent.unwatch();
    expect(res.json.code, JSON.stringify(res.json)).toBe('KWP_ERR_VALIDATION_LIMIT');
    expect(res.json.message).toContain('256 MiB heap');
    expectBounded(agent, health);
    // The next upload gets a fresh validation process.
    const ok = await agent.upload(named('after-the-storm', (meta) => sandboxModule({ meta })), 'after-the-storm', '0.0.1');
    expect(ok.status, JSON.stringify(ok.json)).toBe(201);
  }, 180_000);
});
