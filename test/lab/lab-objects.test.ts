import { describe, it, expect } from 'vitest';
import { labManifests } from './lab-objects.js';
import type { LabPod } from './lab.js';

const pod = (over: Partial<LabPod>): LabPod => ({
  name: 'web',
  namespace: 'shop',
  key: 'shop/web',
  labels: { app: 'web' },
  ip: '10.244.1.2',
  netns: 'x',
  hostInterface: 'pod0',
  tcpPorts: [80],
  udpPorts: [5353],
  ...over,
});

describe('labManifests', () => {
  const objects = labManifests({
    nodeName: 'lab-node',
    nodeIp: '10.244.0.1',
    pods: [pod({}), pod({ name: 'dns', key: 'infra/dns', namespace: 'infra', ip: '10.244.1.3', ipv6: 'fd00::3', dnsRecords: { a: ['1.2.3.4'] }, labels: {} })],
    namespaceLabels: { shop: { team: 'a' } },
  });

  it('lists each Kubernetes namespace once, with its name label and the extra labels', () => {
    const namespaces = objects.filter((o) => o.kind === 'Namespace');
    expect(namespaces.map((n) => [n.metadata.name, n.metadata.labels])).toEqual([
      ['infra', { 'kubernetes.io/metadata.name': 'infra' }],
      ['shop', { 'kubernetes.io/metadata.name': 'shop', team: 'a' }],
    ]);
  });

  it('describes a running pod on the lab node with its addresses and named container ports', () => {
    const web = objects.find((o) => o.kind === 'Pod' && o.metadata.name === 'web')!;
    expect(web.spec.nodeName).toBe('lab-node');
    expect(web.status).toMatchObject({ phase: 'Running', podIP: '10.244.1.2', podIPs: [{ ip: '10.244.1.2' }] });
    expect(web.spec.containers[0].ports).toEqual([
      { name: 'tcp-80', containerPort: 80, protocol: 'TCP' },
      { name: 'udp-5353', containerPort: 5353, protocol: 'UDP' },
    ]);
  });

  it('adds the IPv6 address and the DNS port of a dual-stack resolver pod', () => {
    const dns = objects.find((o) => o.kind === 'Pod' && o.metadata.name === 'dns')!;
    expect(dns.status.podIPs).toEqual([{ ip: '10.244.1.3' }, { ip: 'fd00::3' }]);
    expect(dns.spec.containers[0].ports).toContainEqual({ name: 'dns', containerPort: 53, protocol: 'UDP' });
  });

  it('includes the Node the pods run on', () => {
    expect(objects.filter((o) => o.kind === 'Node').map((n) => n.metadata.name)).toEqual(['lab-node']);
  });
});
