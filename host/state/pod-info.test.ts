import { describe, expect, it } from 'vitest';
import { Protocol, type KubeObject } from '../contract.js';
import { CLUSTER_LABEL, NAMESPACE_NAME_LABEL, localPodInfo, remotePodInfo, samePodInfo, type RemotePod } from './pod-info.js';

const local = { clusterId: '', multicluster: false };
const ns: KubeObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'a' } } };
const node: KubeObject = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels: { zone: 'z1' } } };

function pod(status: any, spec: any = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'shop', labels: { app: 'web' } }, spec: { nodeName: 'n1', ...spec }, status };
}

describe('deriving a local pod\'s PodInfo', () => {
  it('has no PodInfo while the pod has no IP', () => {
    expect(localPodInfo(1, pod({ phase: 'Pending' }), ns, node, local)).toBeUndefined();
    expect(localPodInfo(1, pod({ podIP: 'not-an-ip' }), ns, node, local)).toBeUndefined();
  });

  it('takes its addresses from podIPs in canonical text, each once, and its labels from the pod, namespace and node', () => {
    const info = localPodInfo(7, pod({ podIPs: [{ ip: '10.0.0.5' }, { ip: 'FD00:0::5' }, { ip: '10.0.0.5' }], podIP: '10.9.9.9' }), ns, node, local)!;
    expect(info).toMatchObject({ id: 7, name: 'web', namespace: 'shop', nodeName: 'n1', clusterId: '', hostNetwork: false, ips: ['10.0.0.5', 'fd00::5'] });
    expect(info.podLabels).toEqual({ app: 'web' });
    expect(info.namespaceLabels).toEqual({ team: 'a', [NAMESPACE_NAME_LABEL]: 'shop' });
    expect(info.nodeLabels).toEqual({ zone: 'z1' });
    expect(Object.isFrozen(info)).toBe(true);
  });

  it('lists the ports of containers and native sidecars, skipping malformed ones', () => {
    const spec = {
      containers: [{ ports: [{ name: 'http', containerPort: 8080 }, { containerPort: 53, protocol: 'udp' }, { containerPort: 70000 }, { containerPort: 9, protocol: 'ICMP' }] }],
      initContainers: [{ restartPolicy: 'Always', ports: [{ name: 'proxy', containerPort: 15001, protocol: 'SCTP' }] }, { ports: [{ containerPort: 1 }] }],
      hostNetwork: true,
    };
    const info = localPodInfo(1, pod({ podIP: '10.0.0.5' }, spec), ns, node, local)!;
    expect(info.containerPorts).toEqual([
      { name: 'http', port: 8080, protocol: Protocol.TCP },
      { name: '', port: 53, protocol: Protocol.UDP },
      { name: 'proxy', port: 15001, protocol: Protocol.SCTP },
    ]);
    expect(info.hostNetwork).toBe(true);
  });

  it('names its cluster in the namespace labels only in multicluster mode', () => {
    const info = localPodInfo(1, pod({ podIP: '10.0.0.5' }), ns, node, { clusterId: 'a', multicluster: true })!;
    expect(info.clusterId).toBe('a');
    expect(info.namespaceLabels[CLUSTER_LABEL]).toBe('a');
    expect(localPodInfo(1, pod({ podIP: '10.0.0.5' }), ns, node, { clusterId: 'a', multicluster: false })!.namespaceLabels[CLUSTER_LABEL]).toBeUndefined();
  });

  it('has namespace labels with the name label even when the Namespace is unknown, and no node labels without the Node', () => {
    const info = localPodInfo(1, pod({ podIP: '10.0.0.5' }), undefined, undefined, local)!;
    expect(info.namespaceLabels).toEqual({ [NAMESPACE_NAME_LABEL]: 'shop' });
    expect(info.nodeLabels).toEqual({});
  });
});

describe('deriving a remote pod\'s PodInfo', () => {
  const remote: RemotePod = {
    clusterId: 'b', name: 'api', namespace: 'shop', podLabels: { app: 'api' }, namespaceLabels: { team: 'b' },
    nodeName: 'b1', nodeLabels: {}, containerPorts: [{ name: 'http', port: 80, protocol: 6 }], ips: ['10.2.0.1', 'bad', '10.2.0.1'],
  };

  it('keeps the parsable addresses once and labels the namespace with the pod\'s own cluster', () => {
    const info = remotePodInfo(3, remote, true)!;
    expect(info).toMatchObject({ id: 3, clusterId: 'b', hostNetwork: false, ips: ['10.2.0.1'] });
    expect(info.namespaceLabels).toEqual({ team: 'b', [NAMESPACE_NAME_LABEL]: 'shop', [CLUSTER_LABEL]: 'b' });
  });

  it('has no PodInfo without a parsable address', () => {
    expect(remotePodInfo(3, { ...remote, ips: ['bad'] }, true)).toBeUndefined();
  });
});

describe('telling PodInfos apart', () => {
  const base = localPodInfo(1, pod({ podIP: '10.0.0.5' }), ns, node, local)!;

  it('equal derivations are the same, a changed label, port or address is not', () => {
    expect(samePodInfo(base, localPodInfo(1, pod({ podIP: '10.0.0.5' }), ns, node, local)!)).toBe(true);
    expect(samePodInfo(base, { ...base, podLabels: { app: 'other' } })).toBe(false);
    expect(samePodInfo(base, { ...base, namespaceLabels: { ...base.namespaceLabels, extra: '' } })).toBe(false);
    expect(samePodInfo(base, { ...base, containerPorts: [{ name: 'x', port: 1, protocol: 6 }] })).toBe(false);
    expect(samePodInfo(base, { ...base, ips: ['10.0.0.6'] })).toBe(false);
    expect(samePodInfo(base, { ...base, id: 2 })).toBe(false);
  });
});
