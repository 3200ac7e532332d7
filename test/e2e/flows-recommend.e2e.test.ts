// The loop issue 19 asks for, on real TCP and UDP through NFQUEUE: a running
// `kwp agent` records the connections pods make, `kwp flows -o json` reads
// the records back from its admin API, `kwp recommend` writes the policies
// for exactly that traffic, the policies go into the agent's watched
// manifests, and then the recorded connections still connect while the ones
// never observed between the same pods are dropped.
//
// The agent queues (and so decides and records) only traffic of pods some
// stage selects, so the learning phase runs under an allow-all NetworkPolicy
// over both namespaces (as Kubewarden's learn phase comes before protect);
// the recommendation then replaces it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../host/contract.js';
import { Lab, sweepStaleLabs, type LabFlow } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { inNetns } from '../lab/netns.js';
import { commandTable } from '../../host/cli/main.js';
import { applyPolicies, replaceYaml, sleep } from './agent-lab.js';

const ROOT = join(import.meta.dirname, '..', '..');
const KWP = join(ROOT, 'bin', 'kwp.js');
/** The admin API inside the lab's node namespace: no other listener shares that loopback. */
const ADMIN = '127.0.0.1:19744';

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;
let policyFile: string;

/** Learning: every pod selected (so queued and recorded), every connection allowed. */
const LEARN: KubeObject[] = ['x', 'y'].map((namespace) => ({
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'learn-allow-all', namespace },
  spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] },
}));

const tcp = (src: string, dst: string, port: number): LabFlow => ({ src, dst, protocol: 'TCP', port });
const udp = (src: string, dst: string, port: number): LabFlow => ({ src, dst, protocol: 'UDP', port });
const show = (f: LabFlow) => `${f.src} -> ${f.dst} ${f.protocol}/${f.port}`;

/** The traffic the workloads really have: what the recommendation must keep. */
const OBSERVED = [tcp('y/client', 'x/web', 80), tcp('x/web', 'x/db', 5432), udp('y/client', 'x/db', 5353)];
/** Connections between the same pods nobody made while recording: allowed before, dropped after. */
const UNOBSERVED = [tcp('y/other', 'x/web', 80), tcp('y/client', 'x/web', 8080), tcp('y/client', 'x/db', 5432), tcp('x/db', 'x/web', 80), udp('y/other', 'x/db', 5353)];

async function probe(f: LabFlow): Promise<boolean> {
  return (f.protocol === 'TCP' ? await lab.tcp(f.src, f.dst, f.port) : await lab.udp(f.src, f.dst, f.port)).ok;
}

function kwp(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [KWP, ...args], { cwd: ROOT }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
  });
}

/** `kwp flows -o json` run where the agent's admin API is: in the node namespace. */
async function flowsJson(): Promise<string> {
  const r = await lab.execInNode(process.execPath, [KWP, 'flows', '-o', 'json', '--server', `http://${ADMIN}`, '--token-file', join(dir, 'token')]);
  return r.stdout;
}

/**
 * The recorder and `kwp flows` are built beside this suite (issue 19, "flows");
 * until they are in the tree there is nothing to record with.
 */
const recorderMissing = !('flows' in commandTable());
const SKIP_REASON = recorderMissing ? ' [skipped: kwp flows and the flow recorder are not in this tree yet]' : '';

beforeAll(async () => {
  if (recorderMissing) return;
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'web', namespace: 'x', labels: { app: 'web', 'pod-template-hash': '6b9f7c' }, tcpPorts: [80, 8080] },
      { name: 'db', namespace: 'x', labels: { app: 'db' }, tcpPorts: [80, 5432] },
      { name: 'client', namespace: 'y', labels: { app: 'client' } },
      { name: 'other', namespace: 'y', labels: { app: 'other' } },
    ],
  });
  dir = mkdtempSync(join(tmpdir(), 'kwp-flows-recommend-'));
  writeFileSync(join(dir, 'token'), `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  await lab.writeManifests(join(dir, 'manifests'));
  // The policies the agent enforces live apart from the cluster's objects, which kwp recommend reads.
  mkdirSync(join(dir, 'policies'));
  policyFile = join(dir, 'policies', 'policies.yaml');
  await replaceYaml(policyFile, []);
  agent = await startKwpAgent(lab, { manifests: [join(dir, 'manifests'), join(dir, 'policies')], args: [`--admin-address=${ADMIN}`, `--admin-token-file=${join(dir, 'token')}`, '--flow-interval=1'] });
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(recorderMissing)(`recorded flows through a running agent become the policies that allow exactly them${SKIP_REASON}`, () => {
  it('records real connections, recommends from kwp flows, and after applying keeps them while dropping the rest', async () => {
    // No policy yet: everything connects, observed or not, and nothing is queued, so nothing is recorded.
    for (const f of [...OBSERVED, ...UNOBSERVED]) expect(`${show(f)} ${await probe(f)}`).toBe(`${show(f)} true`);

    // Learning: under the allow-all policy every connection is decided and recorded; only the observed traffic happens.
    await applyPolicies(agent!, policyFile, LEARN);
    for (let round = 0; round < 3; round++) for (const f of OBSERVED) expect(await probe(f)).toBe(true);

    // Read back until every observed flow has its record (an interval is 1 s; records are emitted when it closes).
    let records: Array<Record<string, unknown>> = [];
    const deadline = Date.now() + 30_000;
    const key = (r: Record<string, unknown>) => `${r.src} -> ${r.dst} ${r.protocol}/${r.port}`;
    for (;;) {
      records = (await flowsJson()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
      if (OBSERVED.every((f) => records.some((r) => key(r) === show(f)))) break;
      if (Date.now() > deadline) throw new Error(`kwp flows has no record of ${OBSERVED.filter((f) => !records.some((r) => key(r) === show(f))).map(show).join(', ')}; it printed:\n${records.map((r) => JSON.stringify(r)).join('\n')}`);
      await sleep(500);
    }
    // Exactly the traffic made: the recommendation is learnt from it alone.
    expect([...new Set(records.map(key))].sort()).toEqual(OBSERVED.map(show).sort());
    for (const f of OBSERVED) {
      const r = records.find((rec) => key(rec) === show(f))!;
      expect(r).toMatchObject({ verdict: 'allow', node: lab.nodeName });
      expect(Number(r.count)).toBeGreaterThanOrEqual(1);
    }
    const observedFile = join(dir, 'observed.jsonl');
    writeFileSync(observedFile, records.map((r) => JSON.stringify(r)).join('\n') + '\n');

    // Recommend from what kwp flows printed, against the same manifests the agent reads.
    const rec = await kwp(['recommend', '--manifests', join(dir, 'manifests'), '--flows', observedFile]);
    expect(rec.stderr).toContain('# checked: every recorded flow is allowed with the recommendation');
    expect(rec.code).toBe(0);
    const policies = parseAllDocuments(rec.stdout).map((d) => d.toJSON() as KubeObject);
    expect(policies.map((p) => `${p.kind} ${p.metadata.namespace}/${p.metadata.name}`).sort()).toEqual(['NetworkPolicy x/db-observed', 'NetworkPolicy x/web-observed']);
    expect(policies.find((p) => p.metadata.name === 'web-observed')!.spec.podSelector).toEqual({ matchLabels: { app: 'web' } });

    // Apply: the recommendation replaces the learning policy in the agent's watched manifests; wait for its reload.
    await applyPolicies(agent!, policyFile, policies);

    for (const f of OBSERVED) expect(`${show(f)} ${await probe(f)}`).toBe(`${show(f)} true`);
    for (const f of UNOBSERVED) expect(`${show(f)} ${await probe(f)}`).toBe(`${show(f)} false`);

    // What would the NetworkPolicy stage in audit mode let through? The dry run decides the node's recorded flows
    // (the drops just made among them, once their interval closed) with that pipeline, and applies nothing.
    const denied = UNOBSERVED.filter((f) => f.protocol === 'TCP');
    const until = Date.now() + 30_000;
    for (;;) {
      const now = (await flowsJson()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
      if (denied.every((f) => now.some((r) => key(r) === show(f) && r.verdict === 'deny'))) break;
      if (Date.now() > until) throw new Error(`kwp flows has no deny record of every probe just dropped; it printed:\n${now.map((r) => JSON.stringify(r)).join('\n')}`);
      await sleep(500);
    }
    const dry = await inNetns(lab.nodeNetns, process.execPath, [KWP, 'pipeline', 'set', '--dry-run', join(ROOT, 'examples', 'flows', 'np-audit.yaml'), '--server', `http://${ADMIN}`, '--token-file', join(dir, 'token')]);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(1);
    for (const f of denied) expect(dry.stdout).toContain(`${show(f)}  DENY -> ALLOW`);
    for (const f of OBSERVED) expect(dry.stdout).not.toContain(`${show(f)}  `);
    const history = await inNetns(lab.nodeNetns, process.execPath, [KWP, 'pipeline', 'history', '-o', 'json', '--server', `http://${ADMIN}`, '--token-file', join(dir, 'token')]);
    expect(JSON.parse(history.stdout).map((h: { action: string }) => h.action)).toEqual(['startup']);
  }, 180_000);
});
