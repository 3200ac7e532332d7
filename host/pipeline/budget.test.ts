import { describe, it, expect } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from './engine.js';
import type { PipelineSpec } from './spec.js';
import { KwpError } from '../errors.js';
import type { SandboxLimits } from '../runtime/limits.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { PipelineController } from '../control/pipeline-controller.js';
import type { StageIsolation } from './stage.js';
import { INSTANCE_THREAD_BYTES } from '../runtime/isolated-instance.js';

const fixtures = fixtureModules();
/** `n` stages of the scripted fixture, whose memory maximum is 1024 pages (64 MiB). */
const stages = (n: number, prefix = 's'): PipelineSpec => ({
  stages: Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, module: 'scripted', config: { egress: 'Accept', ingress: 'Accept' } })),
});

function started(limits: Partial<SandboxLimits>, fallback: PipelineSpec, isolation: StageIsolation = 'thread') {
  const engine = new PolicyEngine({ state: new ClusterState(), modules: fixtures, limits, isolation });
  const controller = new PipelineController({ engine, fallback, stateDir: mkdtempSync(join(tmpdir(), 'kwp-budget-')) });
  controller.start();
  return { engine, controller };
}

async function refusal(p: Promise<unknown>): Promise<KwpError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof KwpError) return err;
    throw err;
  }
  throw new Error('the change was accepted');
}

describe('a pipeline may have at most maxStages stages', () => {
  it('a pipeline of 33 stages is refused with the count and the limit, and the running one is unchanged', async () => {
    const { controller } = started({}, stages(1));
    const err = await refusal(controller.set(stages(33, 'x')));
    expect(err.code).toBe('KWP_ERR_PIPELINE_TOO_LARGE');
    expect(err.message).toContain('the pipeline has 33 stages but the host allows 32 (sandbox limit maxStages)');
    expect(controller.get().stages.map((s) => s.name)).toEqual(['s0']);
    controller.stop();
  });

  it('the limit is what refused: with maxStages raised the same pipeline builds', async () => {
    const { controller } = started({ maxStages: 40, memoryBudgetMiB: 8192 }, stages(1));
    expect((await controller.set(stages(33, 'x'))).stages).toHaveLength(33);
    controller.stop();
  });
});

describe('all pipelines kept share one memory budget', () => {
  it('the active, the rollback and the pipeline being built are counted together; the stage that would cross the budget is named', async () => {
    // Four stages of 64 MiB fit a 256 MiB budget: two active, two being built.
    const { engine, controller } = started({ memoryBudgetMiB: 256 }, stages(2, 'a'));
    expect(engine.memoryBudget.reservedBytes).toBe(128 * 2 ** 20);
    await controller.set(stages(2, 'b'));
    // Now b is active and a is kept warm for rollback: a third pipeline has no room.
    const err = await refusal(controller.set(stages(1, 'c'), undefined, 'PUT /v1/pipeline body'));
    expect(err.code).toBe('KWP_ERR_MEMORY_BUDGET');
    expect(err.message).toMatch(/^PUT \/v1\/pipeline body: stages\[0\] \(c0\): module scripted@[^ ]+ may use up to 64 MiB of memory and tables, but the pipelines kept \(active, rollback and being built\) already reserve 256 MiB of the memory budget of 256 MiB \(sandbox limit memoryBudgetMiB\)/);
    expect(controller.get().stages.map((s) => s.name)).toEqual(['b0', 'b1']);
    // Rolling back still works (no build), and nothing leaked from the refused build.
    await controller.rollback();
    expect(controller.get().stages.map((s) => s.name)).toEqual(['a0', 'a1']);
    expect(engine.memoryBudget.reservedBytes).toBe(256 * 2 ** 20);
    controller.stop();
    expect(engine.memoryBudget.reservedBytes).toBe(0);
  });

  it('a pipeline larger than the whole budget is refused at the first stage past it, and what it had reserved is returned', async () => {
    const { engine, controller } = started({ memoryBudgetMiB: 320 }, stages(1, 'a'));
    const err = await refusal(controller.set(stages(5, 'big')));
    expect(err.message).toMatch(/stages\[4\] \(big4\)/);
    expect(engine.memoryBudget.reservedBytes).toBe(64 * 2 ** 20);
    controller.stop();
  });

  it('the budget is what refused: with a larger one the same change builds', async () => {
    const { controller } = started({ memoryBudgetMiB: 320 }, stages(2, 'a'));
    await controller.set(stages(2, 'b'));
    expect((await controller.set(stages(1, 'c'))).stages).toHaveLength(1);
    controller.stop();
  });

  it('counts the instance thread of every stage when instances run in threads of their own (--module-threads)', async () => {
    // Four stages of 64 MiB fit 256 MiB in the main thread (above); with a thread each (24 MiB), two active and one more do not.
    const { engine, controller } = started({ memoryBudgetMiB: 256 }, stages(2, 'a'), 'worker');
    expect(INSTANCE_THREAD_BYTES).toBe(24 * 2 ** 20);
    expect(engine.memoryBudget.reservedBytes).toBe(2 * (64 + 24) * 2 ** 20);
    const err = await refusal(controller.set(stages(2, 'b')));
    expect(err.code).toBe('KWP_ERR_MEMORY_BUDGET');
    expect(err.message).toMatch(/stages\[0\] \(b0\): module scripted@[^ ]+ and its instance thread may use up to 88 MiB/);
    expect(controller.get().stages.map((s) => s.name)).toEqual(['a0', 'a1']);
    controller.stop();
    expect(engine.memoryBudget.reservedBytes).toBe(0);
  }, 60_000);
});
