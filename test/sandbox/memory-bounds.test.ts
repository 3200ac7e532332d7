// Done means (issue 14): a hostile upload is answered within a bound, /healthz
// answers within 1 s throughout, the agent process stays alive, and its RSS
// stays below the documented budget (docs/sandbox.md).
import { describe, it, expect, afterEach } from 'vitest';
import { manyTables, sandboxModule, DEFAULT_META } from '../fixtures/sandbox-modules.js';
import { AgentProcess, BASIC_MANIFESTS } from '../fixtures/agent-process.js';
import { expectBounded, rssBoundMiB } from './bounded.js';
import { fat } from './hostile-modules.js';

const named = (name: string, bytes: (meta: Record<string, unknown>) => Uint8Array) => bytes({ ...DEFAULT_META, name });

let agent: AgentProcess | undefined;
afterEach(async () => { await agent?.stop(); agent = undefined; });

describe('the agent stays bounded against uploads that declare a lot in a few bytes', () => {
  it('an upload of under 1 KB declaring 40 tables of 10 million elements is refused at once (maxTables), and the agent answers throughout', async () => {
    agent = await AgentProcess.start(BASIC_MANIFESTS);
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
    // The self-test deadline is lifted too: on a loaded machine, instantiating the tables can outlast it before the heap runs out.
    agent = await AgentProcess.start([...BASIC_MANIFESTS, '--sandbox-limit', 'maxTables=100', '--sandbox-limit', 'maxTableElements=10000000', '--sandbox-limit', 'validationHeapMiB=256', '--sandbox-limit', 'selfTestTimeoutMs=60000']);
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

// The per-stage cap is 256 pages (16 MiB) here, and each `fat` stage writes
// all of it when configured; the default pipeline's five stages, kept warm
// for rollback, reserve 80 MiB of the 384 MiB budget. So 24 such stages
// cannot fit, 12 can, 12 more beside them cannot. With --module-threads each
// stage also reserves its thread (INSTANCE_THREAD_BYTES, 24 MiB): the five
// take 200 MiB, 4 fat stages fit and 4 more do not. Either way the RSS stays
// below the budget plus the base, threads included. (Sixteen MiB a stage
// rather than 64 keeps each stage's work on the agent's main thread short,
// so /healthz stays answered on a loaded machine.)
describe.each([
  { mode: 'in the main thread', flags: [] as string[], fitting: 12 },
  { mode: 'with --module-threads', flags: ['--module-threads'], fitting: 4 },
])('the agent stays bounded against pipelines of many stages, each at the per-stage cap ($mode)', ({ flags, fitting }) => {
  const PAGES = 256;
  const BUDGET_MIB = 384;

  it(`a pipeline of 24 such stages is refused by the memory budget (memoryBudgetMiB), ${fitting} run, ${fitting} more beside them and 33 (maxStages) are refused, and the RSS stays below the budget plus the base throughout`, async () => {
    agent = await AgentProcess.start([...BASIC_MANIFESTS, ...flags, '--sandbox-limit', `maxMemoryPages=${PAGES}`, '--sandbox-limit', `memoryBudgetMiB=${BUDGET_MIB}`]);
    const up = await agent.uploadPatiently(fat('fat', PAGES), 'fat', '0.0.1');
    expect(up.status, JSON.stringify(up.json)).toBe(201);
    const stages = (n: number, prefix = 'fat') => ({ stages: Array.from({ length: n }, (_, i) => ({ name: `${prefix}-${i}`, module: 'fat', config: { touch: 'every page' } })) });
    const { result, health } = await agent.during(async () => ({
      many: await agent!.request('PUT', '/v1/pipeline', stages(24)),
      fitting: await agent!.request('PUT', '/v1/pipeline', stages(fitting)),
      // Building as many again beside the active ones and the rollback pipeline does not fit.
      more: await agent!.request('PUT', '/v1/pipeline', stages(fitting, 'more')),
      tooMany: await agent!.request('PUT', '/v1/pipeline', stages(33)),
    }));
    expect(result.many.status).toBe(422);
    expect(result.many.json.code).toBe('KWP_ERR_MEMORY_BUDGET');
    expect(result.many.json.message).toContain(`memory budget of ${BUDGET_MIB} MiB (sandbox limit memoryBudgetMiB)`);
    expect(result.fitting.status, JSON.stringify(result.fitting.json)).toBe(200);
    expect(result.more.json.code).toBe('KWP_ERR_MEMORY_BUDGET');
    expect(result.tooMany.json.code).toBe('KWP_ERR_PIPELINE_TOO_LARGE');
    expectBounded(agent, health, rssBoundMiB(BUDGET_MIB));
    // The stages are there, and their memory is real.
    expect(agent.rssMiB()).toBeGreaterThan(fitting * PAGES / 16);
    expect((await agent.request('GET', '/v1/pipeline')).json.stages).toHaveLength(fitting);
  }, 180_000);
});
