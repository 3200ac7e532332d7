// The cluster-network-policy module under the host's real sandbox limits
// (fuel instrumentation, default budgets) with thousands of pods and
// hundreds of policies: syncing and live policy changes must fit one call's
// fuel, and deciding stays correct when pod lists are filled lazily.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileEvaluator } from '../../host/runtime/loader.js';
import { EvaluatorInstance } from '../../host/runtime/instance.js';
import { DEFAULT_LIMITS, callFuelForCap, memoryCapForState } from '../../host/runtime/limits.js';
import { ObjectOp } from '../../host/abi/objects.js';
import { encodePodInfo } from '../../host/abi/podinfo-codec.js';
import type { PodInfo } from '../../host/contract.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const wasm = readFileSync(join(root, 'dist/wasm/cluster-network-policy.wasm'));
const encoder = new TextEncoder();

/** `own`: the pod also carries a label no other pod has, so no two pods share their label set. */
function podInfo(i: number, own = false): PodInfo {
  return {
    id: i, name: `p${i}`, namespace: `ns${i % 100}`,
    podLabels: own ? { app: `a${i % 50}`, instance: `p${i}` } : { app: `a${i % 50}` },
    namespaceLabels: { 'kubernetes.io/metadata.name': `ns${i % 100}`, team: `t${i % 10}` },
    nodeName: 'node-1', nodeLabels: {}, clusterId: '', containerPorts: [], hostNetwork: false,
    ips: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
  };
}

/** Policy j selects team t(j%10) pods labelled a(j%50) or a(j+1 %50) and denies all ingress from team t9 pods. */
function policy(j: number): Uint8Array {
  return encoder.encode(JSON.stringify({
    apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: `pol-${String(j).padStart(4, '0')}` },
    spec: {
      tier: 'Admin', priority: j % 1000,
      subject: { pods: { namespaceSelector: { matchLabels: { team: `t${j % 10}` } }, podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: [`a${j % 50}`, `a${(j + 1) % 50}`] }] } } },
      ingress: [{ name: `deny-${j}`, action: 'Deny', from: [{ namespaces: { matchLabels: { team: 't9' } } }] }],
    },
  }));
}

function record(src: PodInfo, dst: PodInfo): Uint8Array {
  const r = new Uint8Array(64);
  const v = new DataView(r.buffer);
  r[0] = 1; r[1] = 4; r[2] = 6;
  v.setUint16(4, 40000, true); v.setUint16(6, 80, true);
  v.setUint32(12, src.id, true); v.setUint32(16, dst.id, true);
  r.set(src.ips[0].split('.').map(Number), 20);
  r.set(dst.ips[0].split('.').map(Number), 36);
  return r;
}

function cluster(pods: number, policies: number, own = false): EvaluatorInstance {
  const encodedPods = Array.from({ length: pods }, (_, i) => encodePodInfo(podInfo(i + 1, own)));
  const encodedPolicies = Array.from({ length: policies }, (_, j) => policy(j));
  // The tank a stage gives a call into an instance sized for this state (the
  // encodings are only weighed here: the deliveries below encode afresh):
  // fuelPerCall plus fuelPerStateByte a byte (docs/sandbox.md, "How fuel is counted").
  const stateBytes = [...encodedPods, ...encodedPolicies].reduce((sum, b) => sum + b.length, 0);
  const stageTank = callFuelForCap(DEFAULT_LIMITS, memoryCapForState(DEFAULT_LIMITS, stateBytes));
  const inst = new EvaluatorInstance(compileEvaluator(wasm, { source: 'scale-test', limits: { fuelPerCall: stageTank } }));
  inst.configure({ tier: 'Admin' });
  for (let i = 1; i <= pods; i++) inst.upsertPod(encodePodInfo(podInfo(i, own)));
  for (let kind = 0; kind < 3; kind++) {
    inst.object(kind, ObjectOp.Reset);
    if (kind === 0) for (let j = 0; j < policies; j++) inst.object(0, ObjectOp.Upsert, policy(j));
    inst.object(kind, ObjectOp.Synced);
  }
  return inst;
}

/**
 * The rule that denies ingress to pod `dst` from team t9: the first by
 * priority, then name, of the policies selecting it (j with j % 50 == dst % 50,
 * since j % 10 then matches too), leaving out `without`.
 */
function expectedDeny(dst: number, policies: number, without = -1): string {
  let best = -1;
  for (let j = dst % 50; j < policies; j += 50) {
    if (j === without) continue;
    if (best < 0 || j % 1000 < best % 1000 || (j % 1000 === best % 1000 && j < best)) best = j;
  }
  return `deny-${best}`;
}

describe('the cluster-network-policy module at scale', () => {
  it.each([
    [5_000, 200],
    [20_000, 300],
    // As many policies as pods: the least state for the most pairs filled at once (a million),
    // so the smallest tank for the Synced step's work (it broke on fuel at 512 units a state byte).
    [1_000, 1_000],
    [2_500, 400],
    // More policies of the tier than one decision's tank could match against a pod (about
    // 3,000 at 320 units a policy): a pod's list must come from the subject index's candidates.
    [2_000, 3_000],
    [5_000, 10_000],
  ])('with %i pods and %i policies syncs, takes live changes within the tank a stage gives that state and decides right', (pods, policies) => {
    checkCluster(pods, policies, false);
  }, 240_000);

  // No two pods share their label set, so no list is computed once for a whole workload:
  // past a million candidates the rest of the pods fill in at their first decision.
  it.each([
    [2_000, 3_000],
    [5_000, 10_000],
  ])('with %i pods of labels of their own and %i policies syncs, takes live changes and decides right at each pod\'s first decision', (pods, policies) => {
    checkCluster(pods, policies, true);
  }, 240_000);
});

/** The rule that decided the last record, without the note on a tie. */
const decidedBy = (inst: EvaluatorInstance) => inst.explain(inst.lastReason()).split(';')[0];

function checkCluster(pods: number, policies: number, own: boolean): void {
  const inst = cluster(pods, policies, own);
  // Pod 12 (team t2, app a12) is the subject of policies 12, 62, 112, ...; pod 19 is team t9.
  const dst = podInfo(12, own);
  const fromT9 = podInfo(19);
  const fromT1 = podInfo(11);
  expect(inst.decideOne(record(fromT9, dst))).toBe(2);
  expect(decidedBy(inst)).toBe(expectedDeny(12, policies));
  expect(inst.decideOne(record(fromT1, dst))).toBe(0);
  inst.object(0, ObjectOp.Delete, policy(12));
  expect(inst.decideOne(record(fromT9, dst))).toBe(2);
  expect(decidedBy(inst)).toBe(expectedDeny(12, policies, 12));
  inst.object(0, ObjectOp.Upsert, policy(12));
  expect(inst.decideOne(record(fromT9, dst))).toBe(2);
  expect(decidedBy(inst)).toBe('deny-12');
  // First decisions for pods spread over every app (each selected by policies/50 policies,
  // each a candidate of policies/25): every one within a decision's tank, and right.
  for (let i = 1; i <= pods; i += Math.floor(pods / 97)) {
    const to = podInfo(i, own);
    expect(inst.decideOne(record(fromT9, to)), `pod ${i}`).toBe(2);
    expect(decidedBy(inst), `pod ${i}`).toBe(expectedDeny(i, policies));
    expect(inst.decideOne(record(fromT1, to)), `pod ${i}`).toBe(0);
  }
  expect(inst.broken).toBeUndefined();
}
