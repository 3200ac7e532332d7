import { describe, it, expect } from 'vitest';
import type { KubeObject } from '../contract.js';
import { evaluateFlows } from '../eval.js';
import { isKwpError } from '../errors.js';
import { namespace, pod, service } from '../testing/objects.js';

// Flows to Services, decided by the real pipeline once per endpoint, as a
// Service proxy would rewrite them.

const web = (n: number, port = 8080) => pod(`shop/web-${n}`, `10.244.1.${10 + n}`, { labels: { app: 'web', team: n === 1 ? 'blue' : 'green' }, ports: [{ name: 'http', port }] });
const client = pod('shop/client', '10.244.1.2', { labels: { app: 'client' } });
const webService = { ...service('shop/web', { app: 'web' }, [{ name: 'http', port: 80, targetPort: 'http' }]) };
webService.spec.clusterIP = '10.96.0.80';
webService.spec.type = 'NodePort';
webService.spec.ports[0].nodePort = 30080;
const node: KubeObject = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }] } };

/** Only the blue web pod may be reached on 8080. */
const onlyBlue: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'only-blue', namespace: 'shop' },
  spec: { podSelector: { matchLabels: { app: 'web', team: 'green' } }, policyTypes: ['Ingress'] },
};

const slice = (name: string, ports: unknown[], endpoints: unknown[]): KubeObject => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  ports,
  endpoints,
});

const base = [namespace('shop'), node, client, web(1), web(2, 9090), webService, onlyBlue];
const lines = async (objects: KubeObject[], flows: Array<Record<string, unknown>>) =>
  (await evaluateFlows({ objects, flows: flows as never })).map((r) => r.walkthrough.replace(/  egress: .*/, ''));

describe('a flow to a Service', () => {
  it('is decided for each endpoint its selector picks, the named targetPort resolved on each pod', async () => {
    expect(await lines(base, [{ src: 'shop/client', dst: 'shop/web', port: 80 }])).toEqual([
      'shop/client -> shop/web TCP/80 via shop/web-1:8080  ALLOW',
      'shop/client -> shop/web TCP/80 via shop/web-2:9090  DENY',
    ]);
  });

  it('names the Service by a ClusterIP or by a node address and NodePort just the same', async () => {
    const results = await evaluateFlows({ objects: base, flows: [{ src: 'shop/client', dst: '10.96.0.80', port: 80 }, { src: '203.0.113.9', dst: '192.168.1.10', port: 30080 }] });
    expect(results.map((r) => [r.dst, r.via?.endpoint, r.via?.port, r.verdict])).toEqual([
      ['10.96.0.80', 'shop/web-1', 8080, 'allow'],
      ['10.96.0.80', 'shop/web-2', 9090, 'deny'],
      ['192.168.1.10', 'shop/web-1', 8080, 'allow'],
      ['192.168.1.10', 'shop/web-2', 9090, 'deny'],
    ]);
  });

  it('follows the EndpointSlices when there are any: ready endpoints only, their port per slice', async () => {
    const objects = [
      ...base,
      slice('web-a', [{ name: 'http', port: 8080, protocol: 'TCP' }], [{ addresses: ['10.244.1.11'], conditions: { ready: true } }, { addresses: ['10.244.1.12'], conditions: { ready: false } }]),
      slice('web-b', [{ name: 'http', port: 9090, protocol: 'TCP' }], [{ addresses: ['10.244.1.12'] }]),
    ];
    expect(await lines(objects, [{ src: 'shop/client', dst: 'shop/web', port: 80 }])).toEqual([
      'shop/client -> shop/web TCP/80 via shop/web-1:8080  ALLOW',
      'shop/client -> shop/web TCP/80 via shop/web-2:9090  DENY',
    ]);
    // web-2 leaves the Service: its slice is gone, and so is its line.
    expect(await lines(objects.slice(0, -1), [{ src: 'shop/client', dst: 'shop/web', port: 80 }])).toEqual(['shop/client -> shop/web TCP/80 via shop/web-1:8080  ALLOW']);
  });

  it('takes a name that is both a pod and a Service as the pod', async () => {
    const objects = [...base, service('shop/web-1', { app: 'web' }, [{ port: 80 }])];
    expect(await lines(objects, [{ src: 'shop/client', dst: 'shop/web-1', port: 8080 }])).toEqual(['shop/client -> shop/web-1 TCP/8080  ALLOW']);
  });

  it('marks the endpoint that is the client itself as a Service hairpin', async () => {
    const results = await evaluateFlows({ objects: base, flows: [{ src: 'shop/web-1', dst: 'shop/web', port: 80 }] });
    expect(results.map((r) => [r.via?.endpoint, r.via?.hairpin])).toEqual([['shop/web-1', true], ['shop/web-2', undefined]]);
  });

  it.each([
    ['a port the Service does not have', { src: 'shop/client', dst: 'shop/web', port: 81 }, /field "dst": Service shop\/web has no port TCP\/81 \(its ports: TCP\/80\); use one of its ports/],
    ['a Service without endpoints', { src: 'shop/client', dst: 'shop/none', port: 80 }, /Service shop\/none has no ready endpoints for TCP\/80, so a Service proxy would reject the connection/],
    ['a Service as the source', { src: 'shop/web', dst: 'shop/client', port: 80 }, /field "src": shop\/web is a Service; only a flow's destination may name a Service/],
  ])('is refused with what to fix for %s', async (_name, flow, message) => {
    const objects = [...base, service('shop/none', { app: 'nobody' }, [{ port: 80 }])];
    const error = await evaluateFlows({ objects, flows: [flow] }).then(() => undefined, (err: unknown) => err);
    expect(isKwpError(error) && error.code).toBe('KWP_ERR_FLOWS');
    expect((error as Error).message).toMatch(message);
  });

  it('lets a domain name that resolved to the ClusterIP stand for the endpoints the policy sees', async () => {
    const onlyByName: KubeObject = {
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: 'web-by-name' },
      spec: {
        tier: 'Admin', priority: 1, subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } },
        egress: [
          { name: 'to-web', action: 'Accept', to: [{ domainNames: ['web.shop.svc.cluster.local'] }] },
          { name: 'nothing-else', action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] },
        ],
      },
    };
    const flows = [{ src: 'shop/client', dst: 'shop/web', port: 80 }];
    const objects = [...base.filter((o) => o !== onlyBlue), onlyByName];
    const named = await evaluateFlows({ objects, flows, dns: { 'web.shop.svc.cluster.local': ['10.96.0.80'] } });
    expect(named.map((r) => [r.via?.endpoint, r.verdict])).toEqual([['shop/web-1', 'allow'], ['shop/web-2', 'allow']]);
    const unnamed = await evaluateFlows({ objects, flows });
    expect(unnamed.map((r) => r.verdict)).toEqual(['deny', 'deny']);
  });
});
