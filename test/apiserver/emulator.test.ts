import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { Kinds } from '../../host/contract.js';
import { ApiServerEmulator, customResource, type ApiServerEmulatorOptions } from './emulator.js';
import { adminNetworkPolicy, namespace, networkPolicy, node, pod } from './fixtures.js';
import { kubeconfigYaml, writeKubeconfig } from './kubeconfig.js';
import { pollUntil } from './poll.js';

const emulators: ApiServerEmulator[] = [];
afterEach(async () => {
  while (emulators.length) await emulators.pop()!.stop();
});

async function start(opts: ApiServerEmulatorOptions = {}) {
  const e = await ApiServerEmulator.start(opts);
  emulators.push(e);
  return e;
}

async function get(e: ApiServerEmulator, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(e.url + path, { headers });
  return { status: res.status, body: await res.json() };
}

/** Opens a watch and collects its events until the stream ends or `count` arrived. */
function watch(e: ApiServerEmulator, path: string): { events: any[]; status: Promise<number>; ended: Promise<void>; close(): void } {
  const events: any[] = [];
  let close = () => {};
  let setStatus: (n: number) => void = () => {};
  const status = new Promise<number>((r) => (setStatus = r));
  const ended = new Promise<void>((resolve) => {
    const req = http.get(e.url + path, (res) => {
      setStatus(res.statusCode ?? 0);
      let buf = '';
      res.on('data', (chunk) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          events.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
      });
      res.on('end', () => {
        if (buf.trim()) events.push(JSON.parse(buf));
      });
      res.on('close', () => resolve());
      res.on('error', () => resolve());
    });
    req.on('error', () => resolve());
    close = () => req.destroy();
  });
  return { events, status, ended, close };
}

describe('ApiServerEmulator lists', () => {
  it('lists a kind cluster-wide with a resourceVersion and items without apiVersion/kind', async () => {
    const e = await start();
    e.create(pod('a', 'p1'));
    e.create(pod('b', 'p2'));
    const { status, body } = await get(e, '/api/v1/pods');
    expect(status).toBe(200);
    expect(body).toMatchObject({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: e.resourceVersion } });
    expect(body.items.map((i: any) => i.metadata.name).sort()).toEqual(['p1', 'p2']);
    expect(body.items[0].apiVersion).toBeUndefined();
    expect(body.items[0].metadata.managedFields).toHaveLength(1);
  });

  it('lists one namespace on the namespaced path, and gets single objects', async () => {
    const e = await start();
    e.create(networkPolicy('a', 'np1'));
    e.create(networkPolicy('b', 'np2'));
    e.create(namespace('a'));
    const { body } = await get(e, '/apis/networking.k8s.io/v1/namespaces/b/networkpolicies');
    expect(body.items.map((i: any) => i.metadata.name)).toEqual(['np2']);
    expect((await get(e, '/apis/networking.k8s.io/v1/namespaces/a/networkpolicies/np1')).body.metadata.name).toBe('np1');
    expect((await get(e, '/api/v1/namespaces/a')).body.kind).toBe('Namespace');
    expect((await get(e, '/api/v1/namespaces/a/pods/missing')).status).toBe(404);
  });

  it('answers 404 with a Status for a CRD that is not installed, and serves it once installed', async () => {
    const e = await start({ notInstalled: [Kinds.AdminNetworkPolicy] });
    const missing = await get(e, '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ kind: 'Status', code: 404, reason: 'NotFound' });
    expect(() => e.create(adminNetworkPolicy('x'))).toThrow(/installCrd/);
    e.installCrd(Kinds.AdminNetworkPolicy);
    e.create(adminNetworkPolicy('x'));
    expect((await get(e, '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies')).body.items).toHaveLength(1);
  });

  it('serves discovery for installed groups and resources only', async () => {
    const e = await start({ notInstalled: [Kinds.ClusterNetworkPolicy], resources: undefined });
    expect((await get(e, '/api')).body.versions).toEqual(['v1']);
    const groups = (await get(e, '/apis')).body.groups;
    const policy = groups.find((g: any) => g.name === 'policy.networking.k8s.io');
    expect(policy.versions.map((v: any) => v.version)).toEqual(['v1alpha1']);
    const core = (await get(e, '/api/v1')).body;
    expect(core.resources.find((r: any) => r.kind === 'Pod')).toMatchObject({ name: 'pods', namespaced: true });
    expect(core.resources.find((r: any) => r.kind === 'Node')).toMatchObject({ name: 'nodes', namespaced: false });
    expect((await get(e, '/apis/policy.networking.k8s.io/v1alpha2')).status).toBe(404);
  });

  it('requires the bearer token when one is configured', async () => {
    const e = await start({ token: 't0k' });
    expect((await get(e, '/api/v1/pods')).status).toBe(401);
    expect((await get(e, '/api/v1/pods', { Authorization: 'Bearer t0k' })).status).toBe(200);
  });

  it('fails exactly the injected number of matching requests', async () => {
    const e = await start();
    e.failRequests({ status: 503, times: 2, match: (r) => r.path.endsWith('/nodes') });
    expect((await get(e, '/api/v1/nodes')).status).toBe(503);
    expect((await get(e, '/api/v1/pods')).status).toBe(200);
    expect((await get(e, '/api/v1/nodes')).status).toBe(503);
    expect((await get(e, '/api/v1/nodes')).status).toBe(200);
  });
});

describe('ApiServerEmulator watches', () => {
  it('streams ADDED, MODIFIED and DELETED events with full objects', async () => {
    const e = await start();
    const from = e.resourceVersion;
    const w = watch(e, `/api/v1/nodes?watch=true&resourceVersion=${from}`);
    expect(await w.status).toBe(200);
    await pollUntil(() => e.openWatchCount(Kinds.Node) === 1, 'the watch to register');
    e.create(node('n1'));
    e.update(node('n1', { zone: 'b' }));
    e.remove(Kinds.Node, 'n1');
    await pollUntil(() => w.events.length === 3, 'three events');
    expect(w.events.map((ev) => ev.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    expect(w.events[1].object).toMatchObject({ apiVersion: 'v1', kind: 'Node', metadata: { labels: { zone: 'b' } } });
    const rvs = w.events.map((ev) => Number(ev.object.metadata.resourceVersion));
    expect(rvs).toEqual([...rvs].sort((a, b) => a - b));
    w.close();
  });

  it('replays history after the requested resourceVersion, and everything when none is given', async () => {
    const e = await start();
    e.create(pod('a', 'p1'));
    const mid = e.resourceVersion;
    e.create(pod('a', 'p2'));
    e.create(pod('b', 'p3'));
    const since = watch(e, `/api/v1/pods?watch=true&resourceVersion=${mid}`);
    const all = watch(e, '/api/v1/namespaces/a/pods?watch=true');
    await pollUntil(() => since.events.length === 2 && all.events.length === 2, 'the replays');
    expect(since.events.map((ev) => ev.object.metadata.name)).toEqual(['p2', 'p3']);
    expect(all.events.map((ev) => ev.object.metadata.name).sort()).toEqual(['p1', 'p2']);
    since.close();
    all.close();
  });

  it.each([
    ['error-event', 200],
    ['http-status', 410],
  ] as const)('answers a watch from before a compaction with 410 Expired (%s)', async (expiredWatch, httpStatus) => {
    const e = await start({ expiredWatch });
    const old = e.resourceVersion;
    e.create(pod('a', 'p1'));
    e.compact();
    const w = watch(e, `/api/v1/pods?watch=true&resourceVersion=${old}`);
    expect(await w.status).toBe(httpStatus);
    await w.ended;
    const status = expiredWatch === 'error-event' ? w.events[0]?.object : w.events[0];
    expect(status).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
    if (expiredWatch === 'error-event') expect(w.events[0].type).toBe('ERROR');
    // A watch from the current resourceVersion still works.
    const fresh = watch(e, `/api/v1/pods?watch=true&resourceVersion=${e.resourceVersion}`);
    expect(await fresh.status).toBe(200);
    fresh.close();
  });

  it('sends bookmarks only to watches that asked for them', async () => {
    const e = await start();
    const with_ = watch(e, '/api/v1/pods?watch=true&allowWatchBookmarks=true');
    const without = watch(e, '/api/v1/pods?watch=true');
    await pollUntil(() => e.openWatchCount() === 2, 'two watches');
    e.bookmark();
    e.create(pod('a', 'p'));
    await pollUntil(() => with_.events.length === 2 && without.events.length === 1, 'the events');
    expect(with_.events[0]).toMatchObject({ type: 'BOOKMARK', object: { kind: 'Pod', metadata: { resourceVersion: expect.any(String) } } });
    with_.close();
    without.close();
  });

  it('ends watches after timeoutSeconds, and on closeWatches()', async () => {
    const e = await start();
    const timed = watch(e, '/api/v1/pods?watch=true&timeoutSeconds=1');
    const open = watch(e, '/api/v1/nodes?watch=true');
    await timed.ended;
    expect(e.openWatchCount(Kinds.Node)).toBe(1);
    expect(e.closeWatches()).toBe(1);
    await open.ended;
    expect(e.openWatchCount()).toBe(0);
  });
});

describe('ApiServerEmulator lifecycle', () => {
  it('refuses connections while down and keeps its store and port across a restart', async () => {
    const e = await start({ down: true });
    expect(e.port).toBeGreaterThan(0);
    await expect(fetch(e.url + '/api/v1/pods')).rejects.toThrow();
    await e.up();
    e.create(pod('a', 'p'));
    const port = e.port;
    const w = watch(e, '/api/v1/pods?watch=true');
    await pollUntil(() => e.openWatchCount() === 1, 'a watch');
    await e.restart();
    await w.ended;
    expect(e.port).toBe(port);
    expect((await get(e, '/api/v1/pods')).body.items).toHaveLength(1);
  });

  it('runs two instances side by side with separate stores', async () => {
    const [one, two] = await Promise.all([start(), start()]);
    one.create(namespace('only-in-one'));
    expect(one.port).not.toBe(two.port);
    expect((await get(one, '/api/v1/namespaces')).body.items).toHaveLength(1);
    expect((await get(two, '/api/v1/namespaces')).body.items).toHaveLength(0);
  });

  it('serves custom resources and removes their objects when the CRD is uninstalled', async () => {
    const e = await start({ resources: [customResource('example.com/v1/Widget', true)] });
    e.create({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'x' } });
    const w = watch(e, `/apis/example.com/v1/widgets?watch=true&resourceVersion=${e.resourceVersion}`);
    await pollUntil(() => e.openWatchCount() === 1, 'a watch');
    e.uninstallCrd('example.com/v1/Widget');
    await w.ended;
    expect(w.events.map((ev) => ev.type)).toEqual(['DELETED']);
    expect((await get(e, '/apis/example.com/v1/widgets')).status).toBe(404);
    expect(e.list('example.com/v1/Widget')).toEqual([]);
  });

  it('writes a kubeconfig that client-node loads and points at the emulator', async () => {
    const e = await start({ token: 'abc' });
    const file = await writeKubeconfig({ server: e.url, token: 'abc', name: 'one' });
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    expect(kc.getCurrentCluster()).toMatchObject({ server: e.url, skipTLSVerify: true, name: 'one' });
    expect(kc.getCurrentUser()?.token).toBe('abc');
    expect(kubeconfigYaml({ server: e.url })).toContain('current-context: kwp-emulator');
  });
});

describe('ApiServerEmulator paging and selectors', () => {
  it('pages a list with limit and continue, all pages from the first page’s snapshot', async () => {
    const e = await start();
    for (let i = 0; i < 5; i++) e.create(pod('a', `p${i}`));
    const first = (await get(e, '/api/v1/pods?limit=2')).body;
    expect(first.items).toHaveLength(2);
    expect(first.metadata.remainingItemCount).toBe(3);
    e.create(pod('a', 'late'));
    const second = (await get(e, `/api/v1/pods?limit=2&continue=${first.metadata.continue}`)).body;
    const third = (await get(e, `/api/v1/pods?limit=2&continue=${second.metadata.continue}`)).body;
    expect(third.metadata.continue).toBeUndefined();
    const names = [...first.items, ...second.items, ...third.items].map((i: any) => i.metadata.name);
    expect(names.sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    expect(new Set([first, second, third].map((p) => p.metadata.resourceVersion)).size).toBe(1);
  });

  it('answers 410 for a continue token from before a compaction', async () => {
    const e = await start();
    for (let i = 0; i < 3; i++) e.create(pod('a', `p${i}`));
    const first = (await get(e, '/api/v1/pods?limit=1')).body;
    e.compact();
    const next = await get(e, `/api/v1/pods?limit=1&continue=${first.metadata.continue}`);
    expect(next.status).toBe(410);
    expect(next.body).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
  });

  it.each([
    ['app=web', ['web-1', 'web-2']],
    ['app!=web', ['db']],
    ['app in (web,db),tier', ['web-2']],
    ['!tier', ['web-1', 'db']],
  ])('lists pods matching the label selector %s', async (selector, want) => {
    const e = await start();
    e.create(pod('a', 'web-1', { app: 'web' }));
    e.create(pod('a', 'web-2', { app: 'web', tier: 'front' }));
    e.create(pod('a', 'db', { app: 'db' }));
    const { body } = await get(e, `/api/v1/pods?labelSelector=${encodeURIComponent(selector)}`);
    expect(body.items.map((i: any) => i.metadata.name).sort()).toEqual([...want].sort());
  });

  it('lists by field selector and rejects selectors it does not understand', async () => {
    const e = await start();
    const onB = pod('a', 'on-b');
    onB.spec.nodeName = 'node-b';
    e.create(onB);
    e.create(pod('a', 'on-a'));
    const { body } = await get(e, '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-b');
    expect(body.items.map((i: any) => i.metadata.name)).toEqual(['on-b']);
    expect((await get(e, `/api/v1/pods?labelSelector=${encodeURIComponent('a > 1')}`)).status).toBe(400);
  });

  it('turns a relabel into ADDED or DELETED for a watch whose selector it enters or leaves', async () => {
    const e = await start();
    e.create(pod('a', 'p', { app: 'web' }));
    const w = watch(e, `/api/v1/pods?watch=true&resourceVersion=${e.resourceVersion}&labelSelector=app%3Dweb`);
    await pollUntil(() => e.openWatchCount() === 1, 'a watch');
    e.update(pod('a', 'p', { app: 'web', v: '2' }));
    e.update(pod('a', 'p', { app: 'db' }));
    e.update(pod('a', 'p', { app: 'web' }));
    e.remove(Kinds.Pod, 'p', 'a');
    await pollUntil(() => w.events.length === 4, 'four events');
    expect(w.events.map((ev) => ev.type)).toEqual(['MODIFIED', 'DELETED', 'ADDED', 'DELETED']);
    w.close();
  });
});
