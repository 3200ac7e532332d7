import { describe, it, expect } from 'vitest';
import { ClusterState } from '../state/cluster-state.js';
import { Kinds, type KubeObject } from '../contract.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { PolicyEngine } from './engine.js';
import type { Stage } from './stage.js';
import { BuiltinModules, ChainedModules } from './modules.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const scripted = (name: string, verdict: string) => ({ name, module: 'scripted', config: { egress: verdict, ingress: verdict } });

function podState(n: number): ClusterState {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
  const pods: KubeObject[] = [];
  for (let i = 0; i < n; i++) pods.push({ apiVersion: 'v1', kind: 'Pod', metadata: { name: `p${i}`, namespace: 'x', uid: `p${i}` }, spec: {}, status: { phase: 'Running', podIP: `10.1.0.${i}` } });
  state.replace(Kinds.Pod, pods);
  return state;
}

describe('abandoning an async build', () => {
  it('aborting disposes every stage it started at once, and the build rejects with the abort reason', async () => {
    const engine = new PolicyEngine({ state: podState(20), modules: fixtureModules(), feedSlice: 2 });
    const seen: Stage[] = [];
    const abort = new AbortController();
    const building = engine.buildAsync({ stages: [scripted('a', 'Accept'), scripted('b', 'Deny'), scripted('c', 'Deny')] }, 'pipeline', undefined, {
      signal: abort.signal, onStage: (s) => seen.push(s),
    });
    // Past the first stage's feed, into the second's (slices end after feedSlice calls or 2 ms: count the stages, not turns).
    for (let i = 0; i < 1000 && seen.length < 2; i++) await turn();
    expect(seen.map((s) => s.name)).toEqual(['a', 'b']);
    expect(seen[0].healthy).toBe(true);
    const reason = new Error('stopping');
    abort.abort(reason);
    expect(seen.every((s) => !s.healthy)).toBe(true);
    await expect(building).rejects.toBe(reason);
    expect(seen.map((s) => s.name)).toEqual(['a', 'b']);
  });

  it('a signal that is already aborted builds nothing', async () => {
    const engine = new PolicyEngine({ state: new ClusterState(), modules: fixtureModules() });
    const seen: Stage[] = [];
    await expect(engine.buildAsync({ stages: [scripted('a', 'Accept')] }, 'pipeline', undefined, { signal: AbortSignal.abort(new Error('gone')), onStage: (s) => seen.push(s) }))
      .rejects.toThrow('gone');
    expect(seen).toEqual([]);
  });
});

describe('what the engine tells its subscribers', () => {
  const packet = (dstPort: number) => ({ family: 4 as const, protocol: 6, src: new Uint8Array([10, 1, 0, 1]), dst: new Uint8Array([10, 1, 0, 2]), srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0 });

  it('every activation and every stage failure reach each subscriber and the onStageFailure option, until it unsubscribes', () => {
    const optionHeard: string[] = [];
    const engine = new PolicyEngine({ state: podState(3), modules: fixtureModules(), onStageFailure: (s, failure) => optionHeard.push(`${s.name} ${failure}`) });
    const heard: string[] = [];
    const unsubscribe = engine.subscribe({
      activated: (next, previous) => heard.push(`activated ${next.revision} after ${previous?.revision ?? 'none'}`),
      stageFailed: (s, failure, err) => heard.push(`${s.name} ${failure} ${err.code}`),
    });
    const first = engine.build({ stages: [scripted('a', 'Accept')] });
    engine.activate(first);
    const flaky = engine.build({ stages: [{ name: 'flaky', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept', trapPort: 666 } }] });
    engine.activate(flaky);
    engine.allows(packet(666));
    expect(heard).toEqual(['activated 1 after none', 'activated 2 after 1', 'flaky trap KWP_ERR_TRAP']);
    expect(optionHeard).toEqual(['flaky trap']);
    unsubscribe();
    engine.activate(first);
    engine.activate(flaky);
    expect(heard).toHaveLength(3);
    first.dispose();
    flaky.dispose();
  });
});

describe('stages shared between revisions', () => {
  const packet = (dstPort: number) => ({ family: 4 as const, protocol: 6, src: new Uint8Array([10, 1, 0, 1]), dst: new Uint8Array([10, 1, 0, 2]), srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0 });
  const modules = () => new ChainedModules([new BuiltinModules(), fixtureModules()]);
  const denyIngress: KubeObject = { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'deny-all', namespace: 'x' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } };

  it('a reorder shares every fed stage with the running pipeline, and disposing the old pipeline leaves them deciding in the new one', async () => {
    const engine = new PolicyEngine({ state: podState(5), modules: fixtureModules() });
    const first = engine.build({ stages: [scripted('a', 'Next'), scripted('b', 'Deny')] });
    engine.activate(first);
    const second = await engine.buildAsync({ stages: [scripted('b', 'Deny'), scripted('a', 'Next')] });
    expect(second.stages[0]).toBe(first.stages[1]);
    expect(second.stages[1]).toBe(first.stages[0]);
    engine.activate(second);
    first.dispose();
    expect(second.stages.every((s) => s.healthy)).toBe(true);
    expect(engine.allows(packet(80))).toBe(false);
    second.dispose();
    expect(second.stages.some((s) => s.healthy)).toBe(false);
  });

  it('a stage whose config, mode or label changed is fed anew, and the new config decides', async () => {
    const engine = new PolicyEngine({ state: podState(5), modules: fixtureModules() });
    const first = engine.build({ stages: [scripted('a', 'Accept'), scripted('b', 'Deny')] });
    engine.activate(first);
    const second = await engine.buildAsync({ stages: [scripted('a', 'Deny'), { ...scripted('b', 'Deny'), mode: 'audit' as const }] });
    expect(second.stages[0]).not.toBe(first.stages[0]);
    expect(second.stages[1]).not.toBe(first.stages[1]);
    const third = engine.build({ stages: [{ ...scripted('a', 'Accept'), label: 'A' }] });
    expect(third.stages[0]).not.toBe(first.stages[0]);
    engine.activate(second);
    first.dispose();
    expect(engine.allows(packet(80))).toBe(false);
    second.dispose();
    third.dispose();
  });

  it('a state change between the build and the swap reaches the shared stages: the new pipeline decides with the current state', async () => {
    const state = podState(5);
    const engine = new PolicyEngine({ state, modules: modules() });
    const np = { name: 'np', module: 'network-policy' };
    const first = engine.build({ stages: [np] });
    engine.activate(first);
    expect(engine.allows(packet(80))).toBe(true);
    const second = await engine.buildAsync({ stages: [scripted('first', 'Next'), np] });
    expect(second.stages[1]).toBe(first.stages[0]);
    state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: denyIngress });
    engine.activate(second);
    first.dispose();
    expect(engine.allows(packet(80))).toBe(false);
    // A stage fed now is fed the current state too: the same answer from a stage shared with nothing.
    const fresh = engine.build({ stages: [{ ...np, label: 'fresh' }] });
    expect(fresh.allows(packet(80))).toBe(false);
    fresh.dispose();
    second.dispose();
  });

  it('a stage that broke is not shared: the next build feeds a healthy one', async () => {
    const engine = new PolicyEngine({ state: podState(3), modules: fixtureModules() });
    const flaky = { name: 'flaky', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept', trapPort: 666 } };
    const first = engine.build({ stages: [flaky] });
    engine.activate(first);
    engine.allows(packet(666));
    expect(first.stages[0].healthy).toBe(false);
    const second = await engine.buildAsync({ stages: [flaky] });
    expect(second.stages[0]).not.toBe(first.stages[0]);
    expect(second.stages[0].healthy).toBe(true);
    first.dispose();
    second.dispose();
  });

  it('the old pipeline keeps answering while the new one is fed, and a build that fails or is aborted leaves the stages it shared running', async () => {
    const state = podState(40);
    const engine = new PolicyEngine({ state, modules: fixtureModules(), feedSlice: 2 });
    const first = engine.build({ stages: [scripted('a', 'Next'), scripted('b', 'Deny')] });
    engine.activate(first);
    const seen: Stage[] = [];
    const building = engine.buildAsync({ stages: [scripted('c', 'Accept'), scripted('b', 'Deny'), scripted('a', 'Next')] }, 'pipeline', undefined, { onStage: (s) => seen.push(s) });
    let answeredWhileBuilding = 0;
    while (seen.length < 3) {
      await turn();
      expect(engine.active).toBe(first);
      if (!engine.allows(packet(80))) answeredWhileBuilding++;
    }
    expect(answeredWhileBuilding).toBeGreaterThan(5);
    const second = await building;
    engine.activate(second);
    expect(engine.allows(packet(80))).toBe(true);

    // Refused: the config of the stage after the shared one is bad.
    await expect(engine.buildAsync({ stages: [scripted('c', 'Accept'), scripted('bad', 'Sideways')] })).rejects.toThrow(/egress and ingress must be/);
    // Aborted after the shared stage (the abort and the rejection both release it: it must be released once).
    const abort = new AbortController();
    const aborted = engine.buildAsync({ stages: [scripted('c', 'Accept'), scripted('d', 'Deny')] }, 'pipeline', undefined, { signal: abort.signal });
    await turn();
    abort.abort(new Error('stopping'));
    await expect(aborted).rejects.toThrow('stopping');
    first.dispose();
    expect(second.stages.every((s) => s.healthy)).toBe(true);
    expect(engine.allows(packet(80))).toBe(true);
    second.dispose();
    expect(second.stages.some((s) => s.healthy)).toBe(false);
  });
});
