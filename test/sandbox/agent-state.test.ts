// Issue 14, state: a cluster state the NetworkPolicy module cannot hold
// within its ceiling, delivered to a real `kwp agent --dataplane=off` while
// it runs (its manifests directory grows by 4,000 policies). The stage keeps
// deciding with the last state it held — neither the new state half-applied
// nor deny-all —, /readyz and the metrics say so naming the stage and the
// limit, /healthz answers within 1 s throughout, the agent lives within its
// memory bound, and once the state fits again the stage follows it.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { cpSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess } from '../fixtures/agent-process.js';
import { expectBounded } from './bounded.js';

/** A ceiling of 80 pages (5 MiB) for every stage: the basic example fits, 4,000 more policies do not. */
const LIMITS = { maxMemoryPages: 64, memoryPerStateByte: 4, maxStageMemoryPages: 80 };

let agent: AgentProcess;
let manifests: string;
beforeAll(async () => {
  manifests = mkdtempSync(join(tmpdir(), 'kwp-sandbox-state-'));
  cpSync('examples/basic/manifests', manifests, { recursive: true });
  agent = await AgentProcess.start(['--manifests', manifests, ...Object.entries(LIMITS).flatMap(([k, v]) => ['--sandbox-limit', `${k}=${v}`])]);
}, 120_000);
afterAll(async () => {
  await agent?.stop();
  rmSync(manifests, { recursive: true, force: true });
});

/** The basic example's verdicts: web may reach db on http, batch may not, and namespace x is open. */
async function basicVerdicts(): Promise<string[]> {
  return Promise.all([['x/a', 'y/a'], ['x/b', 'y/a'], ['x/a', 'x/b']].map(async ([src, dst]) => (await agent.explain(src, dst, 80)).json.verdict));
}
const BASIC = ['allow', 'deny', 'allow'];

/** Polls `probe` every 200 ms until it returns something, for at most `ms`. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 90_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s; agent log: ${agent.log.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** 4,000 policies that select no pod of the example, each with selectors of its own, and one that would isolate namespace x. */
function oversizedState(): string {
  const docs = Array.from({ length: 4000 }, (_, i) => JSON.stringify({
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: `filler-${i}`, namespace: 'y' },
    spec: { podSelector: { matchLabels: { [`filler-key-${i}`]: `filler-value-${i}` } }, ingress: [{ from: [{ podSelector: { matchLabels: { [`peer-${i}`]: `p${i}` } } }], ports: [{ port: 10000 + (i % 50000), protocol: 'TCP' }] }] },
  }));
  docs.push(JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'isolate-x', namespace: 'x' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } }));
  return docs.join('\n---\n');
}

describe('a state the NetworkPolicy module cannot hold within maxStageMemoryPages', () => {
  it('is not taken: the stage answers with the last state it held, /readyz and kwp_stage_state_stale name the stage and the limit, and the agent stays bounded', async () => {
    expect((await agent.request('GET', '/readyz')).status).toBe(200);
    expect(await basicVerdicts()).toEqual(BASIC);
    const { result, health } = await agent.during(async () => {
      // Written whole, then renamed into the watched directory.
      writeFileSync(join(manifests, '.filler.tmp'), oversizedState());
      renameSync(join(manifests, '.filler.tmp'), join(manifests, 'filler.yaml'));
      return until('the stage rejecting the state', async () => {
        const res = await agent.request('GET', '/readyz');
        return res.status === 503 && /cannot hold the state/.test(res.json.message) ? res : undefined;
      });
    });
    expect(result.json.code).toBe('KWP_ERR_STAGE_STATE_STALE');
    expect(result.json.message).toMatch(/stage np: module network-policy cannot hold the state \(\d+ pods, \d+ objects, [\d.]+ MiB delivered\) within its memory cap of 80 pages .*sandbox limit maxStageMemoryPages = 80/);
    expect(result.json.message).toContain('answering with the last state it held');
    const metrics = (await agent.request('GET', '/metrics')).text;
    expect(metrics).toMatch(/kwp_stage_state_stale\{stage="np",module="network-policy",reason="rejected"\} 1/);
    expect(metrics).toMatch(/kwp_stage_state_rejected\{stage="np",module="network-policy"\} [1-9]/);
    // The last state held still decides: isolate-x was not applied, and nothing became deny-all.
    expect(await basicVerdicts()).toEqual(BASIC);
    expect(agent.log).toMatch(/"stage":"np".*cannot hold the state/);
    expectBounded(agent, health);
  }, 150_000);

  it('once the state fits again, the stage follows it and /readyz is ready', async () => {
    const { health } = await agent.during(async () => {
      writeFileSync(join(manifests, '.filler.tmp'), JSON.stringify({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'isolate-x', namespace: 'x' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } }));
      renameSync(join(manifests, '.filler.tmp'), join(manifests, 'filler.yaml'));
      // Ready, and deciding with isolate-x (x/a -> x/b denied): /readyz turns 200 when the stage holds the state, which a poll of /readyz alone might see before the verdicts do on a loaded node.
      await until('the stage ready again and following the state', async () => {
        if ((await agent.request('GET', '/readyz')).status !== 200) return undefined;
        const verdicts = await basicVerdicts();
        return verdicts.join() === 'allow,deny,deny' ? verdicts : undefined;
      });
    });
    expect((await agent.request('GET', '/readyz')).status).toBe(200);
    expect(await basicVerdicts()).toEqual(['allow', 'deny', 'deny']);
    expectBounded(agent, health);
  }, 150_000);
});
