// Issue 14, state at cluster scale, on a real `kwp agent --dataplane=off`
// (a child process, the default pipeline, default sandbox limits) against the
// API-server emulator over real HTTP: 100,000 NetworkPolicies in 1,000
// namespaces and 20,000 pods of the bench generator. The agent lists them at
// start, then relists everything after its watches expire, with every pod
// relabelled meanwhile. Throughout, /healthz is asked every 100 ms and each
// answer must come within 1 s, the agent must live and its RSS stay below
// the documented bound; afterwards sampled flows must get the verdicts of the
// independent reference model (test/netpol/reference.ts).
//
// The emulator runs in a child process (cluster-server.ts, from the compiled
// tree: npm run build first), so that its own work listing 100,000 objects is
// not counted against the agent's answers. Heavy (minutes on a loaded 2-core
// machine, about 2 GB of memory in all): it runs on its own, `npm run
// test:scale` (vitest.scale.config.ts), not in the `npm test` pool.
// KWP_SCALE_NODE_ARGS passes node flags to the agent, e.g. `--cpu-prof
// --cpu-prof-dir=/tmp/prof` to profile it.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Kinds, type KubeObject } from '../../host/contract.js';
import { writeKubeconfig } from '../apiserver/kubeconfig.js';
import { AgentProcess, REPO, type HealthRecord } from '../fixtures/agent-process.js';
import { relabelled, scaleObjects } from './cluster.js';
import { ReferenceModel } from '../netpol/reference.js';
import { seeded } from '../netpol/scale.js';
import { expectBounded } from '../sandbox/bounded.js';

const SAMPLED_FLOWS = 150;
/** Generous: listing and feeding 100,000 policies takes minutes on a loaded node. */
const SETTLE_MS = 30 * 60_000;

let api: ChildProcess;
let agent: AgentProcess;
let objects: KubeObject[];

/** Sends the emulator's process `op` and resolves with its first answer. */
function server(op?: 'relabel' | 'up'): Promise<{ url?: string; done?: string }> {
  return new Promise((resolve, reject) => {
    api.once('message', resolve);
    api.once('exit', (code) => reject(new Error(`the emulator's process exited with ${code}`)));
    if (op) api.send({ op });
  });
}

/** Polls `probe` every 500 ms until it returns something, for at most `ms`. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = SETTLE_MS): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (!agent.alive) throw new Error(`${what}: the agent exited; its log: ${agent.log.slice(-4000)}`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s; agent log: ${agent.log.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** kwp_cluster_state_replaces_total per kind: lists the agent's cluster state has taken whole. */
async function replaces(): Promise<Map<string, number>> {
  const text = (await agent.request('GET', '/metrics')).text;
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^kwp_cluster_state_replaces_total\{kind="([^"]+)"\} (\d+)$/gm)) counts.set(m[1], Number(m[2]));
  return counts;
}

/** /readyz 200: every source synced, no list being taken in slices, every stage answering with the current state. */
async function ready(): Promise<true | undefined> {
  return (await agent.request('GET', '/readyz')).status === 200 ? true : undefined;
}

/** Sampled pod-to-pod flows, explained by the agent, against the reference model over `objects`. */
async function mismatches(): Promise<{ wrong: string[]; allowed: number }> {
  const reference = new ReferenceModel(objects);
  const pods = objects.filter((o) => o.kind === 'Pod');
  const rnd = seeded(23);
  const pick = () => pods[Math.floor(rnd() * pods.length)];
  const wrong: string[] = [];
  let allowed = 0;
  for (let i = 0; i < SAMPLED_FLOWS; i++) {
    const src = pick();
    const dst = pick();
    const udp = rnd() < 0.1;
    const port = udp ? 5353 : [8080, 8080, 9090, 50051, 443][Math.floor(rnd() * 5)];
    const flow = { src: `${src.metadata.namespace}/${src.metadata.name}`, dst: `${dst.metadata.namespace}/${dst.metadata.name}`, protocol: udp ? 'UDP' : 'TCP', port };
    const res = await agent.request('POST', '/v1/explain', flow);
    const want = reference.allows(flow);
    if (res.json.verdict === 'allow') allowed++;
    const failed = [...(res.json.egress ?? []), ...(res.json.ingress ?? [])].some((t: { failure?: unknown }) => t.failure);
    if (res.status !== 200 || failed || (res.json.verdict === 'allow') !== want) {
      wrong.push(`${flow.src} -> ${flow.dst} ${flow.protocol}/${port}: the agent said ${res.status} ${res.json.verdict}${failed ? ' (a failure policy)' : ''}, the reference ${want ? 'allows' : 'denies'}`);
    }
  }
  return { wrong, allowed };
}

function report(phase: string, health: HealthRecord, started: number): void {
  console.log(`cluster scale, ${phase}: ${((Date.now() - started) / 1000).toFixed(0)} s, ${health.checks} /healthz checks, slowest ${health.slowestMs} ms, event loop held at most ${health.loopLagMaxMs.toFixed(0)} ms, ${health.failures} failed, peak RSS ${health.peakRssMiB.toFixed(0)} MiB`);
}

beforeAll(async () => {
  objects = scaleObjects();
  api = fork(join(REPO, 'dist/test/scale/cluster-server.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const { url } = await server();
  agent = await AgentProcess.start(['--kubeconfig', await writeKubeconfig({ server: url! })], {
    nodeArgs: process.env.KWP_SCALE_NODE_ARGS ? process.env.KWP_SCALE_NODE_ARGS.split(' ') : [],
  });
}, 300_000);

afterAll(async () => {
  await agent?.stop();
  api?.disconnect();
});

describe('a real agent over 100,000 NetworkPolicies and 20,000 pods', () => {
  it('takes the whole cluster at start with /healthz answering within 1 s throughout, and decides sampled flows as the reference does', async () => {
    const started = Date.now();
    const { health } = await agent.during(() => until('the agent ready with the whole cluster', async () => {
      const counts = await replaces();
      return (counts.get(Kinds.Pod) ?? 0) > 0 && (counts.get(Kinds.NetworkPolicy) ?? 0) > 0 ? ready() : undefined;
    }));
    report('start', health, started);
    expectBounded(agent, health);
    const { wrong, allowed } = await mismatches();
    expect(wrong.slice(0, 5)).toEqual([]);
    // Both outcomes occur often enough for the comparison to mean something.
    expect(allowed).toBeGreaterThan(SAMPLED_FLOWS / 10);
    expect(allowed).toBeLessThan(SAMPLED_FLOWS * 0.9);
  }, SETTLE_MS + 120_000);

  it('relists every kind after its watches expired, every pod relabelled, with /healthz answering within 1 s throughout, and then decides as the reference does over the new labels', async () => {
    const before = await replaces();
    const started = Date.now();
    // The API server goes away; meanwhile every pod changes its app label and the history is compacted, so the agent's watches come back to 410 and it lists everything again.
    await server('relabel');
    objects = objects.map((o) => (o.kind === 'Pod' ? relabelled(o) : o));
    const { health } = await agent.during(async () => {
      await server('up');
      return until('the agent ready after relisting pods and NetworkPolicies', async () => {
        const counts = await replaces();
        const relisted = (k: string) => (counts.get(k) ?? 0) > (before.get(k) ?? 0);
        return relisted(Kinds.Pod) && relisted(Kinds.NetworkPolicy) ? ready() : undefined;
      });
    });
    report('relist', health, started);
    expectBounded(agent, health);
    const { wrong } = await mismatches();
    expect(wrong.slice(0, 5)).toEqual([]);
  }, SETTLE_MS + 120_000);
});
