import { describe, expect, it } from 'vitest';
import { Kinds, type KubeObject } from '../contract.js';
import { PolicyEngine } from '../pipeline/engine.js';
import { BuiltinModules } from '../pipeline/modules.js';
import { ClusterState } from '../state/cluster-state.js';
import { FastPath, type FastPathKernel } from './fast-path.js';
import { fastPathBlocker, invalidateFastPathOnChange } from './fast-path-invalidation.js';

const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const kernel: FastPathKernel = {
  queueMode: 'xtables', fastPathReady: true,
  exclusive: (step) => step(), runFastPathScript: async () => undefined, kernelDecided: async () => ({ accept: 0, deny: 0 }),
};

const np = (name: string, port: number): KubeObject => ({
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace: 'default' },
  spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ ports: [{ protocol: 'TCP', port }] }] },
});
const pod = (name: string, ip: string, labels: Record<string, string> = { app: name }): KubeObject => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default', labels }, spec: { nodeName: 'n1' }, status: { podIP: ip, podIPs: [{ ip }] },
});
const DEFAULT = {
  stages: [
    { name: 'cnp-admin', module: 'cluster-network-policy', config: { tier: 'Admin' } },
    { name: 'np', module: 'network-policy' },
    { name: 'cnp-baseline', module: 'cluster-network-policy', config: { tier: 'Baseline' } },
  ],
};

function wired() {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } }]);
  state.replace(Kinds.Pod, [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')]);
  state.replace(Kinds.NetworkPolicy, [np('p', 80)]);
  const engine = new PolicyEngine({ state, modules: new BuiltinModules() });
  engine.activate(engine.build(DEFAULT));
  const fastPath = new FastPath(kernel, 'kwp', { timeoutSeconds: 60, maxEntries: 100 }, quiet);
  fastPath.start();
  const stop = invalidateFastPathOnChange({ fastPath, state, engine });
  // Wiring assesses the active pipeline, which counts as one pipeline invalidation: count from here.
  const start = { ...fastPath.counters.invalidations };
  const counts = () => Object.fromEntries(Object.entries(fastPath.counters.invalidations).map(([k, v]) => [k, v - start[k as keyof typeof start]]));
  return { state, engine, fastPath, stop, counts };
}

describe('what invalidates the kernel fast path', () => {
  it('is on for the default stages, whose modules keep decision caches', () => {
    const { fastPath, stop } = wired();
    expect(fastPath.blocker).toBeUndefined();
    expect(fastPath.ticket()).toBeGreaterThan(0);
    stop();
  });

  it('a NetworkPolicy change, applied or in a snapshot, invalidates as an object change; a snapshot equal to the last does not', () => {
    const { state, fastPath, stop, counts } = wired();
    const ticket = fastPath.ticket();
    state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: np('q', 81) });
    expect(fastPath.valid(ticket)).toBe(false);
    expect(counts().object).toBe(1);
    state.replace(Kinds.NetworkPolicy, [np('p', 80), np('q', 81)]);
    expect(counts().object).toBe(2);
    // A manifest re-read delivers every kind again: the same objects are no change.
    const again = fastPath.ticket();
    state.replace(Kinds.NetworkPolicy, [np('p', 80), np('q', 81)]);
    expect(counts().object).toBe(2);
    expect(fastPath.valid(again)).toBe(true);
    state.replace(Kinds.NetworkPolicy, [np('p', 8080), np('q', 81)]);
    expect(counts().object).toBe(3);
    stop();
  });

  it('a pod change invalidates as a pod change, the Pod snapshot that carried it is no second one', () => {
    const { state, fastPath, stop, counts } = wired();
    const ticket = fastPath.ticket();
    state.replace(Kinds.Pod, [pod('a', '10.0.0.1', { app: 'other' }), pod('b', '10.0.0.2')]);
    expect(fastPath.valid(ticket)).toBe(false);
    expect(counts()).toMatchObject({ pod: 1, object: 0 });
    state.apply(Kinds.Pod, { type: 'delete', object: pod('b', '10.0.0.2') });
    expect(counts().pod).toBe(2);
    stop();
  });

  it('a kind no stage takes changes nothing', () => {
    const { state, stop, counts } = wired();
    state.replace('v1/ConfigMap' as never, [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' } }]);
    expect(Object.values(counts()).reduce((a, b) => a + b, 0)).toBe(0);
    stop();
  });

  it('every activation invalidates; one with an audit stage, or a stage without a decision cache, turns the fast path off until one without', () => {
    const { engine, fastPath, stop, counts } = wired();
    const ticket = fastPath.ticket();
    engine.activate(engine.build(DEFAULT));
    expect(fastPath.valid(ticket)).toBe(false);
    expect(counts().pipeline).toBe(1);
    engine.activate(engine.build({ stages: [...DEFAULT.stages, { name: 'np-audit', module: 'network-policy', mode: 'audit' }] }));
    expect(counts().audit).toBe(1);
    expect(fastPath.ticket()).toBe(-1);
    expect(fastPath.blocker).toBe('audit stage np-audit must see every connection');
    const logging = engine.build({ stages: [{ name: 'log', module: 'logging' }, ...DEFAULT.stages] });
    expect(fastPathBlocker(logging)).toMatch(/^stage log \(module logging\) keeps no decision cache/);
    engine.activate(logging);
    expect(fastPath.ticket()).toBe(-1);
    engine.activate(engine.build(DEFAULT));
    expect(fastPath.ticket()).toBeGreaterThan(0);
    stop();
  });

  it('a stage config turning its decision cache off turns the fast path off', () => {
    const { engine, fastPath, stop } = wired();
    engine.activate(engine.build({ stages: [{ name: 'np', module: 'network-policy', config: { decisionCache: false } }] }));
    expect(fastPath.blocker).toMatch(/^stage np \(module network-policy\) keeps no decision cache/);
    stop();
  });
});
