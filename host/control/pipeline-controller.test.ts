import { loggerOf } from '../logger.js';
import { describe, it, expect, beforeEach } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterState } from '../state/cluster-state.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { ChainedModules } from '../pipeline/modules.js';
import type { PipelineSpec, StageSpec } from '../pipeline/spec.js';
import { Kinds, type KubeObject, type Packet } from '../contract.js';
import { KwpError } from '../errors.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { sandboxModule, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { PipelineController, type PipelineControllerOptions } from './pipeline-controller.js';
import { ModuleStore } from './module-store.js';
import { codeOf, codeOfAsync } from '../../test/fixtures/error-code.js';

const fixtures = fixtureModules();
const packet = (dstPort = 80): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]),
  srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0,
});
const scripted = (name: string, verdict: string, extra: Record<string, unknown> = {}): StageSpec =>
  ({ name, module: 'scripted', config: { egress: verdict, ingress: verdict, ...extra } });
const allowFirst: PipelineSpec = { stages: [scripted('allow', 'Accept'), scripted('deny', 'Deny')] };
const denyFirst: PipelineSpec = { stages: [scripted('deny', 'Deny'), scripted('allow', 'Accept')] };
// The engine shares a stage whose spec a live pipeline runs (a reorder feeds nothing): these share no stage with the two above.
const denyFresh: PipelineSpec = { stages: [scripted('deny-fed', 'Deny'), scripted('allow-fed', 'Accept')] };
const allowFresh: PipelineSpec = { stages: [scripted('allow-fed-again', 'Accept'), scripted('deny-fed-again', 'Deny')] };


let stateDir: string;
beforeEach(() => { stateDir = mkdtempSync(join(tmpdir(), 'kwp-ctl-')); });

type EngineOptions = ConstructorParameters<typeof PolicyEngine>[0];

function controllerWith(options: Partial<PipelineControllerOptions> = {}, modules = fixtures as EngineOptions['modules'], engineOptions: Partial<EngineOptions> = {}) {
  const engine = new PolicyEngine({ state: new ClusterState(), modules, ...engineOptions });
  const logged: string[] = [];
  const controller = new PipelineController({
    engine, fallback: allowFirst, stateDir, logger: loggerOf((level, message) => logged.push(`${level} ${message}`)), ...options,
  });
  return { engine, controller, logged };
}

describe('changing the pipeline', () => {
  it('a set activates the new order and a rollback returns to the very same warm pipeline', async () => {
    const { engine, controller } = controllerWith();
    expect(controller.start()).toMatchObject({ revision: 1, stages: allowFirst.stages });
    const first = engine.active;
    expect(engine.allows(packet())).toBe(true);
    const view = await controller.set(denyFirst, 1);
    expect(view.revision).toBe(2);
    expect(engine.allows(packet())).toBe(false);
    expect((await controller.rollback()).revision).toBe(1);
    expect(engine.active).toBe(first);
    expect(engine.allows(packet())).toBe(true);
    expect(controller.history().map((h) => `${h.action}:${h.from ?? '-'}->${h.revision}`)).toEqual(['startup:-->1', 'set:1->2', 'rollback:2->1']);
  });

  it('a stale If-Match is refused with 412 and changes nothing', async () => {
    const { engine, controller } = controllerWith();
    controller.start();
    await controller.set(denyFirst, 1);
    const active = engine.active;
    expect(await codeOfAsync(controller.set(allowFirst, 1))).toBe('KWP_ERR_PRECONDITION_FAILED');
    expect(await codeOfAsync(controller.rollback(1))).toBe('KWP_ERR_PRECONDITION_FAILED');
    expect(new KwpError('KWP_ERR_PRECONDITION_FAILED', '').status).toBe(412);
    expect(engine.active).toBe(active);
  });

  it('a pipeline that fails to build leaves the running pipeline, its revision and the state file untouched', async () => {
    const { engine, controller } = controllerWith();
    controller.start();
    const before = readFileSync(join(stateDir, 'pipeline.json'), 'utf8');
    const active = engine.active;
    expect(await codeOfAsync(controller.set({ stages: [scripted('ok', 'Accept'), { name: 'gone', module: 'no-such-module' }] }))).toBe('KWP_ERR_MODULE_NOT_FOUND');
    expect(await codeOfAsync(controller.set({ stages: [scripted('bad', 'Sometimes')] }))).toBe('KWP_ERR_CONFIG_REJECTED');
    expect(await codeOfAsync(controller.set({ stages: 'all of them' }))).toBe('KWP_ERR_PIPELINE_INVALID');
    expect(engine.active).toBe(active);
    expect(controller.revision).toBe(1);
    expect(readFileSync(join(stateDir, 'pipeline.json'), 'utf8')).toBe(before);
  });

  it('rolling back with no previous pipeline is refused', async () => {
    const { controller } = controllerWith();
    controller.start();
    expect(await codeOfAsync(controller.rollback())).toBe('KWP_ERR_NO_PREVIOUS_PIPELINE');
  });

  it('only the active and the previous pipeline stay started; older ones are disposed', async () => {
    const { engine, controller } = controllerWith();
    controller.start();
    const first = engine.active;
    await controller.set(denyFresh);
    const second = engine.active;
    await controller.set(allowFresh);
    expect(first.stages.every((s) => !s.healthy)).toBe(true);
    expect(second.stages.every((s) => s.healthy)).toBe(true);
    expect(controller.livePipelines().map((p) => p.revision)).toEqual([3, 2]);
  });

  it('state files are replaced whole: no temporary file is left behind', async () => {
    const { controller } = controllerWith();
    controller.start();
    for (let i = 0; i < 5; i++) await controller.set(i % 2 ? allowFirst : denyFirst);
    expect(readdirSync(stateDir)).toEqual(['pipeline.json']);
    const doc = JSON.parse(readFileSync(join(stateDir, 'pipeline.json'), 'utf8'));
    expect(doc).toMatchObject({ version: 1, revision: 6, previous: { revision: 5 } });
  });
});

describe('hot swap under load', () => {
  it('100 swaps between two orders while decisions run: no errors, every decision from exactly one pipeline, the new one right after each swap', async () => {
    const { engine, controller } = controllerWith();
    controller.start();
    const walkOf = (d: ReturnType<typeof engine.evaluate>) => `${d.allowed}:${d.egress.trace.map((t) => `${t.stage}=${t.verdict}`).join(',')}`;
    const shapes = { allowFirst: 'true:allow=Accept', denyFirst: 'false:deny=Deny' };
    let expected: keyof typeof shapes = 'allowFirst';
    let justSwapped = false;
    let done = false;
    const seen = { allowFirst: 0, denyFirst: 0 };
    const errors: string[] = [];
    let firstAfterSwap = 0;

    const decisions = (async () => {
      while (!done) {
        try {
          const d = engine.evaluate(packet());
          const walk = walkOf(d);
          const match = (Object.keys(shapes) as Array<keyof typeof shapes>).filter((k) => shapes[k] === walk);
          if (match.length !== 1) errors.push(`decision matches ${match.length} pipelines: ${walk}`);
          else {
            seen[match[0]]++;
            if (match[0] !== expected) errors.push(`decision used ${match[0]} while ${expected} was active`);
            if (engine.allows(packet()) !== (expected === 'allowFirst')) errors.push('the packet path disagreed with the explained path');
          }
          if (justSwapped) { firstAfterSwap++; justSwapped = false; }
        } catch (err) {
          errors.push(String(err));
        }
        await new Promise((r) => setImmediate(r));
      }
    })();

    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      const next = i % 2 === 0 ? 'denyFirst' : 'allowFirst';
      // The decision loop runs while the new pipeline is built, still on the old one.
      await controller.set(next === 'denyFirst' ? denyFirst : allowFirst, controller.revision);
      expected = next;
      justSwapped = true;
    }
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    done = true;
    await decisions;

    expect(errors).toEqual([]);
    expect(controller.revision).toBe(101);
    expect(controller.swaps).toBe(101);
    expect(firstAfterSwap).toBe(100);
    expect(seen.allowFirst).toBeGreaterThan(50);
    expect(seen.denyFirst).toBeGreaterThan(50);
  });
});

describe('restarts and state files', () => {
  it('a new controller on the same state dir runs the same pipeline at the same revision, with its predecessor ready for rollback', async () => {
    const named = sandboxModule({ meta: { ...DEFAULT_META, name: 'uploaded', version: '1.0.0' } });
    const open = () => {
      const store = new ModuleStore({ stateDir, validation: 'inline' });
      const ctl = controllerWith({ store }, new ChainedModules([store, fixtures]));
      return { store, ...ctl };
    };
    const first = open();
    await first.store.add(named, { name: 'uploaded', version: '1.0.0' });
    first.controller.start();
    const spec: PipelineSpec = { stages: [{ name: 'custom', module: 'uploaded@1.0.0' }, scripted('deny', 'Deny')] };
    const set = await first.controller.set(spec, 1);
    expect(first.store.get('uploaded')[0].usedBy).toEqual(['custom']);
    first.controller.stop();

    const second = open();
    const view = second.controller.start();
    expect(view).toEqual(set);
    expect(second.engine.allows(packet())).toBe(false);
    expect(second.controller.previousRevision).toBe(1);
    expect(second.controller.history().map((h) => h.action)).toEqual(['startup', 'set', 'startup']);
    expect((await second.controller.rollback()).revision).toBe(1);
    expect(second.engine.allows(packet())).toBe(true);
    // Revision 2 is now the rollback target, so its module must stay.
    expect(codeOf(() => second.store.remove('uploaded'))).toBe('KWP_ERR_MODULE_IN_USE');
  });

  it('a corrupt state file is reported with its name and reason, kept aside, and the configured pipeline is used', () => {
    writeFileSync(join(stateDir, 'pipeline.json'), '{"version": 1, "revision": 7, "spec": {"stag');
    const { engine, controller, logged } = controllerWith();
    const view = controller.start();
    expect(view.stages).toEqual(allowFirst.stages);
    expect(engine.allows(packet())).toBe(true);
    expect(controller.startupProblem?.code).toBe('KWP_ERR_STATE_CORRUPT');
    expect(logged.join('\n')).toMatch(/^error .*pipeline\.json is corrupt \(.*JSON.*\); kept it as .*pipeline\.json\.corrupt-\d+; starting with the configured pipeline/m);
    expect(readdirSync(stateDir).some((f) => f.startsWith('pipeline.json.corrupt-'))).toBe(true);
    expect(controller.history()[0]).toMatchObject({ action: 'startup', reason: expect.stringMatching(/^configured pipeline, because .*corrupt/) });
  });

  it('a state file naming a module that no longer exists falls back to the configured pipeline', () => {
    writeFileSync(join(stateDir, 'pipeline.json'), JSON.stringify({ version: 1, revision: 4, spec: { stages: [{ name: 'x', module: 'vanished' }] }, history: [] }));
    const { controller, logged } = controllerWith();
    expect(controller.start().stages).toEqual(allowFirst.stages);
    expect(controller.startupProblem?.message).toMatch(/pipeline\.json: revision 4 cannot be built: .*"vanished"/);
    expect(logged.some((l) => l.startsWith('error '))).toBe(true);
  });

  it('a state file with a wrong shape is refused field by field', () => {
    writeFileSync(join(stateDir, 'pipeline.json'), JSON.stringify({ version: 1, revision: 0, spec: { stages: [] } }));
    const { controller } = controllerWith();
    controller.start();
    expect(controller.startupProblem?.message).toMatch(/"revision" must be a positive integer/);
  });
});

describe('automatic rollback', () => {
  const trapping: PipelineSpec = { stages: [scripted('flaky', 'Accept', { trapPort: 666 })] };

  it('a stage trapping more often than the threshold rolls the pipeline back and says why', async () => {
    const { engine, controller, logged } = controllerWith({ autoRollback: { failures: 3, windowMs: 60_000 } });
    controller.start();
    await controller.set(trapping);
    for (let i = 0; i < 3; i++) {
      engine.allows(packet(666));
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setImmediate(r));
    expect(controller.revision).toBe(1);
    const last = controller.history().at(-1)!;
    expect(last).toMatchObject({ action: 'auto-rollback', from: 2, revision: 1 });
    expect(last.reason).toMatch(/stage flaky \(module scripted@1\.0\.0\) failed 3 times within 60000 ms \(threshold 3; 3 traps, 0 fuel exhaustions and 0 deadline overruns/);
    expect(logged.some((l) => /^error pipeline rolled back from revision 2 to 1: stage flaky/.test(l))).toBe(true);
  });

  it('failures below the threshold, or without the option, roll nothing back', async () => {
    for (const options of [{ autoRollback: { failures: 5, windowMs: 60_000 } }, {}]) {
      const { engine, controller } = controllerWith(options);
      controller.start();
      const { revision } = await controller.set(trapping);
      for (let i = 0; i < 3; i++) {
        engine.allows(packet(666));
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setImmediate(r));
      }
      expect(controller.revision).toBe(revision);
      expect(engine.active.stages[0].counters.traps).toBe(3);
    }
  });
});

// ---- changes built while the packet path runs ----

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A cluster of `n` pods, fed to a stage in slices of `FEED_SLICE` by buildAsync: a build of two stages takes 2n/FEED_SLICE turns. */
function podState(n: number): ClusterState {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
  const pods: KubeObject[] = [];
  for (let i = 0; i < n; i++) {
    pods.push({ apiVersion: 'v1', kind: 'Pod', metadata: { name: `p${i}`, namespace: 'x', uid: `p${i}` }, spec: {}, status: { phase: 'Running', podIP: `10.1.${i >> 8}.${i & 255}` } });
  }
  state.replace(Kinds.Pod, pods);
  return state;
}
const PODS = 200;
const FEED_SLICE = 10;

/** Counts the state subscriptions still open, i.e. the stages still fed. */
function countSubscriptions(state: ClusterState): () => number {
  let live = 0;
  const subscribe = state.subscribe.bind(state);
  state.subscribe = (listener) => {
    live++;
    const off = subscribe(listener);
    let done = false;
    return () => {
      if (!done) { done = true; live--; }
      off();
    };
  };
  return () => live;
}

/** A decision every turn of the event loop, the way the dataplane asks for one per queued packet. */
function decisionLoop(decide: () => boolean) {
  const verdicts: boolean[] = [];
  let running = true;
  const loop = () => {
    if (!running) return;
    verdicts.push(decide());
    setImmediate(loop);
  };
  setImmediate(loop);
  return { verdicts, stop: () => { running = false; } };
}

function bigController(options: Partial<PipelineControllerOptions> = {}, modules = fixtures as EngineOptions['modules']) {
  const state = podState(PODS);
  const subscriptions = countSubscriptions(state);
  return { ...controllerWith(options, modules, { state, feedSlice: FEED_SLICE }), state, subscriptions };
}

describe('changes built while the packet path runs', () => {
  it('the packet path keeps deciding while a new pipeline is being built', async () => {
    const { engine, controller } = bigController();
    controller.start();
    const loop = decisionLoop(() => engine.allows(packet()));
    let atActivation = -1;
    controller.observe({ activated: () => { atActivation = loop.verdicts.length; } });
    await turn();
    const atStart = loop.verdicts.length;
    const view = await controller.set(denyFresh, 1);
    await turn();
    loop.stop();
    expect(view.revision).toBe(2);
    const during = loop.verdicts.slice(atStart, atActivation);
    // Two stages of PODS pods in slices of FEED_SLICE: one turn, so one decision, per slice.
    expect(during.length).toBeGreaterThanOrEqual((2 * PODS) / FEED_SLICE - 1);
    expect(during.every((allowed) => allowed)).toBe(true);
    expect(loop.verdicts.slice(atActivation)).not.toContain(true);
  });

  it('a failed async build leaves the running pipeline deciding and nothing of the new one subscribed', async () => {
    const { engine, controller, subscriptions } = bigController();
    controller.start();
    const active = engine.active;
    const fed = subscriptions();
    const before = readFileSync(join(stateDir, 'pipeline.json'), 'utf8');
    const loop = decisionLoop(() => engine.allows(packet()));
    // The first stage is fed in full before the second refuses its config.
    const failing = controller.set({ stages: [scripted('ok', 'Deny'), scripted('bad', 'Sometimes')] }, 1);
    await turn();
    await turn();
    expect(subscriptions()).toBe(fed + 1);
    expect(await codeOfAsync(failing)).toBe('KWP_ERR_CONFIG_REJECTED');
    const atFailure = loop.verdicts.length;
    await turn();
    loop.stop();
    expect(atFailure).toBeGreaterThanOrEqual(PODS / FEED_SLICE - 1);
    expect(loop.verdicts.every((allowed) => allowed)).toBe(true);
    expect(loop.verdicts.length).toBeGreaterThan(atFailure);
    expect(engine.active).toBe(active);
    expect(subscriptions()).toBe(fed);
    expect(controller.history().map((h) => h.action)).toEqual(['startup']);
    expect(readFileSync(join(stateDir, 'pipeline.json'), 'utf8')).toBe(before);
  });

  it('two concurrent pipeline sets based on the same revision do not both activate: the second gets 412 and is never built', async () => {
    const { engine, controller } = bigController();
    controller.start();
    let built = 0;
    controller.observe({ built: () => { built++; } });
    const first = controller.set(denyFresh, 1);
    await turn();
    // The first is still being built, so revision 1 is still active and the second is accepted for now.
    expect(engine.active.revision).toBe(1);
    const second = controller.set({ stages: [scripted('other', 'Accept')] }, 1);
    const secondRollback = controller.rollback(1);
    expect((await first).revision).toBe(2);
    expect(await codeOfAsync(second)).toBe('KWP_ERR_PRECONDITION_FAILED');
    expect(await codeOfAsync(secondRollback)).toBe('KWP_ERR_PRECONDITION_FAILED');
    expect(built).toBe(1);
    expect(engine.active.spec).toEqual(denyFresh);
    expect(controller.history().map((h) => `${h.action}:${h.from ?? '-'}->${h.revision}`)).toEqual(['startup:-->1', 'set:1->2']);
  });

  it('overlapping changes without If-Match run one after another in arrival order', async () => {
    const { engine, controller } = bigController();
    controller.start();
    const first = controller.set(denyFirst);
    await turn();
    const second = controller.set(allowFirst);
    const back = controller.rollback();
    expect([(await first).revision, (await second).revision, (await back).revision]).toEqual([2, 3, 2]);
    expect(engine.active.spec).toEqual(denyFirst);
    expect(controller.previousRevision).toBe(3);
    expect(controller.livePipelines().map((p) => p.revision)).toEqual([2, 3]);
    expect(controller.history().map((h) => `${h.action}:${h.from ?? '-'}->${h.revision}`)).toEqual(['startup:-->1', 'set:1->2', 'set:2->3', 'rollback:3->2']);
  });

  it('stopping during a build disposes the half-built pipeline at once, refuses queued changes and leaves the running one deciding', async () => {
    const { engine, controller, subscriptions } = bigController();
    controller.start();
    const fed = subscriptions();
    const before = readFileSync(join(stateDir, 'pipeline.json'), 'utf8');
    const building = controller.set(denyFresh);
    const queued = controller.set(allowFirst);
    // Into the second stage's feed: the first stage is fed and the second subscribed.
    for (let i = 0; i < 10 * PODS && subscriptions() < fed + 2; i++) await turn();
    expect(subscriptions()).toBe(fed + 2);
    controller.stopChanges();
    expect(subscriptions()).toBe(fed);
    expect(await codeOfAsync(building)).toBe('KWP_ERR_STOPPING');
    expect(await codeOfAsync(queued)).toBe('KWP_ERR_STOPPING');
    expect(await codeOfAsync(controller.rollback())).toBe('KWP_ERR_STOPPING');
    expect(engine.active.revision).toBe(1);
    expect(engine.allows(packet())).toBe(true);
    expect(controller.history().map((h) => h.action)).toEqual(['startup']);
    expect(readFileSync(join(stateDir, 'pipeline.json'), 'utf8')).toBe(before);
    controller.stop();
    expect(subscriptions()).toBe(0);
  });

  it('a module cannot be removed while a pipeline that runs it is being built', async () => {
    const store = new ModuleStore({ stateDir, validation: 'inline' });
    const { engine, controller } = bigController({ store }, new ChainedModules([store, fixtures]));
    await store.add(sandboxModule({ meta: { ...DEFAULT_META, name: 'uploaded', version: '1.0.0' } }), { name: 'uploaded', version: '1.0.0' });
    controller.start();
    const setting = controller.set({ stages: [{ name: 'custom', module: 'uploaded@1.0.0' }, scripted('deny', 'Deny')] });
    await turn();
    expect(engine.active.revision).toBe(1);
    expect(store.get('uploaded')[0].usedBy).toEqual([]);
    expect(codeOf(() => store.remove('uploaded'))).toBe('KWP_ERR_MODULE_IN_USE');
    expect((await setting).revision).toBe(2);
    expect(store.get('uploaded')[0].usedBy).toEqual(['custom']);
    await store.close();
  });
});
