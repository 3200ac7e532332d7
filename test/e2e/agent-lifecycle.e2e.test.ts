import { afterAll, beforeAll, afterEach, describe, it, expect } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../../host/contract.js';
import { Lab, sweepStaleLabs, type HeldConnection } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { firstProbe, measureAgainst, mismatches, predict, replaceYaml, sleep, REFRESH_SETTLE_MS } from './agent-lab.js';

// `kwp agent` itself (not the standalone dataplane) through a policy edit under
// traffic, a SIGKILL with --fail-open true and false, and a restart, in a lab
// of four pods. The dataplane suite proves these for the dataplane alone.

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;
let policyFile: string;
const held: HeldConnection[] = [];

/** Pods of namespace y take connections from namespace z only. */
const yFromZ: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'y-from-z-only', namespace: 'y' },
  spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'z' } } }] }] },
};

/** x/b takes connections from namespace y only. */
const bFromY: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'b-from-y-only', namespace: 'x' },
  spec: {
    podSelector: { matchLabels: { app: 'b' } },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'y' } } }] }],
  },
};

async function startAgent(policies: KubeObject[], args: string[] = []): Promise<KwpAgentHandle> {
  await replaceYaml(policyFile, policies);
  agent = await startKwpAgent(lab, { manifests: [dir], args });
  console.log(`kwp agent ${args.join(' ') || '(default flags)'} running, dataplane queue mode: ${agent.queueMode}`);
  return agent;
}

/** Nice value of each thread of a process, by thread id (field 19 of /proc/PID/task/TID/stat). */
function threadNice(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // Fields after the parenthesised command name start at field 3.
    out.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
  }
  return out;
}

async function hold(from: string, to: string, port: number): Promise<HeldConnection> {
  const conn = await lab.hold(from, to, port);
  held.push(conn);
  return conn;
}

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'a', namespace: 'x', labels: { app: 'a' } },
      // Port 81 for a tuple no agent decided before a crash (see the fail-closed test).
      { name: 'b', namespace: 'x', labels: { app: 'b' }, tcpPorts: [80, 81] },
      { name: 'c', namespace: 'y', labels: { app: 'c' } },
      { name: 'd', namespace: 'z', labels: { app: 'd' } },
    ],
  });
  dir = mkdtempSync(join(tmpdir(), 'kwp-agent-lifecycle-'));
  policyFile = join(dir, 'policies.yaml');
  await lab.writeManifests(dir);
});

afterEach(async () => {
  for (const conn of held.splice(0)) await conn.close();
});

afterAll(async () => {
  await agent?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kwp agent on real traffic through edits, crashes and restarts', () => {
  it('turns a policy edit into the observed verdict within one second, cutting an established connection too (strict mode)', async () => {
    await startAgent([]);
    const established = await hold('x/a', 'y/c', 80);
    expect((await established.send()).ok).toBe(true);
    expect((await lab.tcp('x/a', 'y/c', 80)).ok).toBe(true);

    const reloaded = agent!.nextLog('manifests reloaded', 10_000);
    const editedAt = performance.now();
    await replaceYaml(policyFile, [yFromZ]);
    const [newConnections, establishedCut] = await Promise.all([
      firstProbe(editedAt, 3000, () => lab.tcp('x/a', 'y/c', 80, 300), false),
      firstProbe(editedAt, 3000, () => established.send(300), false),
    ]);
    await reloaded;
    console.log(`deny edit: new connections denied from ${newConnections.at} ms (${newConnections.probes} probes), the established one cut from ${establishedCut.at} ms (${establishedCut.probes} probes) [queue mode ${agent!.queueMode}]`);
    expect(newConnections.at).toBeDefined();
    expect(newConnections.at!).toBeLessThanOrEqual(1000);
    expect(establishedCut.at).toBeDefined();
    expect(establishedCut.at!).toBeLessThanOrEqual(1000);
    // It stays that way, and only for what the policy denies.
    expect((await lab.tcp('x/a', 'y/c', 80, 700)).ok).toBe(false);
    expect((await lab.udp('x/a', 'y/c', 5353, 700)).ok).toBe(false);
    expect((await lab.tcp('z/d', 'y/c', 80)).ok).toBe(true);

    const allowedAgainAt = performance.now();
    const reloadedAgain = agent!.nextLog('manifests reloaded', 10_000);
    await replaceYaml(policyFile, []);
    const reopened = await firstProbe(allowedAgainAt, 3000, () => lab.tcp('x/a', 'y/c', 80, 300), true);
    await reloadedAgain;
    console.log(`allow edit: new connections allowed from ${reopened.at} ms (${reopened.probes} probes)`);
    expect(reopened.at).toBeDefined();
    expect(reopened.at!).toBeLessThanOrEqual(1000);
  });

  it('lets new connections through, denied ones too, once the agent is SIGKILLed with --fail-open=true', async () => {
    await agent?.stop();
    await startAgent([bFromY], ['--fail-open=true']);
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('y/c', 'x/b', 80)).ok).toBe(true);
    const established = await hold('y/c', 'x/b', 80);

    await agent!.process.kill('SIGKILL');
    // The rules stay behind and still queue; nobody listens, so the kernel bypasses the queue.
    expect((await lab.execInNode('iptables-save', ['-t', 'mangle'])).stdout).toContain('NFQUEUE');
    // Tuples the agent never decided: x/a's was, and with the kernel fast path its deny entry
    // keeps deciding in the kernel until it times out (docs/dataplane.md, "The kernel fast path").
    expect((await lab.tcp('z/d', 'x/b', 80)).ok).toBe(true);
    expect((await lab.udp('z/d', 'x/b', 5353)).ok).toBe(true);
    expect((await lab.tcp('y/c', 'x/b', 80)).ok).toBe(true);
    expect((await established.send()).ok).toBe(true);
  });

  it('stops new connections once the agent is SIGKILLed with --fail-open=false, while accepted ones carry on', async () => {
    // Also a start over the rules the previous test's killed agent left behind.
    await startAgent([bFromY], ['--fail-open=false']);
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('y/c', 'x/b', 80)).ok).toBe(true);
    const established = await hold('y/c', 'x/b', 80);

    await agent!.process.kill('SIGKILL');
    // A tuple the agent never decided: y/c's port 80 was, and with the kernel fast path an accept
    // entry for it, if its fill landed before the kill, keeps deciding until it times out (docs/dataplane.md).
    expect((await lab.tcp('y/c', 'x/b', 81, 1000)).ok).toBe(false);
    expect((await lab.udp('y/c', 'x/b', 5353, 1000)).ok).toBe(false);
    expect((await lab.tcp('x/a', 'x/b', 80, 1000)).ok).toBe(false);
    // Marked accepted in conntrack before the crash: its packets never reach the queue.
    expect((await established.send()).ok).toBe(true);
  });

  it('resumes enforcing, as kwp eval predicts, when the agent is started again after the crash', async () => {
    await startAgent([bFromY], ['--fail-open=false']);
    await sleep(REFRESH_SETTLE_MS);
    const rows = await measureAgainst(lab, `after the restart [queue mode ${agent!.queueMode}]`, await predict(lab, [...lab.manifests(), bFromY]));
    expect(rows.find((r) => r.src === 'x/a' && r.dst === 'x/b' && r.protocol === 'TCP')?.predicted).toBe('deny');
    expect(rows.find((r) => r.src === 'y/c' && r.dst === 'x/b' && r.protocol === 'TCP')?.predicted).toBe('allow');
    expect(mismatches(rows)).toEqual([]);
    // Three starts, two of them over a killed agent's rules: still one jump into the agent's chain.
    const postrouting = (await lab.execInNode('iptables', ['-t', 'mangle', '-S', 'POSTROUTING'])).stdout;
    expect(postrouting.split('\n').filter((line) => line.includes('-j KUBE-WASM-POLICIES'))).toHaveLength(1);
  });

  it('raises the packet thread to the --packet-thread-nice it was given, not the whole process, and still enforces', async () => {
    await agent?.stop();
    await startAgent([bFromY], ['--packet-thread-nice=-10']);
    const pid = agent!.process.child.pid!;
    const nice = threadNice(pid);
    console.log(`agent thread nice values: ${[...nice].map(([tid, n]) => `${tid === pid ? 'main' : tid}=${n}`).join(' ')}`);
    // ip netns exec replaces itself with node, so the child's pid is the agent's main (JS) thread.
    expect(nice.get(pid)).toBe(-10);
    expect([...nice].filter(([tid]) => tid !== pid).map(([, n]) => n)).toContain(0);
    const running = agent!.process.errorLines.find((line) => line.includes('"msg":"dataplane running'));
    expect(JSON.parse(running!).packetThreadNice).toBe(-10);
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('y/c', 'x/b', 80)).ok).toBe(true);
  });
});
