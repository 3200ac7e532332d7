import { describe, it, expect, beforeEach } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { ChainedModules } from '../pipeline/modules.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { sandboxModule, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { codeOf, codeOfAsync } from '../../test/fixtures/error-code.js';
import { PipelineController } from './pipeline-controller.js';
import { ModuleStore } from './module-store.js';

let stateDir: string;
beforeEach(() => { stateDir = mkdtempSync(join(tmpdir(), 'kwp-keep-')); });

const uploaded = (name: string) => sandboxModule({ meta: { ...DEFAULT_META, name, version: '1.0.0' } });
const allow = { name: 'allow', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept' } };

function agentLike(reservedNames: string[] = []) {
  const store = new ModuleStore({ stateDir, validation: 'inline', reservedNames });
  const engine = new PolicyEngine({ state: new ClusterState(), modules: new ChainedModules([store, fixtureModules()]) });
  const controller = new PipelineController({ engine, fallback: { stages: [allow] }, stateDir, store });
  return { store, engine, controller };
}

describe('the module store cannot lose a module a pipeline could run', () => {
  it('a module used only by the pipeline kept for rollback cannot be removed (409 KWP_ERR_MODULE_IN_USE), and is removable once no pipeline kept runs it', async () => {
    const { store, controller } = agentLike();
    await store.add(uploaded('custom'), { name: 'custom', version: '1.0.0' });
    controller.start();
    await controller.set({ stages: [{ name: 'mine', module: 'custom@1.0.0' }] });
    await controller.set({ stages: [allow] });
    // Active: allow only; rollback target: the pipeline with "mine".
    expect(store.get('custom')[0].usedBy).toEqual([]);
    let err: unknown;
    try { store.remove('custom'); } catch (e) { err = e; }
    expect(err).toMatchObject({ code: 'KWP_ERR_MODULE_IN_USE', status: 409 });
    expect((err as Error).message).toMatch(/custom@1\.0\.0 is used by stage\(s\) mine of the pipeline kept for rollback/);
    // The rollback still has its module, and so would a restart.
    await controller.rollback();
    expect(controller.get().stages.map((s) => s.name)).toEqual(['mine']);
    await controller.set({ stages: [allow] });
    await controller.set({ stages: [allow] });
    expect(codeOf(() => store.remove('custom'))).toBeUndefined();
    controller.stop();
  });

  it('an upload named like a built-in module is refused (409 KWP_ERR_MODULE_NAME_RESERVED), so it cannot replace the built-in', async () => {
    const { store } = agentLike(['network-policy', 'scripted']);
    expect(await codeOfAsync(store.add(uploaded('network-policy'), { name: 'network-policy', version: '1.0.0' }))).toBe('KWP_ERR_MODULE_NAME_RESERVED');
    expect(store.list()).toEqual([]);
    expect(await codeOfAsync(store.add(uploaded('my-policy'), { name: 'my-policy', version: '1.0.0' }))).toBeUndefined();
  });

  it('the pipeline view names the exact bytes each stage runs', async () => {
    const { store, controller } = agentLike();
    const stored = await store.add(uploaded('custom'), { name: 'custom', version: '1.0.0' });
    controller.start();
    const view = await controller.set({ stages: [{ name: 'mine', module: 'custom' }, allow] });
    expect(view.modules).toEqual([
      { stage: 'mine', name: 'custom', version: '1.0.0', sha256: stored.module.sha256 },
      { stage: 'allow', name: 'scripted', version: expect.any(String), sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ]);
    controller.stop();
  });
});
