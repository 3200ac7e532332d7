// The NetworkPolicy module at scale (1,000 policies, 10,000 pods): it agrees
// with a plain reference model on random flows, and its throughput is
// measured alone and through the pipeline's packet path.
import { describe, it, expect, beforeAll } from 'vitest';
import { fileURLToPath } from 'node:url';
import type { KubeObject, Packet } from '../../host/contract.js';
import { OfflineEvaluator } from '../../host/eval.js';
import { parseIP } from '../../host/net/ip.js';
import { ModuleHarness, podsFromObjects, type Probe } from '../../test/fixtures/abi-harness.js';
import { scaleCluster, scalePodIP, seeded } from '../../test/netpol/scale.js';
import { ReferenceModel } from '../../test/netpol/reference.js';

const release = fileURLToPath(new URL('../../dist/wasm/network-policy.wasm', import.meta.url));
const SHAPE = { namespaces: 100, podsPerNamespace: 100, policiesPerNamespace: 10 };
const PROTOCOLS = ['TCP', 'TCP', 'TCP', 'UDP', 'SCTP'] as const;
const PORTS = [80, 80, 81, 443];

let objects: KubeObject[];
let harness: ModuleHarness;
let loadMs = 0;

function randomFlows(count: number, seed: number): Probe[] {
  const rnd = seeded(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(rnd() * list.length)];
  const endpoint = () => {
    if (rnd() < 0.05) return `10.0.${Math.floor(rnd() * 256)}.${1 + Math.floor(rnd() * 200)}`;
    return `n-${Math.floor(rnd() * SHAPE.namespaces)}/p-${Math.floor(rnd() * SHAPE.podsPerNamespace)}`;
  };
  return Array.from({ length: count }, () => ({ src: endpoint(), dst: endpoint(), protocol: pick(PROTOCOLS), port: pick(PORTS) }));
}

beforeAll(async () => {
  objects = scaleCluster(SHAPE);
  harness = await ModuleHarness.load(release);
  const started = performance.now();
  for (const p of podsFromObjects(objects)) harness.upsertPod(p);
  harness.snapshot(objects.filter((o) => o.kind === 'NetworkPolicy'));
  loadMs = performance.now() - started;
}, 120_000);

/** 256 random pod-to-pod TCP packets through an NP-only pipeline: their verdicts and the packet rate. */
function pipelineRun(cluster: KubeObject[], shape: typeof SHAPE) {
  const ev = new OfflineEvaluator({ objects: cluster, pipeline: { stages: [{ name: 'np', label: 'NP', module: 'network-policy' }] } });
  const rnd = seeded(13);
  const pick = () => [Math.floor(rnd() * shape.namespaces), Math.floor(rnd() * shape.podsPerNamespace)] as const;
  const flows = Array.from({ length: 256 }, () => {
    const [sn, sp] = pick();
    const [dn, dp] = pick();
    return { src: `n-${sn}/p-${sp}`, dst: `n-${dn}/p-${dp}`, protocol: 'TCP', port: rnd() < 0.5 ? 80 : 81, s: scalePodIP(sn, sp), d: scalePodIP(dn, dp) };
  });
  const packets: Packet[] = flows.map((f) => ({ family: 4, protocol: 6, src: parseIP(f.s)!.bytes, dst: parseIP(f.d)!.bytes, srcPort: 40000, dstPort: f.port, icmpType: 0, icmpCode: 0 }));
  const allowed = packets.map((p) => ev.pipeline.allows(p));
  /** Packets a second over `rounds` passes. */
  const rate = (rounds: number) => {
    const started = performance.now();
    for (let r = 0; r < rounds; r++) for (let i = 0; i < packets.length; i++) ev.pipeline.allows(packets[i]);
    return (rounds * packets.length) / ((performance.now() - started) / 1000);
  };
  return { flows, allowed, rate, dispose: () => ev.dispose() };
}

describe('the NetworkPolicy module at 1,000 policies and 10,000 pods', () => {
  it('agrees with the reference model on 4,000 random flows', () => {
    const model = new ReferenceModel(objects);
    // Flows to external addresses are judged by address only: the reference does not map 10.0.x.y back to pods.
    const flows = randomFlows(4_000, 7).filter((f) => f.src.includes('/') || !objects.some((o) => o.kind === 'Pod' && o.status.podIP === f.src))
      .filter((f) => f.dst.includes('/') || !objects.some((o) => o.kind === 'Pod' && o.status.podIP === f.dst));
    const mismatches: string[] = [];
    let allowed = 0;
    for (const f of flows) {
      const got = harness.probe(f).allowed;
      const want = model.allows(f);
      if (got) allowed++;
      if (got !== want) mismatches.push(`${f.src} -> ${f.dst} ${f.protocol}/${f.port}: module ${got ? 'allows' : 'denies'}, reference ${want ? 'allows' : 'denies'}`);
    }
    expect(mismatches.slice(0, 10)).toEqual([]);
    // Both outcomes occur, so the comparison means something.
    expect(allowed).toBeGreaterThan(flows.length / 20);
    expect(allowed).toBeLessThan(flows.length - flows.length / 20);
  });

  it('decides records at a rate of millions a second in the module', () => {
    const probes = randomFlows(32, 11);
    const records = harness.writeProbes(probes);
    for (let i = 0; i < 1000; i++) harness.decideBatch(records);
    // Best of several passes, so a burst of load on the shared machine does not decide the result.
    let perSecond = 0;
    for (let pass = 0; pass < 5; pass++) {
      const total = 500_000;
      const started = performance.now();
      for (let done = 0; done < total; done += records) harness.decideBatch(records);
      perSecond = Math.max(perSecond, total / ((performance.now() - started) / 1000));
    }
    console.log(`network-policy module: ${(perSecond / 1e6).toFixed(2)} M decisions/s (batches of ${records}); snapshot of ${SHAPE.namespaces * SHAPE.podsPerNamespace} pods and ${SHAPE.namespaces * SHAPE.policiesPerNamespace} policies loaded in ${loadMs.toFixed(0)} ms`);
    // 1.3-3 M/s measured on a shared 2-core box (load average 13); the floor leaves room for a loaded CI machine.
    expect(perSecond).toBeGreaterThan(500_000);
  });

  it('gives the reference verdicts through the pipeline packet path at the speed of a small cluster', () => {
    const smallShape = { namespaces: 2, podsPerNamespace: 50, policiesPerNamespace: 10 };
    const big = pipelineRun(objects, SHAPE);
    const small = pipelineRun(scaleCluster(smallShape), smallShape);
    try {
      const model = new ReferenceModel(objects);
      expect(big.allowed).toEqual(big.flows.map((f) => model.allows(f)));
      expect(big.allowed.filter(Boolean).length).toBeGreaterThan(10);
      // Alternate and keep each one's best, so a burst of load on the shared machine does not decide the comparison.
      let bigRate = 0;
      let smallRate = 0;
      for (let i = 0; i < 4; i++) {
        bigRate = Math.max(bigRate, big.rate(60));
        smallRate = Math.max(smallRate, small.rate(60));
      }
      console.log(`pipeline with the NP stage only: ${(bigRate / 1e6).toFixed(3)} M packets/s at 10,000 pods, ${(smallRate / 1e6).toFixed(3)} M packets/s at 100 pods (one record per call, up to two decisions a packet)`);
      // Absolute rates here are the host's per-call cost on a shared machine; a
      // module that scanned pods or policies per packet would be ~100x slower
      // at 10,000 pods than at 100.
      expect(bigRate).toBeGreaterThan(smallRate / 5);
    } finally {
      big.dispose();
      small.dispose();
    }
  });
});
