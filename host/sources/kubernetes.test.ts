import { afterEach, describe, expect, it } from 'vitest';
import { Kinds, type KindKey, type KubeObject } from '../contract.js';
import { isKwpError } from '../errors.js';
import { ApiServerEmulator, customResource, defaultEmulatedResources, type ApiServerEmulatorOptions } from '../../test/apiserver/emulator.js';
import { oneOfEachKind, pod, namespace, node, adminNetworkPolicy } from '../../test/apiserver/fixtures.js';
import { ClusterState } from '../state/cluster-state.js';
import { writeKubeconfig } from '../../test/apiserver/kubeconfig.js';
import { testTls } from '../../test/apiserver/tls.js';
import { pollUntil } from '../../test/apiserver/poll.js';
import { RecordingSink } from '../../test/apiserver/recording-sink.js';
import { KubernetesSource, defaultWatchedKinds, loadKubeConfig, type KubernetesSourceOptions } from './kubernetes.js';
import { backoffDelay } from './kubernetes/backoff.js';
import type { HostLogger } from '../logger.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

interface LogLine {
  level: string;
  fields: object;
  msg?: string;
}

function recordingLogger(): HostLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: string) => (fields: object, msg?: string) => void lines.push({ level, fields, msg });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

async function setup(emuOpts: ApiServerEmulatorOptions = {}, srcOpts: Partial<KubernetesSourceOptions> = {}) {
  const emulator = await ApiServerEmulator.start(emuOpts);
  cleanups.push(() => emulator.stop());
  const kubeconfig = await writeKubeconfig({ server: emulator.url, token: emuOpts.token, ca: emuOpts.tls ? testTls().ca : undefined });
  const sink = new RecordingSink();
  const logger = recordingLogger();
  const source = new KubernetesSource({
    kubeconfig,
    logger,
    backoff: { initialMs: 20, maxMs: 200 },
    missingKindRecheckMs: 50,
    readinessGraceMs: 60_000,
    ...srcOpts,
  });
  cleanups.push(() => source.stop());
  return { emulator, sink, source, logger, kubeconfig };
}

/** The sink holds exactly what the emulator holds, field for field, minus managedFields. */
function expectSinkMatches(sink: RecordingSink, emulator: ApiServerEmulator, kind: KindKey) {
  const strip = (o: KubeObject) => {
    const { managedFields: _m, ...metadata } = o.metadata;
    return { ...o, metadata };
  };
  const key = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  const want = emulator.list(kind).map(strip).sort((a, b) => key(a).localeCompare(key(b)));
  const got = [...sink.objects(kind)].sort((a, b) => key(a).localeCompare(key(b)));
  expect(got).toEqual(want);
}

const sinkAgrees = (sink: RecordingSink, emulator: ApiServerEmulator, kind: KindKey) => () => {
  try {
    expectSinkMatches(sink, emulator, kind);
    return true;
  } catch {
    return false;
  }
};

const samples = Object.entries(oneOfEachKind());

describe('KubernetesSource initial sync', () => {
  it('lists every default kind once and becomes ready', async () => {
    const { emulator, sink, source } = await setup();
    for (const [, o] of samples) emulator.create(o);
    await source.start(sink);
    expect(await source.waitUntilReady(5000)).toBe(true);
    for (const kind of defaultWatchedKinds) {
      expect(sink.replaces(kind)).toHaveLength(1);
      expectSinkMatches(sink, emulator, kind);
    }
  });

  it.each(samples)('delivers a %s with apiVersion and kind set and managedFields removed', async (kind, sample) => {
    const { emulator, sink, source } = await setup();
    emulator.create(sample);
    expect(emulator.get(kind, sample.metadata.name, sample.metadata.namespace)?.metadata.managedFields).toBeDefined();
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    const [delivered] = sink.replaces(kind)[0];
    expect(delivered.apiVersion).toBe(sample.apiVersion);
    expect(delivered.kind).toBe(sample.kind);
    expect(delivered.metadata.managedFields).toBeUndefined();
    expect(delivered.metadata.resourceVersion).toBeDefined();
    expect(delivered.spec).toEqual(sample.spec);
  });

  it('is not ready before the first list, and an empty cluster syncs as empty kinds', async () => {
    const { sink, source } = await setup();
    expect(source.ready()).toBe(false);
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    for (const kind of defaultWatchedKinds) expect(sink.replaces(kind)).toEqual([[]]);
  });
});

describe('KubernetesSource watch events', () => {
  it.each(samples)('applies an add, an update and a delete of a %s as watch events', async (kind, sample) => {
    const { emulator, sink, source } = await setup();
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    await pollUntil(() => emulator.openWatchCount(kind) === 1, `a watch on ${kind}`);

    emulator.create(sample);
    await pollUntil(() => sink.objects(kind).length === 1, 'the added object');
    const changed = structuredClone(sample);
    changed.metadata.annotations = { touched: 'yes' };
    emulator.update(changed);
    await pollUntil(() => sink.objects(kind)[0]?.metadata.annotations?.touched === 'yes', 'the updated object');
    emulator.remove(kind, sample.metadata.name, sample.metadata.namespace);
    await pollUntil(() => sink.objects(kind).length === 0, 'the deletion');

    const events = sink.calls.filter((c) => c.op === 'apply' && c.kind === kind).map((c) => (c.op === 'apply' ? c.event.type : ''));
    expect(events).toEqual(['upsert', 'upsert', 'delete']);
    expect(sink.replaces(kind)).toHaveLength(1);
    const deleted = sink.calls.at(-1);
    expect(deleted?.op === 'apply' && deleted.event.object.metadata.managedFields).toBeUndefined();
  });

  it('follows label changes on pods and namespaces', async () => {
    const { emulator, sink, source } = await setup();
    emulator.create(namespace('shop', { team: 'a' }));
    emulator.create(pod('shop', 'cart', { app: 'cart', version: '1' }));
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    await pollUntil(() => emulator.openWatchCount() === defaultWatchedKinds.length, 'all watches');

    emulator.update(pod('shop', 'cart', { app: 'cart', version: '2' }));
    emulator.update(namespace('shop', { team: 'b' }));
    await pollUntil(() => sink.get(Kinds.Pod, 'cart', 'shop')?.metadata.labels?.version === '2', 'the pod label');
    await pollUntil(() => sink.get(Kinds.Namespace, 'shop')?.metadata.labels?.team === 'b', 'the namespace label');
    expect(sink.get(Kinds.Pod, 'cart', 'shop')?.metadata.labels).toEqual({ app: 'cart', version: '2' });
  });

  it('resumes from its resourceVersion when a watch is closed mid-stream, without relisting', async () => {
    for (const abrupt of [false, true]) {
      const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod] });
      await source.start(sink);
      await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a pod watch');
      emulator.create(pod('default', 'a'));
      await pollUntil(() => sink.names(Kinds.Pod).length === 1, 'pod a');

      emulator.closeWatches({ abrupt });
      emulator.create(pod('default', 'b'));
      await pollUntil(() => sink.names(Kinds.Pod).length === 2, `pod b after an ${abrupt ? 'abrupt' : 'orderly'} close`);
      expect(emulator.requestsFor(Kinds.Pod, { watch: false })).toHaveLength(1);
      const watches = emulator.requestsFor(Kinds.Pod, { watch: true });
      expect(watches.length).toBeGreaterThanOrEqual(2);
      expect(Number(watches.at(-1)!.query.resourceVersion)).toBeGreaterThan(Number(watches[0].query.resourceVersion));
      await source.stop();
    }
  });

  it('resumes a watch the server ends after timeoutSeconds, without relisting', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod], watchTimeoutSeconds: 1 });
    await source.start(sink);
    await pollUntil(() => emulator.requestsFor(Kinds.Pod, { watch: true }).length >= 2, 'a second watch after the timeout', 5000);
    expect(emulator.requestsFor(Kinds.Pod, { watch: true })[0].query.timeoutSeconds).toBe('1');
    emulator.create(pod('default', 'later'));
    await pollUntil(() => sink.names(Kinds.Pod).includes('default/later'), 'the pod on the resumed watch');
    expect(sink.replaces(Kinds.Pod)).toHaveLength(1);
    expect(source.lastSyncAgeMs()).toBe(0);
  });

  it('asks for bookmarks and survives them', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod] });
    await source.start(sink);
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a pod watch');
    expect(emulator.requestsFor(Kinds.Pod, { watch: true })[0].query.allowWatchBookmarks).toBe('true');
    emulator.bookmark();
    emulator.create(pod('default', 'after-bookmark'));
    await pollUntil(() => sink.names(Kinds.Pod).includes('default/after-bookmark'), 'the pod after a bookmark');
    expect(source.status()[0].resourceVersion).toBe(emulator.resourceVersion);
  });
});

describe('KubernetesSource paged lists', () => {
  it('lists in pages and delivers them as one snapshot', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod], listPageSize: 2 });
    for (let i = 0; i < 5; i++) emulator.create(pod('default', `p${i}`));
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    const lists = emulator.requestsFor(Kinds.Pod, { watch: false });
    expect(lists.map((r) => r.query.limit)).toEqual(['2', '2', '2']);
    expect(sink.replaces(Kinds.Pod)).toHaveLength(1);
    expect(sink.names(Kinds.Pod)).toEqual(['default/p0', 'default/p1', 'default/p2', 'default/p3', 'default/p4']);
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'the watch');
    expect(emulator.requestsFor(Kinds.Pod, { watch: true })[0].query.resourceVersion).toBe(emulator.resourceVersion);
  });

  it('starts the list over when a continue token expires', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod], listPageSize: 2 });
    for (let i = 0; i < 3; i++) emulator.create(pod('default', `p${i}`));
    emulator.failRequests({ status: 410, times: 1, match: (r) => r.query.continue !== undefined });
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    const lists = emulator.requestsFor(Kinds.Pod, { watch: false });
    expect(lists.map((r) => r.query.continue === undefined)).toEqual([true, false, true, false]);
    expect(sink.replaces(Kinds.Pod)).toHaveLength(1);
    expect(sink.names(Kinds.Pod)).toHaveLength(3);
  });
});

describe('KubernetesSource and CRDs', () => {
  it('treats a CRD that is not installed as synced-empty, logs it once, and watches it once it appears', async () => {
    const { emulator, sink, source, logger } = await setup({ notInstalled: [Kinds.AdminNetworkPolicy] });
    await source.start(sink);
    expect(await source.waitUntilReady(5000)).toBe(true);
    expect(sink.replaces(Kinds.AdminNetworkPolicy)).toEqual([[]]);
    expect(source.status().find((s) => s.kind === Kinds.AdminNetworkPolicy)).toMatchObject({ installed: false, synced: true, state: 'missing' });
    // Let a few rechecks pass: still one message.
    await pollUntil(() => emulator.requestsFor(Kinds.AdminNetworkPolicy).length >= 3, 'three rechecks');
    expect(logger.lines.filter((l) => l.msg?.includes('CRD not installed'))).toHaveLength(1);

    emulator.installCrd(Kinds.AdminNetworkPolicy);
    emulator.create(adminNetworkPolicy('late'));
    await pollUntil(() => sink.names(Kinds.AdminNetworkPolicy).includes('late'), 'the ANP after the CRD appeared');
    await pollUntil(() => emulator.openWatchCount(Kinds.AdminNetworkPolicy) === 1, 'a watch on ANPs');
    emulator.create(adminNetworkPolicy('later', 20));
    await pollUntil(() => sink.names(Kinds.AdminNetworkPolicy).length === 2, 'an ANP through the watch');
    expect(source.ready()).toBe(true);
  });

  it('drops the objects of a CRD that is removed', async () => {
    const { emulator, sink, source, logger } = await setup({}, { kinds: [Kinds.AdminNetworkPolicy] });
    emulator.create(adminNetworkPolicy('a'));
    await source.start(sink);
    await pollUntil(() => sink.names(Kinds.AdminNetworkPolicy).length === 1, 'the ANP');
    await pollUntil(() => emulator.openWatchCount() === 1, 'the watch');
    emulator.uninstallCrd(Kinds.AdminNetworkPolicy);
    await pollUntil(() => source.status()[0].state === 'missing', 'the CRD to be seen as missing');
    expect(sink.objects(Kinds.AdminNetworkPolicy)).toEqual([]);
    expect(source.ready()).toBe(true);
    expect(logger.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual(['CRD was removed; dropping its objects']);
  });

  it('finds a custom kind through discovery, including a plural the rule cannot guess', async () => {
    const widget = customResource('example.com/v1/Widget', true);
    const mouse = customResource('example.com/v1/Mouse', false, 'mice');
    const { emulator, sink, source } = await setup({ resources: [...defaultEmulatedResources(), widget, mouse] }, { kinds: ['example.com/v1/Widget', 'example.com/v1/Mouse'] });
    emulator.create({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'default' }, spec: { size: 3 } });
    emulator.create({ apiVersion: 'example.com/v1', kind: 'Mouse', metadata: { name: 'm' } });
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready');
    expect(sink.objects('example.com/v1/Widget')).toMatchObject([{ apiVersion: 'example.com/v1', kind: 'Widget', spec: { size: 3 } }]);
    expect(sink.names('example.com/v1/Mouse')).toEqual(['m']);
    expect(emulator.requests.some((r) => r.path === '/apis/example.com/v1/mice')).toBe(true);
  });

  it('waits for a custom kind whose group is not served yet', async () => {
    const gadget = { ...customResource('example.com/v1/Gadget', false), installed: false };
    const { emulator, sink, source } = await setup({ resources: [gadget] }, { kinds: ['example.com/v1/Gadget'] });
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready with the kind missing');
    emulator.installCrd('example.com/v1/Gadget');
    emulator.create({ apiVersion: 'example.com/v1', kind: 'Gadget', metadata: { name: 'g' } });
    await pollUntil(() => sink.names('example.com/v1/Gadget').includes('g'), 'the gadget');
  });
});

describe('KubernetesSource recovery', () => {
  it.each(['error-event', 'http-status'] as const)('relists after an expired resourceVersion (%s) and ends with exactly the server state', async (expiredWatch) => {
    const { emulator, sink, source } = await setup({ expiredWatch }, { kinds: [Kinds.Pod] });
    emulator.create(pod('default', 'stays', { v: '1' }));
    emulator.create(pod('default', 'goes'));
    await source.start(sink);
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a pod watch');

    await emulator.down();
    emulator.update(pod('default', 'stays', { v: '2' }));
    emulator.remove(Kinds.Pod, 'goes', 'default');
    emulator.create(pod('default', 'new'));
    emulator.compact();
    await emulator.up();

    await pollUntil(() => sink.replaces(Kinds.Pod).length === 2, 'the relist');
    await pollUntil(sinkAgrees(sink, emulator, Kinds.Pod), 'the sink to match the server');
    expect(sink.names(Kinds.Pod)).toEqual(['default/new', 'default/stays']);
    expect(sink.get(Kinds.Pod, 'stays', 'default')?.metadata.labels).toEqual({ v: '2' });
    // Nothing was ever replaced by an empty list while the server was away.
    expect(sink.replaces(Kinds.Pod).every((objects) => objects.length > 0)).toBe(true);
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a new watch');
    emulator.create(pod('default', 'after'));
    await pollUntil(() => sink.names(Kinds.Pod).includes('default/after'), 'events after the relist');
  });

  it('catches up from history after an API server restart, without relisting', async () => {
    const { emulator, sink, source } = await setup();
    for (const [, o] of samples) emulator.create(o);
    await source.start(sink);
    await pollUntil(() => emulator.openWatchCount() === defaultWatchedKinds.length, 'all watches');

    await emulator.restart();
    emulator.create(pod('default', 'during-restart'));
    emulator.remove(Kinds.Node, 'node-a');
    await pollUntil(() => sink.names(Kinds.Pod).includes('default/during-restart') && sink.names(Kinds.Node).length === 0, 'the changes');
    for (const kind of defaultWatchedKinds) {
      expectSinkMatches(sink, emulator, kind);
      expect(sink.replaces(kind)).toHaveLength(1);
    }
  });

  it('keeps the last known objects while the API server is down, and readiness drops only after the grace period', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod, Kinds.Namespace], readinessGraceMs: 1000 });
    emulator.create(pod('default', 'web'));
    emulator.create(namespace('default'));
    await source.start(sink);
    await pollUntil(() => emulator.openWatchCount() === 2, 'both watches');
    expect(source.lastSyncAgeMs()).toBe(0);

    await emulator.down();
    await pollUntil(() => source.lastSyncAgeMs() > 0, 'sync to be lost');
    expect(source.ready()).toBe(true);
    await pollUntil(() => !source.ready(), 'readiness to drop after the grace period', 5000);
    expect(source.lastSyncAgeMs()).toBeGreaterThan(1000);
    expect(source.synced()).toBe(true);
    expect(sink.names(Kinds.Pod)).toEqual(['default/web']);
    expect(sink.names(Kinds.Namespace)).toEqual(['default']);
    expect(source.status().every((s) => s.lastError !== undefined)).toBe(true);

    await emulator.up();
    await pollUntil(() => source.ready(), 'readiness to come back', 3000);
    expect(source.lastSyncAgeMs()).toBe(0);
    expect(sink.names(Kinds.Pod)).toEqual(['default/web']);
  });

  it('starts against an API server that is down, then syncs when it comes up', async () => {
    const { emulator, sink, source, logger } = await setup({ down: true }, { kinds: [Kinds.Pod, Kinds.Node] });
    emulator.create(pod('default', 'early'));
    await source.start(sink);
    await pollUntil(() => logger.lines.some((l) => l.level === 'warn'), 'a warning about the unreachable server');
    expect(source.ready()).toBe(false);
    expect(source.synced()).toBe(false);
    expect(sink.calls).toEqual([]);
    const warnings = logger.lines.filter((l) => l.level === 'warn').length;

    await emulator.up();
    await pollUntil(() => source.ready(), 'ready once the server is up', 3000);
    expect(sink.names(Kinds.Pod)).toEqual(['default/early']);
    // One warning per kind for the whole outage, not one per retry.
    expect(warnings).toBeLessThanOrEqual(2);
  });

  it('retries a list that fails with a server error and a forbidden answer', async () => {
    const { emulator, sink, source, logger } = await setup({}, { kinds: [Kinds.Pod] });
    emulator.create(pod('default', 'p'));
    emulator.failRequests({ status: 500, times: 2, match: (r) => !r.watch });
    emulator.failRequests({ status: 403, times: 1, match: (r) => !r.watch });
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready after the failures', 3000);
    expect(emulator.requestsFor(Kinds.Pod, { watch: false })).toHaveLength(4);
    expect(sink.replaces(Kinds.Pod)).toHaveLength(1);
    expect(logger.lines.some((l) => JSON.stringify(l.fields).includes('ClusterRole'))).toBe(true);
  });

  it('lists and watches over HTTPS, trusting the kubeconfig CA', async () => {
    const { emulator, sink, source } = await setup({ tls: testTls(), token: 'tls-token' }, { kinds: [Kinds.Pod] });
    expect(emulator.url).toMatch(/^https:/);
    emulator.create(pod('default', 'secure'));
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready over https');
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a watch over https');
    emulator.create(pod('default', 'secure-2'));
    await pollUntil(() => sink.names(Kinds.Pod).length === 2, 'a watch event over https');
  });

  it('refuses a server whose certificate the kubeconfig CA did not sign', async () => {
    const emulator = await ApiServerEmulator.start({ tls: testTls() });
    cleanups.push(() => emulator.stop());
    const otherCa = testTls().cert; // a leaf certificate, not the CA that signed the server's
    const kubeconfig = await writeKubeconfig({ server: emulator.url, ca: otherCa });
    const logger = recordingLogger();
    const source = new KubernetesSource({ kubeconfig, logger, kinds: [Kinds.Pod], backoff: { initialMs: 20, maxMs: 100 } });
    cleanups.push(() => source.stop());
    await source.start(new RecordingSink());
    await pollUntil(() => logger.lines.some((l) => l.level === 'warn'), 'a warning');
    expect(source.ready()).toBe(false);
    expect(source.status()[0].lastError).toMatch(/certificate|issuer|self.signed/i);
  });

  it('sends the bearer token from the kubeconfig', async () => {
    const { emulator, sink, source } = await setup({ token: 's3cret' }, { kinds: [Kinds.Namespace] });
    emulator.create(namespace('default'));
    await source.start(sink);
    await pollUntil(() => source.ready(), 'ready with a token');
    expect(sink.names(Kinds.Namespace)).toEqual(['default']);
  });

  it('stops cleanly: no requests and no sink calls after stop()', async () => {
    const { emulator, sink, source } = await setup({}, { kinds: [Kinds.Pod] });
    await source.start(sink);
    await pollUntil(() => emulator.openWatchCount(Kinds.Pod) === 1, 'a pod watch');
    await source.stop();
    await pollUntil(() => emulator.openWatchCount() === 0, 'the watch to close');
    const requests = emulator.requests.length;
    const calls = sink.calls.length;
    emulator.create(pod('default', 'ignored'));
    await new Promise((r) => setTimeout(r, 100));
    expect(emulator.requests.length).toBe(requests);
    expect(sink.calls.length).toBe(calls);
  });
});

describe('KubernetesSource feeding ClusterState', () => {
  it('lets ClusterState find a pod by IP with its namespace and node labels, and follow a namespace relabel', async () => {
    const { emulator, source } = await setup({}, { kinds: [Kinds.Pod, Kinds.Namespace, Kinds.Node] });
    emulator.create(namespace('shop', { team: 'a' }));
    emulator.create(node('node-a', { zone: 'z1' }));
    emulator.create(pod('shop', 'cart', { app: 'cart' }, '10.9.0.7'));
    const state = new ClusterState();
    await source.start(state);
    // Kinds sync independently; PodInfo is complete once all three have.
    await pollUntil(() => source.ready(), 'the first sync');
    expect(state.podByIP('10.9.0.7')).toMatchObject({
      name: 'cart',
      namespace: 'shop',
      podLabels: { app: 'cart' },
      namespaceLabels: { 'kubernetes.io/metadata.name': 'shop', team: 'a' },
      nodeName: 'node-a',
      nodeLabels: { zone: 'z1' },
    });
    await pollUntil(() => emulator.openWatchCount() === 3, 'all watches');
    emulator.update(namespace('shop', { team: 'b' }));
    await pollUntil(() => state.podByIP('10.9.0.7')?.namespaceLabels.team === 'b', 'the new namespace label on the pod');
  });
});

describe('loadKubeConfig and options', () => {
  it('names a kubeconfig file that does not exist', () => {
    try {
      loadKubeConfig('/nonexistent/kubeconfig');
      expect.unreachable();
    } catch (err) {
      expect(isKwpError(err) && err.code).toBe('KWP_ERR_KUBECONFIG');
      expect((err as Error).message).toContain('/nonexistent/kubeconfig');
    }
  });

  it('rejects a kind that is not apiVersion/Kind', () => {
    expect(() => new KubernetesSource({ kinds: ['Pod'] })).toThrow(/apiVersion\/Kind/);
  });

  it('asks for in-cluster config only inside a pod', () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      expect(() => loadKubeConfig()).toThrow(/--kubeconfig/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});

describe('backoffDelay', () => {
  it.each([
    [0, 0, 50],
    [0, 1, 100],
    [3, 0, 400],
    [3, 1, 800],
    [10, 0, 5000],
    [10, 1, 10000],
  ])('attempt %i with random %d waits %i ms (100 ms initial, 10 s cap)', (attempt, random, want) => {
    expect(backoffDelay(attempt, { initialMs: 100, maxMs: 10_000 }, () => random)).toBe(want);
  });
});
