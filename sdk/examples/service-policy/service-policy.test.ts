import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { loadModule, service, startPluginCluster, type CompiledEvaluator, type KubeObject, type PluginCluster } from '../../../host/testing/index.js';

const wasmFile = fileURLToPath(new URL('../../../dist/wasm/examples/service-policy.wasm', import.meta.url));
const manifests = fileURLToPath(new URL('./manifests', import.meta.url));

function servicePolicy(ref: string, spec: Record<string, unknown>): KubeObject {
  const [namespace, name] = ref.split('/');
  return { apiVersion: 'policy.kwp.example/v1alpha1', kind: 'ServicePolicy', metadata: { name, namespace }, spec };
}

describe('service-policy', () => {
  let wasm: CompiledEvaluator;
  let cluster: PluginCluster | undefined;
  beforeAll(() => {
    wasm = loadModule(wasmFile);
  });
  afterEach(() => {
    cluster?.dispose();
    cluster = undefined;
  });
  async function start(extra: KubeObject[] = [], pipeline: 'alone' | 'before-builtins' = 'alone'): Promise<PluginCluster> {
    cluster = await startPluginCluster({ module: wasm, manifests, objects: extra, pipeline });
    return cluster;
  }

  it('asks for Services and its own custom kind, in that order', () => {
    expect(wasm.meta.kinds).toEqual(['v1/Service', 'policy.kwp.example/v1alpha1/ServicePolicy']);
    expect(wasm.meta.failurePolicy).toBe('fail-closed');
  });

  it('decides flows between Services from the policies in the manifests', async () => {
    const c = await start();
    c.expectFlows([
      { name: 'web to db on postgres', src: 'shop/web-1', dst: 'data/db-1', port: 5432, expect: 'allow' },
      { name: 'the other web pod too', src: 'shop/web-2', dst: 'data/db-1', port: 5432, expect: 'allow' },
      { name: 'web to db elsewhere', src: 'shop/web-1', dst: 'data/db-1', port: 22, expect: 'deny' },
      { name: 'admin to db', src: 'shop/admin', dst: 'data/db-1', port: 5432, expect: 'deny' },
      { name: 'db back to web is not covered', src: 'data/db-1', dst: 'shop/web-1', port: 5432, expect: 'allow' },
      { name: 'web to cache is not covered', src: 'shop/web-1', dst: 'data/cache', port: 6379, expect: 'allow' },
      { name: 'an outside address is not a Service member', src: '192.0.2.7', dst: 'data/db-1', port: 5432, expect: 'allow' },
    ]);
  });

  it('names the deciding policy, its priority and both Services in the walkthrough', async () => {
    const c = await start();
    c.expectWalkthrough({ src: 'shop/web-1', dst: 'data/db-1', port: 5432 },
      'egress: [service-policy] Accept (ServicePolicy shop/web-to-db (priority 10): Allow shop/web -> data/db)  ingress: [service-policy] Accept (ServicePolicy shop/web-to-db');
    c.expectWalkthrough({ src: 'shop/web-1', dst: 'data/db-1', port: 80 }, '[service-policy] Deny (ServicePolicy shop/nothing-else-to-db (priority 100): Deny shop/web -> data/db)');
    expect(c.pluginStep({ src: 'shop/web-1', dst: 'data/cache', port: 6379 }, 'egress')?.verdict).toBe('Next');
  });

  it('lets an Allow override a NetworkPolicy of the built-in stages behind it', async () => {
    const isolateData = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'isolate', namespace: 'data' },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    };
    const c = await start([isolateData], 'before-builtins');
    c.expectAllowed({ src: 'shop/web-1', dst: 'data/db-1', port: 5432 });
    c.expectWalkthrough({ src: 'shop/web-1', dst: 'data/cache', port: 6379 }, /DENY .*ingress: \[NP\] Deny/);
  });

  it('breaks a priority tie by namespace and name', async () => {
    const c = await start([
      servicePolicy('shop/b-allow', { priority: 5, action: 'Allow', from: { service: 'admin' }, to: { service: 'cache', namespace: 'data' } }),
      servicePolicy('shop/a-deny', { priority: 5, action: 'Deny', from: { service: 'admin' }, to: { service: 'cache', namespace: 'data' } }),
    ]);
    c.expectWalkthrough({ src: 'shop/admin', dst: 'data/cache', port: 6379 }, 'ServicePolicy shop/a-deny (priority 5)');
  });

  it('follows policy, Service and pod changes while running', async () => {
    const c = await start();
    c.expectDenied({ src: 'shop/admin', dst: 'data/db-1', port: 5432 });
    c.remove(servicePolicy('shop/admin-not-to-db', {}));
    c.expectAllowed({ src: 'shop/admin', dst: 'data/db-1', port: 5432 });

    // The db Service now selects the cache pod as well: the web tier's rules follow.
    c.expectAllowed({ src: 'shop/web-1', dst: 'data/cache', port: 6379 });
    c.apply(service('data/db', { tier: 'storage' }));
    c.expectAllowed({ src: 'shop/web-1', dst: 'data/db-1', port: 22 });
    c.apply({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'cache', namespace: 'data', labels: { app: 'cache', tier: 'storage' } },
      spec: { containers: [{ name: 'redis', ports: [{ name: 'redis', containerPort: 6379 }] }] }, status: { podIP: '10.0.2.2' },
    });
    c.expectDenied({ src: 'shop/web-1', dst: 'data/cache', port: 6379 });
    // No container port named postgres on the cache pod: the named-port Allow does not apply there.
    c.expectDenied({ src: 'shop/web-1', dst: 'data/cache', port: 5432 });
  });

  it('treats a Service without a selector as selecting no pod', async () => {
    const c = await start([
      service('shop/external', null),
      servicePolicy('shop/deny-external', { priority: 1, action: 'Deny', from: { service: 'external' }, to: { service: 'db', namespace: 'data' } }),
    ]);
    c.expectAllowed({ src: 'data/cache', dst: 'data/db-1', port: 5432 });
  });

  it.each([
    ['an unknown action', { priority: 1, action: 'Maybe', from: { service: 'web' }, to: { service: 'cache', namespace: 'data' } }],
    ['a priority out of range', { priority: 5000, action: 'Deny', from: { service: 'web' }, to: { service: 'cache', namespace: 'data' } }],
    ['a missing from', { priority: 1, action: 'Deny', to: { service: 'cache', namespace: 'data' } }],
    ['a bad port', { priority: 1, action: 'Deny', from: { service: 'web' }, to: { service: 'cache', namespace: 'data' }, ports: [{ port: 70000 }] }],
  ])('ignores a policy with %s and keeps deciding with the others', async (_what, spec) => {
    const c = await start([servicePolicy('shop/broken', spec)]);
    c.expectAllowed({ src: 'shop/web-1', dst: 'data/cache', port: 6379 });
    c.expectDenied({ src: 'shop/admin', dst: 'data/db-1', port: 5432 });
    expect(c.counters.traps).toBe(0);
  });

  it('restricts by protocol and port range', async () => {
    const c = await start([
      servicePolicy('shop/no-udp-range', { priority: 1, action: 'Deny', from: { service: 'web' }, to: { service: 'cache', namespace: 'data' }, ports: [{ protocol: 'UDP', port: 1000, endPort: 2000 }] }),
    ]);
    c.expectFlows([
      { src: 'shop/web-1', dst: 'data/cache', port: 1500, protocol: 'UDP', expect: 'deny' },
      { src: 'shop/web-1', dst: 'data/cache', port: 2001, protocol: 'UDP', expect: 'allow' },
      { src: 'shop/web-1', dst: 'data/cache', port: 1500, protocol: 'TCP', expect: 'allow' },
    ]);
  });
});
