import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Kinds, type KubeObject } from '../contract.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { ClusterState } from '../state/cluster-state.js';
import { fixtureModules } from '../../test/fixtures/modules.js';
import { refreshOnChange } from './refresh-on-change.js';

const allow = { stages: [{ name: 'allow', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept' } }] };

function pod(name: string, ip: string): KubeObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default', labels: { app: name } }, spec: { nodeName: 'n1' }, status: { podIP: ip, podIPs: [{ ip }] } };
}

describe('refreshing the dataplane after changes', () => {
  let state: ClusterState;
  let engine: PolicyEngine;
  let refreshes: number;
  const dataplane = { refresh: async () => { refreshes++; } };

  beforeEach(() => {
    vi.useFakeTimers();
    state = new ClusterState();
    state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } }]);
    engine = new PolicyEngine({ state, modules: fixtureModules() });
    refreshes = 0;
  });
  afterEach(() => { vi.useRealTimers(); });

  it('coalesces a burst of pod changes into one refresh after the delay', () => {
    const stop = refreshOnChange({ dataplane, state, engine, delayMs: 50 });
    for (let i = 0; i < 100; i++) state.apply(Kinds.Pod, { type: 'upsert', object: pod(`p${i}`, `10.0.0.${i + 1}`) });
    expect(refreshes).toBe(0);
    vi.advanceTimersByTime(49);
    expect(refreshes).toBe(0);
    vi.advanceTimersByTime(1);
    expect(refreshes).toBe(1);
    vi.advanceTimersByTime(1000);
    expect(refreshes).toBe(1);
    // A later change is a new burst.
    state.apply(Kinds.Pod, { type: 'delete', object: pod('p0', '10.0.0.1') });
    vi.advanceTimersByTime(50);
    expect(refreshes).toBe(2);
    stop();
  });

  it('refreshes after a pipeline activation, which changes what must be queued', () => {
    const stop = refreshOnChange({ dataplane, state, engine, delayMs: 50 });
    engine.activate(engine.build(allow));
    vi.advanceTimersByTime(50);
    expect(refreshes).toBe(1);
    stop();
    engine.active.dispose();
  });

  it('stops listening when stopped, dropping a refresh still pending', () => {
    const stop = refreshOnChange({ dataplane, state, engine, delayMs: 50 });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', '10.0.0.1') });
    stop();
    vi.advanceTimersByTime(100);
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('b', '10.0.0.2') });
    engine.activate(engine.build(allow));
    vi.advanceTimersByTime(100);
    expect(refreshes).toBe(0);
    engine.active.dispose();
  });

  it('reports a failed refresh and refreshes again at the next change', async () => {
    const errors: unknown[] = [];
    let fail = true;
    const flaky = { refresh: async () => { refreshes++; if (fail) throw new Error('nft said no'); } };
    const stop = refreshOnChange({ dataplane: flaky, state, engine, delayMs: 50, onError: (err) => errors.push(err) });
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('a', '10.0.0.1') });
    await vi.advanceTimersByTimeAsync(50);
    expect(errors.map((e) => (e as Error).message)).toEqual(['nft said no']);
    fail = false;
    state.apply(Kinds.Pod, { type: 'upsert', object: pod('b', '10.0.0.2') });
    await vi.advanceTimersByTimeAsync(50);
    expect(refreshes).toBe(2);
    expect(errors).toHaveLength(1);
    stop();
  });
});
