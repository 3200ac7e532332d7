import { describe, it, expect } from 'vitest';
import { compileEvaluator } from '../runtime/loader.js';
import { Stage } from './stage.js';
import { ClusterState } from '../state/cluster-state.js';
import { Kinds } from '../contract.js';
import { sandboxModule, BIG_MEMORY } from '../../test/fixtures/sandbox-modules.js';

// kwp_subjects names pod ids at kwp_result's address (2048); the count and
// the ids are the module's to choose. The host builds the packet path's
// subject filter from them, sized by the largest id: unchecked, one id of
// 0xffffffff made it a 4 GiB array, and a count of millions an array of
// millions of numbers, both outside every memory budget.
const pod = (name: string, ip: string) => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'x', uid: name },
  spec: { containers: [{ name: 'c' }] }, status: { phase: 'Running', podIP: ip },
});

function stageOf(subjectsBody: string, startBody?: string) {
  const state = new ClusterState();
  state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }]);
  state.replace(Kinds.Pod, [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')]);
  const compiled = compileEvaluator(sandboxModule({ memory: BIG_MEMORY, subjectsBody, startBody }), { source: 'hostile.wasm' });
  const stage = new Stage({ name: 'hostile', module: 'x' }, compiled, state);
  stage.start();
  return { stage, ids: [...state.pods()].map((p) => p.id) };
}

describe("a module's subject list is bounded by the pods the host gave it", () => {
  it('ids the host never gave out are dropped, so one id of 0xffffffff does not size the filter', () => {
    // Ids: the first pod's (the state numbers pods from 1), then 0xffffffff.
    const { stage, ids } = stageOf('(i32.store (i32.const 2048) (i32.const 1)) (i32.store (i32.const 2052) (i32.const -1)) (i32.const 2)');
    expect(ids).toContain(1);
    expect(stage.subjects()).toEqual([1]);
    expect(stage.subjectFilter()?.length).toBe(2);
    stage.dispose();
  });

  it('a count above the pods delivered (here, all of a 64 MiB memory of 0xff bytes) means all traffic, not a list of millions', () => {
    const { stage } = stageOf(`(i32.const ${(64 * 1024 * 1024 - 4096) / 4})`, `(memory.fill (i32.const 0) (i32.const 255) (i32.const ${64 * 1024 * 1024}))`);
    expect(stage.subjects()).toBe('all');
    expect(stage.subjectFilter()).toBeNull();
    expect(stage.healthy).toBe(true);
    stage.dispose();
  });
});

describe('subjects asked for by the drain of a flow buffer before a delivery', () => {
  it('are those of the state before it, and the delivery makes them stale as any change does', async () => {
    const { benchModules } = await import('../../bench/harness.js');
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { 'kubernetes.io/metadata.name': 'x' } } }]);
    state.replace(Kinds.Pod, [pod('a', '10.0.0.1'), pod('b', '10.0.0.2')]);
    const np = new Stage({ name: 'np', module: 'network-policy' }, benchModules().resolve('network-policy')!, state);
    np.start();
    // A stage whose subjects nothing asked for yet (a new instance), recording to a buffer whose drain asks for them,
    // as the drain's walk does (Pipeline.finishWalk, Stage.drainSubjects).
    (np as unknown as { subjectsState: string }).subjectsState = 'never';
    const askedBeforeDelivery: Array<Uint8Array | null> = [];
    np.guardFlows({ settle: () => { askedBeforeDelivery.push(np.subjectFilter()); }, noteFailure: () => undefined });
    const b = [...state.pods()].find((p) => p.name === 'b')!;
    state.replace(Kinds.NetworkPolicy, [{ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'isolate-b', namespace: 'x' }, spec: { podSelector: { matchLabels: {} }, policyTypes: ['Ingress'] } }]);
    // The drain saw the state before the policy: no subject.
    expect(askedBeforeDelivery).toHaveLength(1);
    expect(askedBeforeDelivery[0]?.[b.id] ?? 0).toBe(0);
    // After the delivery the filter must not be that one: no filter until recomputed (every pod asked), then one with b.
    const now = np.subjectFilter();
    expect(now === null || now[b.id] === 1).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(np.subjectFilter()?.[b.id]).toBe(1);
    np.dispose();
  });
});
