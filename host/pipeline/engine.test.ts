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
