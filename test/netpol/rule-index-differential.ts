// The differential test of the rule index (sdk/port-index.ts and the
// evaluators' flattened rules, the selector memo): an indexed and an unindexed
// (`ruleIndex: false`) instance of one module get the same random cluster,
// flows and changes — pod relabels, namespace relabels, policies added,
// changed and deleted, relists — and every record must get the same verdict,
// reason, rule code, explanation and attribution from both.
import { expect } from 'vitest';
import { fileURLToPath } from 'node:url';
import type { KubeObject } from '../../host/contract.js';
import { ModuleHarness, type Probe } from '../fixtures/abi-harness.js';
import { seededRandom } from '../../host/dataplane/seeded-random.js';
import { pick, randomCluster, randomProbes, relabelledNamespace, relabelledPod, type Random, type RandomCluster } from './random-cluster.js';

export const builtWasm = (name: string) => fileURLToPath(new URL(`../../dist/wasm/${name}.wasm`, import.meta.url));

/** Everything a record's answer consists of, for both directions of each probe. */
export function answers(h: ModuleHarness, probes: Probe[]): string[] {
  return probes.map((p) => {
    const attribution = h.attribute(p);
    // explain writes the result buffer, not the batch: the records stay readable.
    const side = (i: number) => {
      const reason = h.reasonAt(i);
      return [h.verdictAt(i), reason, h.ruleAt(i), reason === 0 ? '' : h.explain(reason)];
    };
    return `${p.src} -> ${p.dst} ${p.protocol}/${p.port}: ${JSON.stringify({ egress: side(0), ingress: side(1), attribution })}`;
  });
}

export interface DifferentialRun { compared: number; accepted: number; denied: number; changes: Record<string, number> }

export interface DifferentialSetup {
  module: string;
  config?: Record<string, unknown>;
  /** The kind index of the policies in module.json. */
  policyKind?: number;
  clusterIds?: string[];
  /** A new random policy named `name`. */
  policy: (random: Random, name: string) => KubeObject;
  /** Snapshots of the module's other kinds (Nodes, ResolvedNames), after the pods. */
  otherKinds?: (h: ModuleHarness) => void;
}

/**
 * `rounds` rounds of `perRound` random probes through an indexed and an
 * unindexed instance, with one random change after each round; the first
 * disagreement fails the calling test.
 */
export async function differential(setup: DifferentialSetup, seed: number, rounds: number, perRound: number): Promise<DifferentialRun> {
  const { module, config = {}, policyKind = 0, clusterIds } = setup;
  const random = seededRandom(seed);
  const policy = (name: string) => setup.policy(random, name);
  const indexed = await ModuleHarness.load(builtWasm(module), { ...config, decisionCache: false });
  const plain = await ModuleHarness.load(builtWasm(module), { ...config, decisionCache: false, ruleIndex: false });
  const both = [indexed, plain];
  const cluster: RandomCluster = randomCluster(random, 24, clusterIds);
  for (const p of cluster.pods) for (const h of both) h.upsertPod(p);
  let policies = Array.from({ length: 30 }, (_, i) => policy(`p-${i}`));
  for (const h of both) {
    h.snapshot(policies, policyKind);
    setup.otherKinds?.(h);
  }
  let serial = policies.length;
  const run: DifferentialRun = { compared: 0, accepted: 0, denied: 0, changes: {} };
  for (let round = 0; round < rounds; round++) {
    const probes = randomProbes(random, cluster, perRound);
    const got = answers(indexed, probes);
    const want = answers(plain, probes);
    for (let i = 0; i < probes.length; i++) expect(got[i], `round ${round}`).toBe(want[i]);
    run.compared += probes.length * 2;
    for (const line of got) {
      run.accepted += (line.match(/"Accept"/g) ?? []).length;
      run.denied += (line.match(/"Deny"/g) ?? []).length;
    }
    const roll = random();
    let change: string;
    if (roll < 0.25) {
      change = 'pod relabel';
      const at = Math.floor(random() * cluster.pods.length);
      cluster.pods[at] = relabelledPod(random, cluster.pods[at]);
      for (const h of both) h.upsertPod(cluster.pods[at]);
    } else if (roll < 0.4) {
      change = 'namespace relabel';
      const changed = relabelledNamespace(random, cluster, pick(random, [...cluster.namespaceLabels.keys()]));
      for (const p of changed) for (const h of both) h.upsertPod(p);
    } else if (roll < 0.6) {
      change = 'policy added';
      const p = policy(`p-${serial++}`);
      policies.push(p);
      for (const h of both) h.upsert(p, policyKind);
    } else if (roll < 0.75) {
      change = 'policy changed';
      const old = pick(random, policies);
      const p = policy(old.metadata.name);
      if (old.metadata.namespace) p.metadata.namespace = old.metadata.namespace;
      policies = policies.map((q) => (q === old ? p : q));
      for (const h of both) h.upsert(p, policyKind);
    } else if (roll < 0.9) {
      change = 'policy deleted';
      const old = pick(random, policies);
      policies = policies.filter((q) => q !== old);
      for (const h of both) h.delete(old, policyKind);
    } else {
      change = 'relist';
      for (const h of both) h.snapshot(policies, policyKind);
    }
    run.changes[change] = (run.changes[change] ?? 0) + 1;
  }
  return run;
}

/**
 * What a subject-index run must have exercised to say anything: both verdicts
 * often enough, and the relabels that move pods in and out of subjects among
 * all six kinds of change.
 */
export function expectSubjectChurnCovered(run: DifferentialRun): void {
  expect(run.accepted).toBeGreaterThan(run.compared / 50);
  expect(run.denied).toBeGreaterThan(run.compared / 50);
  expect(run.changes['pod relabel']).toBeGreaterThan(10);
  expect(run.changes['namespace relabel']).toBeGreaterThan(5);
  expect(Object.keys(run.changes)).toHaveLength(6);
}
