// A snapshot's SYNCED works out every pod's isolation in one pass, matching
// each label set against its namespace's policies once (IsolationMemo in
// sdk/networkpolicy/evaluator.ts). These tests hold that pass to the answers
// a pod gets when it arrives after the policies (podUpserted, no memo), with
// pods built to catch a memo keyed too loosely, and count its work in fuel.
import { describe, it, expect } from 'vitest';
import { ModuleHarness, type HarnessPod, type Probe } from '../../test/fixtures/abi-harness.js';
import { networkPolicy } from '../../test/netpol/cluster.js';
import { builtWasm } from '../../test/netpol/rule-index-differential.js';
import { BuiltinModules } from '../../host/pipeline/modules.js';
import { EvaluatorInstance } from '../../host/runtime/instance.js';
import { ObjectOp, encodeObject } from '../../host/abi/objects.js';
import { encodePodInfo } from '../../test/fixtures/abi-harness.js';

const WEB = { app: 'web' };
const DB = { app: 'db' };

/**
 * Pods whose label sets repeat across namespaces (the same bytes, so the
 * module shares one label set object between them), led in every namespace
 * by pods that must not pass their answer on: a host-networked pod, and in
 * the multicluster module a pod of another cluster, each with the labels of
 * the pods after it.
 */
function pods(clusterOf: (ns: string, i: number) => string = () => ''): HarnessPod[] {
  const out: HarnessPod[] = [];
  let id = 1;
  for (const [n, ns] of ['x', 'y', 'z'].entries()) {
    const add = (name: string, labels: Record<string, string>, extra: Partial<HarnessPod> = {}) => {
      const i = out.length;
      out.push({
        id: id++, name, namespace: ns, hostNetwork: false, podLabels: labels, namespaceLabels: { ns },
        containerPorts: [{ name: 'http', port: 80, protocol: 'TCP' }], ips: [`10.${n}.0.${i + 1}`], clusterId: clusterOf(ns, i), ...extra,
      });
    };
    add('host-web', WEB, { hostNetwork: true, ips: [`192.168.${n}.1`] });
    for (let i = 0; i < 3; i++) add(`web-${i}`, WEB);
    for (let i = 0; i < 2; i++) add(`db-${i}`, DB);
  }
  return out;
}

// Different policies select the same label set in x and y, none in z.
const POLICIES = [
  networkPolicy('x', 'web-from-db', { podSelector: { matchLabels: WEB }, ingress: [{ from: [{ podSelector: { matchLabels: DB } }], ports: [{ protocol: 'TCP', port: 80 }] }] }),
  networkPolicy('y', 'web-egress-z', { podSelector: { matchLabels: WEB }, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }] }] }),
  networkPolicy('z', 'db-from-all', { podSelector: { matchLabels: DB }, ingress: [{ from: [{ namespaceSelector: {} }] }] }),
];

/** Every ordered pair of pods on TCP 80: both directions' verdicts and texts. */
function answers(h: ModuleHarness, all: HarnessPod[]): string[] {
  const out: string[] = [];
  for (const a of all) {
    for (const b of all) {
      if (a === b) continue;
      const probe: Probe = { src: `${a.namespace}/${a.name}`, dst: `${b.namespace}/${b.name}`, protocol: 'TCP', port: 80 };
      const o = h.probe(probe);
      out.push(`${probe.src} -> ${probe.dst}: ${o.egress.verdict} (${o.egress.text}) / ${o.ingress.verdict} (${o.ingress.text})`);
    }
  }
  return out;
}

async function fedBothWays(wasm: string, all: HarnessPod[], config: unknown = {}) {
  // Pods first, then the snapshot: SYNCED computes every isolation in one pass.
  const synced = await ModuleHarness.load(wasm, config);
  for (const p of all) synced.upsertPod(p);
  synced.snapshot(POLICIES);
  // Policies first: each pod's isolation is computed as it arrives.
  const oneByOne = await ModuleHarness.load(wasm, config);
  oneByOne.snapshot(POLICIES);
  for (const p of all) oneByOne.upsertPod(p);
  return { synced, oneByOne };
}

describe('a NetworkPolicy snapshot\'s SYNCED', () => {
  it('gives every pod the policies it gets when it arrives after them, for label sets shared across namespaces and by host-networked pods', async () => {
    const all = pods();
    const { synced, oneByOne } = await fedBothWays(builtWasm('network-policy'), all);
    const got = answers(synced, all);
    expect(got).toEqual(answers(oneByOne, all));
    expect(synced.subjects()).toEqual(oneByOne.subjects());
    // The pods differ where the namespaces' policies do, so a memo blind to the namespace shows.
    expect(got).toContain('x/db-0 -> x/web-0: Next (no NetworkPolicy selects the pod for egress) / Accept (x/web-from-db)');
    expect(got).toContain('y/web-0 -> x/db-0: Deny (no egress rule of y/web-egress-z matched) / Next (no NetworkPolicy selects the pod for ingress)');
    expect(got).toContain('z/db-0 -> z/web-0: Next (no NetworkPolicy selects the pod for egress) / Next (no NetworkPolicy selects the pod for ingress)');
    // A host-networked pod is never isolated, and the pods with its labels after it still are.
    expect((synced.subjects() as number[]).includes(all.find((p) => p.name === 'host-web' && p.namespace === 'x')!.id)).toBe(false);
    expect((synced.subjects() as number[]).includes(all.find((p) => p.name === 'web-0' && p.namespace === 'x')!.id)).toBe(true);
  });

  it('keeps pods of other clusters out of the multicluster module\'s isolation though a local pod with their labels follows', async () => {
    // The first pod of each label set in each namespace is of another cluster: canBeSubject says no to it alone.
    const all = pods((_ns, i) => (i % 6 === 1 || i % 6 === 4 ? 'west' : 'east'));
    const { synced, oneByOne } = await fedBothWays(builtWasm('multicluster-network-policy'), all, { clusterId: 'east' });
    expect(answers(synced, all)).toEqual(answers(oneByOne, all));
    const subjects = synced.subjects() as number[];
    expect(subjects).toEqual(oneByOne.subjects());
    const west = all.filter((p) => p.clusterId === 'west' && !p.hostNetwork);
    expect(west.length).toBeGreaterThan(0);
    for (const p of west) expect(subjects.includes(p.id)).toBe(false);
    expect(subjects.includes(all.find((p) => p.name === 'web-1' && p.namespace === 'x')!.id)).toBe(true);
  });

  it('matches a label set shared by many pods once, not once per pod (fuel)', () => {
    // 2,000 pods in 4 namespaces against 200 policies: in one case 4 label sets per namespace, in the other a set per pod.
    const compiled = new BuiltinModules().resolve('network-policy');
    const policies = Array.from({ length: 200 }, (_, i) => encodeObject(networkPolicy(`ns-${i % 4}`, `p-${i}`, {
      podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: [`app-${i % 7}`, `app-${(i + 3) % 7}`] }] },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: `app-${(i + 1) % 7}` } } }] }],
    })).slice());
    const syncedFuel = (labelsOf: (i: number) => Record<string, string>) => {
      const inst = new EvaluatorInstance(compiled, undefined, { memoryPages: 2048 });
      inst.configure({});
      for (let i = 0; i < 2000; i++) {
        inst.upsertPod(encodePodInfo({
          id: i + 1, name: `pod-${i}`, namespace: `ns-${i % 4}`, hostNetwork: false, podLabels: labelsOf(i),
          namespaceLabels: {}, containerPorts: [], ips: [`10.1.${i >> 8}.${i & 255}`],
        }));
      }
      inst.object(0, ObjectOp.Reset);
      for (const p of policies) inst.object(0, ObjectOp.Upsert, p);
      inst.object(0, ObjectOp.Synced);
      // The tank is private to the instance: what SYNCED spent is the call's tank less what it left.
      const tank = inst as unknown as { callFuel: number; fuel: WebAssembly.Global };
      return tank.callFuel - (tank.fuel.value as number);
    };
    const shared = syncedFuel((i) => ({ app: `app-${(i >> 2) % 4}`, tier: 'web' }));
    const distinct = syncedFuel((i) => ({ app: `app-${(i >> 2) % 4}`, tier: `web-${i}` }));
    // Matching dominates SYNCED here: 500 pods per namespace share 4 sets against 1 set each.
    expect(shared).toBeLessThan(distinct / 3);
  });
});
