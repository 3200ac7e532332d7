import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { Kinds } from '../../host/contract.js';
import { nodeScriptArgs } from '../lab/node-script.js';
import { pollUntil } from '../apiserver/poll.js';
import { namespace, node, pod, PREFIX, startClusterSet, type ClusterSet } from './cluster-set.js';

describe('kwp ip-tracker against two clusters and a real etcd', () => {
  let set: ClusterSet;
  beforeEach(async () => {
    set = await startClusterSet();
    set.b.create(namespace('frontend', { team: 'web' }));
    set.b.create(node('node-b1', { zone: 'b-1' }));
    set.b.create(pod('frontend', 'web', '10.2.0.5', { app: 'web' }, { node: 'node-b1' }));
    set.a.create(namespace('backend'));
    set.a.create(pod('backend', 'db', '10.1.0.7', { app: 'db' }));
    await set.writeKubeconfig('a');
    await set.writeKubeconfig('b');
  });
  afterEach(async () => {
    await set.stop();
  });

  it('publishes one record per pod IP with the pod, namespace and node labels and the cluster id', async () => {
    await set.tracker();
    const records = (await pollUntil(async (): Promise<Map<string, any> | null> => {
      const r = await set.records();
      return r.size === 2 ? r : null;
    }, "records of both clusters", 10_000))!;
    expect(records.get(`${PREFIX}10.2.0.5`)).toMatchObject({
      v: 1,
      clusterId: 'b',
      name: 'web',
      namespace: 'frontend',
      podLabels: { app: 'web' },
      namespaceLabels: { team: 'web', 'kubernetes.io/metadata.name': 'frontend' },
      nodeName: 'node-b1',
      nodeLabels: { zone: 'b-1' },
      containerPorts: [{ name: 'http', port: 80, protocol: 6 }],
      ips: ['10.2.0.5'],
    });
    expect(records.get(`${PREFIX}10.1.0.7`)).toMatchObject({ clusterId: 'a', name: 'db' });
  });

  it('leaves host-networked pods out and removes a record when its pod goes away', async () => {
    set.b.create(pod('frontend', 'node-agent', '192.168.0.2', {}, { hostNetwork: true }));
    await set.tracker();
    await pollUntil(async () => (await set.records()).has(`${PREFIX}10.2.0.5`), 'the web record', 10_000);
    expect((await set.records()).has(`${PREFIX}192.168.0.2`)).toBe(false);
    set.b.remove(Kinds.Pod, 'web', 'frontend');
    await pollUntil(async () => !(await set.records()).has(`${PREFIX}10.2.0.5`), 'the web record to go', 10_000);
    expect((await set.records()).has(`${PREFIX}10.1.0.7`)).toBe(true);
  });

  it('names a cluster by its kube-system namespace uid when no --cluster-id is given for its context', async () => {
    const kubeSystem = set.b.create(namespace('kube-system'));
    await set.tracker({ clusterIds: new Map([['cluster-a', 'a']]) });
    const record = await pollUntil(async () => (await set.records()).get(`${PREFIX}10.2.0.5`), 'the web record', 10_000);
    expect(record.clusterId).toBe(kubeSystem.metadata.uid);
    expect(record.clusterId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('picks up a kubeconfig added to the directory and drops the records of one removed from it', async () => {
    await set.removeKubeconfig('b');
    const tracker = await set.tracker();
    await pollUntil(async () => (await set.records()).has(`${PREFIX}10.1.0.7`), 'cluster A records', 10_000);
    expect((await set.records()).has(`${PREFIX}10.2.0.5`)).toBe(false);

    await set.writeKubeconfig('b');
    await pollUntil(async () => (await set.records()).has(`${PREFIX}10.2.0.5`), 'cluster B records after its kubeconfig appeared', 10_000);
    expect(tracker.status().clusters.map((c) => c.clusterId).sort()).toEqual(['a', 'b']);

    await set.removeKubeconfig('b');
    await pollUntil(async () => !(await set.records()).has(`${PREFIX}10.2.0.5`), 'cluster B records to be deleted', 10_000);
    expect((await set.records()).has(`${PREFIX}10.1.0.7`)).toBe(true);
  });

  it('lets two replicas publish the same keys, and the survivor keeps them when the other stops', async () => {
    const first = await set.tracker();
    const second = await set.tracker();
    await first.flushed();
    await second.flushed();
    const before = await set.records();
    expect([...before.keys()].sort()).toEqual([`${PREFIX}10.1.0.7`, `${PREFIX}10.2.0.5`]);
    await first.stop();
    // Past the stopped replica's lease TTL (3 s): whatever it wrote last has expired by now.
    const deadline = Date.now() + 4500;
    let missing = 0;
    while (Date.now() < deadline) {
      const now = await set.records();
      if (now.size !== 2) missing++;
      await new Promise((r) => setTimeout(r, 100));
    }
    await pollUntil(async () => JSON.stringify([...(await set.records())]) === JSON.stringify([...before]), 'the same records from the survivor', 5000, 50);
    // A key may blink while the survivor writes it back, never for long
    // (without the survivor it would stay missing for the last 1.5 s or more: 15 samples).
    expect(missing).toBeLessThanOrEqual(8);
  });

  it('skips a malformed kubeconfig and goes on with the other clusters', async () => {
    const { writeFile } = await import('node:fs/promises');
    await writeFile(`${set.dir}/broken`, 'clusters: [not, a, kubeconfig');
    const tracker = await set.tracker();
    await pollUntil(async () => (await set.records()).size === 2, 'both good clusters published', 10_000);
    expect(tracker.status().clusters.map((c) => c.context).sort()).toEqual(['cluster-a', 'cluster-b']);
  });

  it('keeps publishing the last known pods of a cluster whose API server went away', async () => {
    const tracker = await set.tracker();
    await tracker.flushed();
    await set.b.down();
    // Several lease TTLs (3 s) of passes while B is unreachable.
    await new Promise((r) => setTimeout(r, 3500));
    await tracker.flushed();
    expect((await set.records()).has(`${PREFIX}10.2.0.5`)).toBe(true);
    await set.b.up();
  });

  it('holds the same records after an etcd outage longer than the lease TTL, once the old lease has run out', async () => {
    const tracker = await set.tracker({ leaseTtlSeconds: 2 });
    await tracker.flushed();
    const before = await set.records();
    await set.etcd.pause();
    await new Promise((r) => setTimeout(r, 3000));
    await set.etcd.resume();
    await tracker.flushed(15_000);
    // Past the old lease's TTL after the restart: records survive only if they were moved to a live lease.
    await new Promise((r) => setTimeout(r, 3000));
    await pollUntil(async () => (await set.records()).size === before.size, 'the records after the outage', 10_000, 100);
    expect(await set.records()).toEqual(before);
  });

  it('runs as `kwp ip-tracker` and stops cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, [
      ...nodeScriptArgs(import.meta.url, './kwp-cli.js'), 'ip-tracker',
      '--kubeconfig-dir', set.dir, '--etcd', set.etcd.url, '--cluster-id', 'cluster-a=a', '--cluster-id', 'cluster-b=b', '--lease-ttl', '5',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => { stderr += d; });
    try {
      const records = await pollUntil(async () => { const r = await set.records(); return r.size === 2 ? r : null; }, 'records from the CLI', 30_000, 100)
        .catch((err) => { throw new Error(`${err.message}\n${stderr.slice(-3000)}`); });
      expect(records!.get(`${PREFIX}10.2.0.5`)).toMatchObject({ clusterId: 'b', name: 'web' });
    } finally {
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
    expect(stderr).toContain('ip tracker started');
  });

  it('deletes records of a dead tracker once its lease runs out', async () => {
    const tracker = await set.tracker();
    await tracker.flushed();
    expect((await set.records()).size).toBe(2);
    await tracker.stop();
    await pollUntil(async () => (await set.records()).size === 0, 'the records to expire with the lease', 10_000, 100);
  });
});
