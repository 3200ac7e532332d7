import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Protocol, type Packet } from '../../host/contract.js';
import { Agent } from '../../host/agent.js';
import { createLogger } from '../../host/log.js';
import { parseIP } from '../../host/net/ip.js';
import { defaultPipeline } from '../../host/pipeline/spec.js';
import { nodeScriptArgs } from '../lab/node-script.js';
import { kubeSystemUid } from '../../host/multicluster/cluster-id.js';
import { multiclusterPipeline, multiclusterSource } from '../../host/multicluster/agent-wiring.js';
import { loadKubeConfig } from '../../host/sources/kubernetes.js';
import { pollUntil } from '../apiserver/poll.js';
import { Kinds } from '../../host/contract.js';
import { namespace, pod, startClusterSet, type ClusterSet } from './cluster-set.js';

function tcp(src: string, dst: string, port = 80): Packet {
  return { family: 4, protocol: Protocol.TCP, src: parseIP(src)!.bytes, dst: parseIP(dst)!.bytes, srcPort: 40000, dstPort: port, icmpType: 0, icmpCode: 0 };
}

const quiet = () => createLogger(0, new Writable({ write(_c, _e, cb) { cb(); } }));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('the agent in multicluster mode', () => {
  let set: ClusterSet;
  let agent: Agent | undefined;
  let child: ChildProcess | undefined;
  let stateDir: string | undefined;
  beforeEach(async () => {
    set = await startClusterSet();
    set.a.create(namespace('backend'));
    set.a.create(pod('backend', 'db', '10.1.0.7', { app: 'db' }));
    set.b.create(namespace('frontend'));
    set.b.create(pod('frontend', 'web', '10.2.0.5', { app: 'web' }));
    set.a.create({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'from-frontend', namespace: 'backend' },
      spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } }] }] },
    });
    await set.writeKubeconfig('a');
    await set.writeKubeconfig('b');
  });
  afterEach(async () => {
    await agent?.stop();
    agent = undefined;
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      child.kill('SIGKILL');
    }
    child = undefined;
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
    await set.stop();
  });

  it('runs the multicluster NetworkPolicy stage over the IP-tracker source and admits a cluster B pod the policy selects', async () => {
    await set.tracker();
    // The agent's own multicluster wiring: the IP-tracker source and the default pipeline made multicluster.
    agent = new Agent({ kubeconfig: set.fileOf('a'), dataplane: false, logger: quiet(), multicluster: { ipTrackerEtcd: [set.etcd.url], clusterId: 'a' } });
    await agent.start();
    expect(agent.sources.map((s) => s.name)).toContain('ip-tracker');
    expect(agent.engine.active.spec.stages.find((s) => s.name === 'np')).toMatchObject({ module: 'multicluster-network-policy', config: { clusterId: 'a' } });
    // Both pods and the policy: without the policy every flow is allowed, the second expectation's deny included.
    await pollUntil(() => agent!.state.podByIP('10.2.0.5') && agent!.state.podByIP('10.1.0.7') && agent!.state.object(Kinds.NetworkPolicy, 'backend/from-frontend'),
      'both pods and the NetworkPolicy backend/from-frontend in the agent', 15_000);
    expect(agent.state.podByIP('10.1.0.7')).toMatchObject({ clusterId: 'a', namespaceLabels: { 'cluster.clusterset.k8s.io': 'a' } });
    expect(agent.engine.evaluate(tcp('10.2.0.5', '10.1.0.7')).allowed).toBe(true);
    expect(agent.engine.evaluate(tcp('10.2.0.99', '10.1.0.7')).allowed).toBe(false);
  });

  it('is what `kwp agent --ip-tracker-etcd` runs: the admin API explains a cluster B pod as allowed by the multicluster stage', async () => {
    await set.tracker();
    const port = await freePort();
    stateDir = await mkdtemp(path.join(tmpdir(), 'kwp-mc-agent-'));
    child = spawn(process.execPath, [
      ...nodeScriptArgs(import.meta.url, './kwp-cli.js'), 'agent',
      `--kubeconfig=${set.fileOf('a')}`, `--ip-tracker-etcd=${set.etcd.url}`, '--ip-tracker-prefix=/kwp/ips/', '--cluster-id=a',
      '--dataplane=off', `--admin-address=127.0.0.1:${port}`, '--admin-reads-open', `--state-dir=${stateDir}`,
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => { stderr += d; });
    const base = `http://127.0.0.1:${port}`;
    const explain = async () => {
      try {
        const res = await fetch(`${base}/v1/explain`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ src: '10.2.0.5', dst: '10.1.0.7', port: 80 }) });
        return res.ok ? ((await res.json()) as { verdict: string; walkthrough: string }) : undefined;
      } catch {
        return undefined;
      }
    };
    // The default pipeline allows the flow before any policy arrives: wait for the allow that the policy gives.
    const answer = await pollUntil(async () => { const a = await explain(); return a?.verdict === 'allow' && a.walkthrough.includes('backend/from-frontend') ? a : undefined; }, `an allow by backend/from-frontend from the running agent (stderr so far: ${stderr.slice(-2000)})`, 60_000, 200).catch((err) => { throw new Error(`${err.message}\n${stderr.slice(-3000)}`); });
    expect(answer!.walkthrough).toContain('backend/from-frontend');
    const pipeline = (await (await fetch(`${base}/v1/pipeline`)).json()) as { spec?: { stages: { name: string; module: string }[] }; stages?: { name: string; module: string }[] };
    const stages = pipeline.spec?.stages ?? pipeline.stages ?? [];
    expect(stages.find((s) => s.name === 'np')?.module).toBe('multicluster-network-policy');
  });

  it('derives the cluster id from the kube-system namespace uid, as the tracker does', async () => {
    const created = set.a.create(namespace('kube-system'));
    expect(await kubeSystemUid(loadKubeConfig(set.fileOf('a')), 'test')).toBe(created.metadata.uid);
    await expect(kubeSystemUid(loadKubeConfig(set.fileOf('b')), 'test')).rejects.toThrow(/pass --cluster-id/);
    // An agent given no cluster id derives it the same way, and configures its multicluster stage with it.
    agent = new Agent({ kubeconfig: set.fileOf('a'), dataplane: false, logger: quiet(), multicluster: { ipTrackerEtcd: [set.etcd.url] } });
    await agent.start();
    expect(agent.engine.active.spec.stages.find((s) => s.name === 'np')).toMatchObject({ module: 'multicluster-network-policy', config: { clusterId: created.metadata.uid } });
  });

  it('keeps extra sources and a given pipeline: an embedder can assemble multicluster mode itself', async () => {
    await set.tracker();
    const mc = { ipTrackerEtcd: [set.etcd.url], clusterId: 'a' };
    agent = new Agent({ kubeconfig: set.fileOf('a'), dataplane: false, logger: quiet(), extraSources: [multiclusterSource(mc)] });
    await agent.start(multiclusterPipeline(defaultPipeline(), mc, true));
    await pollUntil(() => agent!.state.podByIP('10.2.0.5') && agent!.state.podByIP('10.1.0.7') && agent!.state.object(Kinds.NetworkPolicy, 'backend/from-frontend'),
      'both pods and the NetworkPolicy backend/from-frontend in the agent', 15_000);
    expect(agent.engine.evaluate(tcp('10.2.0.5', '10.1.0.7')).allowed).toBe(true);
    expect(agent.engine.evaluate(tcp('10.2.0.99', '10.1.0.7')).allowed).toBe(false);
  });
});
