// A module that declares `podsOnlyWith` (module.json) needs no pods while
// the cluster has no object of those kinds: its stage feeds it none, and
// feeds them with the first such object. The differential: the same
// pipeline whose modules were stripped of the declaration, fed every pod as
// before, over the same state, must give every packet the same verdict
// before, while and after such objects come and go.
import { describe, it, expect } from 'vitest';
import type { KubeObject } from '../contract.js';
import { Kinds } from '../contract.js';
import { defaultPipeline } from './spec.js';
import { PolicyEngine } from './engine.js';
import { BuiltinModules, type ModuleResolver } from './modules.js';
import type { CompiledEvaluator } from '../runtime/loader.js';
import type { Stage } from './stage.js';
import { generateCluster, generateFlows, type Scale } from '../../bench/generator.js';
import { loadState } from '../../bench/harness.js';

const SCALE: Scale = { name: 'pods-only-with', namespaces: 10, pods: 400, networkPolicies: 40, clusterNetworkPolicies: 0 };
const ANP_KIND = 'policy.networking.k8s.io/v1alpha1/AdminNetworkPolicy';
const BANP_KIND = 'policy.networking.k8s.io/v1alpha1/BaselineAdminNetworkPolicy';

/** The built-ins as they are, or with `podsOnlyWith` taken out of every module's meta (fed every pod, as before it existed). */
function modules(strip: boolean): ModuleResolver {
  const builtins = new BuiltinModules();
  const stripped = new Map<string, CompiledEvaluator>();
  return {
    resolve(ref) {
      const compiled = builtins.resolve(ref);
      if (!strip || compiled === undefined) return compiled;
      let copy = stripped.get(ref);
      if (!copy) {
        const { podsOnlyWith: _dropped, ...meta } = compiled.meta;
        copy = { ...compiled, meta };
        stripped.set(ref, copy);
      }
      return copy;
    },
  };
}

const denyFrontendEgress: KubeObject = {
  apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name: 'frontend-out' },
  spec: { priority: 5, subject: { namespaces: { matchLabels: { team: 'frontend' } } }, egress: [{ name: 'no-8080', action: 'Deny', to: [{ namespaces: {} }], ports: [{ portNumber: { protocol: 'TCP', port: 8080 } }] }] },
};
const allowDataIngress: KubeObject = {
  apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name: 'data-in' },
  spec: { priority: 7, subject: { namespaces: { matchLabels: { team: 'data' } } }, ingress: [{ name: 'from-ops', action: 'Allow', from: [{ namespaces: { matchLabels: { team: 'ops' } } }] }] },
};
const baselineDeny: KubeObject = {
  apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'BaselineAdminNetworkPolicy', metadata: { name: 'default' },
  spec: { subject: { namespaces: {} }, ingress: [{ name: 'no-9090', action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'batch' } } }], ports: [{ portNumber: { protocol: 'TCP', port: 9090 } }] }] },
};

const stageOf = (engine: PolicyEngine, name: string): Stage => engine.active.stages.find((s) => s.name === name)!;

/** Until no stage of either engine is refreshing (a state held without pods took its first object). */
async function settled(...engines: PolicyEngine[]): Promise<void> {
  for (let waited = 0; engines.some((e) => e.active.stages.some((s) => s.stateProblem !== undefined)); waited += 5) {
    if (waited > 20_000) throw new Error('the stages did not settle');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // The pipelines' masks follow a new instance a turn later.
  await new Promise((resolve) => setImmediate(resolve));
}

describe('a stage whose module needs pods only with some kinds of objects', () => {
  it('is fed no pods while the cluster has none of those objects, and decides every packet as the stage fed every pod', async () => {
    const cluster = generateCluster(SCALE);
    const state = loadState(cluster);
    const declared = new PolicyEngine({ state, modules: modules(false) });
    const stripped = new PolicyEngine({ state, modules: modules(true) });
    declared.activate(declared.build(defaultPipeline()));
    stripped.activate(stripped.build(defaultPipeline()));
    const flows = generateFlows(cluster, 3000).packets;
    let differences = 0;
    let denied = 0;
    const compare = () => {
      for (const packet of flows) {
        const a = declared.allows(packet);
        if (a !== stripped.allows(packet)) differences++;
        if (!a) denied++;
      }
    };

    for (const name of ['anp', 'banp']) {
      expect(stageOf(declared, name).podsWithheld).toBe(true);
      expect(stageOf(stripped, name).podsWithheld).toBe(false);
      // The pods are most of what a policy-less stage holds: its memory, and the bytes it was delivered.
      expect(stageOf(declared, name).heldBytes).toBe(0);
      expect(stageOf(stripped, name).heldBytes).toBeGreaterThan(0);
    }
    expect(stageOf(declared, 'np').podsWithheld).toBe(false);
    compare();

    // Pods come and go while withheld: nothing reaches the module, and the verdicts stay the same.
    state.replace(Kinds.Pod, cluster.pods.slice(0, 300));
    compare();
    state.replace(Kinds.Pod, cluster.pods);
    expect(stageOf(declared, 'anp').heldBytes).toBe(0);
    expect(stageOf(declared, 'anp').stateProblem).toBeUndefined();

    // The first AdminNetworkPolicy: the stages holding no pods are fed them with it.
    state.apply(ANP_KIND, { type: 'upsert', object: denyFrontendEgress });
    await settled(declared, stripped);
    const deniedBefore = denied;
    compare();
    expect(differences).toBe(0);
    expect(denied - deniedBefore).toBeGreaterThan(0);
    expect(stageOf(declared, 'anp').podsWithheld).toBe(false);
    expect(stageOf(declared, 'anp').heldBytes).toBe(stageOf(stripped, 'anp').heldBytes);
    // banp's module lists both kinds: an AdminNetworkPolicy brings its pods too (it cannot tell tiers apart).
    expect(stageOf(declared, 'banp').podsWithheld).toBe(false);

    // More of them, a BANP as a whole list, pods changing while the stages hold them.
    state.apply(ANP_KIND, { type: 'upsert', object: allowDataIngress });
    state.replace(BANP_KIND, [baselineDeny]);
    state.replace(Kinds.Pod, cluster.pods.slice(50));
    await settled(declared, stripped);
    compare();

    // All gone: the stages keep their pods (until a rebuild reads the state again) and still agree.
    state.apply(ANP_KIND, { type: 'delete', object: denyFrontendEgress });
    state.apply(ANP_KIND, { type: 'delete', object: allowDataIngress });
    state.replace(BANP_KIND, []);
    state.replace(Kinds.Pod, cluster.pods);
    await settled(declared, stripped);
    compare();

    expect(differences).toBe(0);
    declared.active.dispose();
    stripped.active.dispose();
  }, 60_000);

  it('starts over with the pods when such an object arrives while a state without pods is being fed', async () => {
    const cluster = generateCluster(SCALE);
    const state = loadState(cluster);
    const engine = new PolicyEngine({ state, modules: modules(false) });
    const stripped = new PolicyEngine({ state, modules: modules(true) });
    stripped.activate(stripped.build(defaultPipeline()));
    // The build feeds in slices: the object arrives after anp's snapshot (no pods) was read, before it is done.
    const building = engine.buildAsync(defaultPipeline(), 'pipeline', undefined, {
      onStage: (stage) => {
        if (stage.name === 'anp') queueMicrotask(() => state.apply(ANP_KIND, { type: 'upsert', object: denyFrontendEgress }));
      },
    });
    engine.activate(await building);
    await settled(engine, stripped);
    const flows = generateFlows(cluster, 3000).packets;
    let differences = 0;
    let denied = 0;
    for (const packet of flows) {
      const a = engine.allows(packet);
      if (a !== stripped.allows(packet)) differences++;
      if (!a) denied++;
    }
    expect(differences).toBe(0);
    expect(denied).toBeGreaterThan(0);
    const anp = stageOf(engine, 'anp');
    expect(anp.podsWithheld).toBe(false);
    expect(anp.heldBytes).toBe(stageOf(stripped, 'anp').heldBytes);
    engine.active.dispose();
    stripped.active.dispose();
  }, 60_000);
});
