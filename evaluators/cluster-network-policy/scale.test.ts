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

function podInfo(i: number): PodInfo {
  return {
    id: i, name: `p${i}`, namespace: `ns${i % 100}`,
    podLabels: { app: `a${i % 50}` },
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

function cluster(pods: number, policies: number): EvaluatorInstance {
  const encodedPods = Array.from({ length: pods }, (_, i) => encodePodInfo(podInfo(i + 1)));
  const encodedPolicies = Array.from({ length: policies }, (_, j) => policy(j));
  // The tank a stage gives a call into an instance sized for this state (the
  // encodings are only weighed here: the deliveries below encode afresh):
  // fuelPerCall plus fuelPerStateByte a byte (docs/sandbox.md, "How fuel is counted").
  const stateBytes = [...encodedPods, ...encodedPolicies].reduce((sum, b) => sum + b.length, 0);
  const stageTank = callFuelForCap(DEFAULT_LIMITS, memoryCapForState(DEFAULT_LIMITS, stateBytes));
  const inst = new EvaluatorInstance(compileEvaluator(wasm, { source: 'scale-test', limits: { fuelPerCall: stageTank } }));
  inst.configure({ tier: 'Admin' });
  for (let i = 1; i <= pods; i++) inst.upsertPod(encodePodInfo(podInfo(i)));
  for (let kind = 0; kind < 3; kind++) {
    inst.object(kind, ObjectOp.Reset);
    if (kind === 0) for (let j = 0; j < policies; j++) inst.object(0, ObjectOp.Upsert, policy(j));
    inst.object(kind, ObjectOp.Synced);
  }
  return inst;
}

describe('the cluster-network-policy module at scale', () => {
  it.each([
    [5_000, 200],
    [20_000, 300],
    // As many policies as pods: the least state for the most pairs filled at once (a million),
    // so the smallest tank for the Synced step's work (it broke on fuel at 512 units a state byte).
    [1_000, 1_000],
    [2_500, 400],
  ])('with %i pods and %i policies syncs, takes live changes within the tank a stage gives that state and decides right', (pods, policies) => {
    const inst = cluster(pods, policies);
    // Pod 12 (team t2, app a12) is the subject of policies 12, 62, 112, ...; pod 19 is team t9.
    const dst = podInfo(12);
    const fromT9 = podInfo(19);
    const fromT1 = podInfo(11);
    expect(inst.decideOne(record(fromT9, dst))).toBe(2);
    expect(inst.explain(inst.lastReason())).toBe('deny-12');
    expect(inst.decideOne(record(fromT1, dst))).toBe(0);
    inst.object(0, ObjectOp.Delete, policy(12));
    expect(inst.decideOne(record(fromT9, dst))).toBe(2);
    expect(inst.explain(inst.lastReason())).toBe('deny-62');
    inst.object(0, ObjectOp.Upsert, policy(12));
    expect(inst.decideOne(record(fromT9, dst))).toBe(2);
    expect(inst.explain(inst.lastReason())).toBe('deny-12');
    expect(inst.broken).toBeUndefined();
  }, 120_000);
});
