import { describe, it, expect } from 'vitest';
import { ClusterState } from '../state/cluster-state.js';
import { Kinds, type KubeObject } from '../contract.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { PolicyEngine } from './engine.js';
import type { Stage } from './stage.js';

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
    // Past the first stage's ten slices, into the second's feed.
    for (let i = 0; i < 13; i++) await turn();
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
