// `kwp eval` (OfflineEvaluator, the default pipeline of every built-in stage)
// over 100,000 NetworkPolicies and 20,000 pods: each stage holds the state
// under the default sandbox limits, and sampled flows get the verdicts of an
// independent reference. About 3 to 4 minutes on a loaded 2-core machine; the
// figures it prints are the ones docs/sandbox.md quotes.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { generateCluster, clusterObjects } from '../bench/generator.js';
import type { KubeObject } from './contract.js';
import { OfflineEvaluator, type FlowInput } from './eval.js';
import { DEFAULT_LIMITS, memoryCapForState } from './runtime/limits.js';
import { ReferenceModel } from '../test/netpol/reference.js';
import { seeded } from '../test/netpol/scale.js';

const SHAPE = { name: 'cluster-scale', namespaces: 1000, pods: 20_000, networkPolicies: 100_000, clusterNetworkPolicies: 0 };
/** An Admin-tier ClusterNetworkPolicy: TCP/5555 to any pod is denied, whatever the NetworkPolicies say. */
const ADMIN_DENY: KubeObject = {
  apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: 'deny-5555' },
  spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ingress: [{ name: 'no-5555', action: 'Deny', from: [{ namespaces: {} }], protocols: [{ tcp: { destinationPort: { number: 5555 } } }] }] },
};

let objects: KubeObject[];
let ev: OfflineEvaluator;
let loadSeconds = 0;

beforeAll(() => {
  const cluster = generateCluster(SHAPE, 7);
  objects = [...clusterObjects(cluster).flatMap(([, list]) => list), ADMIN_DENY];
  const started = performance.now();
  ev = new OfflineEvaluator({ objects });
  loadSeconds = (performance.now() - started) / 1000;
}, 600_000);
afterAll(() => ev?.dispose());

describe('kwp eval over 100,000 NetworkPolicies and 20,000 pods', () => {
  it('holds the state in every built-in stage, each within the cap its state gives it', () => {
    const stages = ev.pipeline.stages;
    expect(stages.map((s) => s.name)).toEqual(['cnp-admin', 'anp', 'np', 'banp', 'cnp-baseline']);
    const figures: string[] = [];
    for (const s of stages) {
      expect(s.healthy, s.name).toBe(true);
      expect(s.stateProblem, s.name).toBeUndefined();
      expect(s.counters.traps + s.counters.fuelExhausted, s.name).toBe(0);
      expect(s.memoryCapPages, s.name).toBe(memoryCapForState(DEFAULT_LIMITS, s.heldBytes));
      expect(s.memoryBytes, s.name).toBeLessThanOrEqual(s.memoryCapPages * 65536);
      figures.push(`${s.name} ${s.memoryBytes / 65536}/${s.memoryCapPages} pages (${(s.heldBytes / 1048576).toFixed(1)} MiB state)`);
    }
    // The NetworkPolicy stage is the one whose state is above the base cap's reach.
    expect(stages[2].memoryCapPages).toBeGreaterThan(DEFAULT_LIMITS.maxMemoryPages);
    console.log(`cluster scale: loaded in ${loadSeconds.toFixed(1)} s, RSS ${(process.memoryUsage().rss / 1048576).toFixed(0)} MiB; ${figures.join('; ')}`);
  });

  it('gives the reference verdicts for 600 sampled flows', () => {
    const reference = new ReferenceModel(objects);
    const rnd = seeded(11);
    const pods = objects.filter((o) => o.kind === 'Pod');
    const pick = () => pods[Math.floor(rnd() * pods.length)];
    const flows: FlowInput[] = Array.from({ length: 600 }, () => {
      const src = pick();
      const dst = pick();
      const udp = rnd() < 0.1;
      const port = udp ? 5353 : [8080, 8080, 9090, 50051, 443, 5555][Math.floor(rnd() * 6)];
      return { src: `${src.metadata.namespace}/${src.metadata.name}`, dst: `${dst.metadata.namespace}/${dst.metadata.name}`, protocol: udp ? 'UDP' : 'TCP', port };
    });
    const mismatches: string[] = [];
    let allowed = 0;
    for (const [i, f] of flows.entries()) {
      const got = ev.evaluate(f, i);
      const want = f.port === 5555 ? false : reference.allows({ ...f, protocol: f.protocol! });
      if (got.verdict === 'allow') allowed++;
      if (got.egress.concat(got.ingress).some((t) => t.failure)) mismatches.push(`${got.walkthrough}: a stage answered its failure policy`);
      if ((got.verdict === 'allow') !== want) mismatches.push(`${got.walkthrough}: the reference ${want ? 'allows' : 'denies'}`);
    }
    expect(mismatches.slice(0, 5)).toEqual([]);
    // Both outcomes occur often enough for the comparison to mean something.
    expect(allowed).toBeGreaterThan(60);
    expect(allowed).toBeLessThan(540);
  }, 120_000);
});
