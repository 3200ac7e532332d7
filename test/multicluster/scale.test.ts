// How the tracker and the agent-side source cope with a cluster of a few
// thousand pods: time to publish them all, time for an agent to hold them all,
// and the latency of one change end to end. Bounds are generous (a loaded
// 2-core machine); the numbers are printed for the record.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kinds } from '../../host/contract.js';
import { pollUntil } from '../apiserver/poll.js';
import { namespace, pod, startClusterSet, type ClusterSet } from './cluster-set.js';

const PODS = 3000;
const ipOf = (i: number) => `10.3.${Math.floor(i / 250)}.${(i % 250) + 1}`;

describe('multicluster at a few thousand pods', () => {
  let set: ClusterSet;
  beforeAll(async () => {
    set = await startClusterSet();
    for (const ns of ['frontend', 'backend', 'batch']) set.b.create(namespace(ns, { tier: ns }));
    for (let i = 0; i < PODS; i++) set.b.create(pod(['frontend', 'backend', 'batch'][i % 3], `p${i}`, ipOf(i), { app: `a${i % 50}` }));
    await set.writeKubeconfig('b');
  }, 120_000);
  afterAll(async () => {
    await set?.stop();
  });

  it(`publishes ${PODS} pods, delivers them to an agent, and carries one change across in well under a second`, async () => {
    const started = Date.now();
    const tracker = await set.tracker({ leaseTtlSeconds: 15, resyncMs: 5000 });
    await pollUntil(async () => (await set.records()).size === PODS, `${PODS} records`, 60_000, 200);
    const published = Date.now() - started;

    const listStart = Date.now();
    const { state } = await set.agentA();
    await pollUntil(() => [...state.pods()].length === PODS, `${PODS} remote pods in the agent`, 30_000, 20);
    const listed = Date.now() - listStart;

    const changeStart = Date.now();
    const obj = set.b.get(Kinds.Pod, 'p7', 'backend')!;
    set.b.update({ ...obj, metadata: { ...obj.metadata, labels: { app: 'changed' } } });
    await pollUntil(() => state.podByIP(ipOf(7))?.podLabels.app === 'changed', 'the relabelled pod in the agent', 10_000, 5);
    const changed = Date.now() - changeStart;

    console.log(`multicluster scale: ${PODS} pods published in ${published} ms, listed by an agent in ${listed} ms, one label change across in ${changed} ms (passes: ${tracker.status().passes})`);
    expect(published).toBeLessThan(60_000);
    expect(listed).toBeLessThan(30_000);
    expect(changed).toBeLessThan(5_000);
  });
});
