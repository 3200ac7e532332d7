import { describe, expect, it } from 'vitest';
import { Kinds, type KindKey, type KubeObject } from '../contract.js';
import { ClusterState } from './cluster-state.js';
import { LAST_APPLIED_ANNOTATION, storedForm } from './stored-form.js';

/** A Pod the way an API server sends one: mostly fields no packet decision reads. */
function verbosePod(name: string, labels: Record<string, string> = { app: 'web', 'pod-template-hash': '5d9f' }): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'shop',
      uid: `uid-${name}`,
      resourceVersion: '42',
      labels: { ...labels },
      annotations: { 'prometheus.io/scrape': 'true', [LAST_APPLIED_ANNOTATION]: '{"a":"whole copy"}' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d9f', uid: 'rs' }],
      managedFields: [{ manager: 'kube-controller-manager', fieldsV1: { 'f:spec': {} } }],
    },
    spec: {
      nodeName: 'node-1',
      hostNetwork: false,
      serviceAccountName: 'web',
      volumes: [{ name: 'data', emptyDir: {} }],
      tolerations: [{ key: 'k', operator: 'Exists' }],
      containers: [
        {
          name: 'main',
          image: 'example/web:1',
          env: [{ name: 'A', value: 'b' }],
          resources: { limits: { cpu: '1' } },
          ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
        },
      ],
      initContainers: [
        { name: 'migrate', image: 'example/migrate:1', command: ['migrate'] },
        { name: 'proxy', image: 'example/proxy:1', restartPolicy: 'Always', ports: [{ name: 'proxy', containerPort: 15001 }] },
      ],
    },
    status: {
      phase: 'Running',
      podIP: '10.0.0.7',
      podIPs: [{ ip: '10.0.0.7' }],
      hostIP: '192.168.0.1',
      hostIPs: [{ ip: '192.168.0.1' }],
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: [{ name: 'main', ready: true, imageID: 'sha256:abc' }],
      qosClass: 'Burstable',
      startTime: '2026-01-01T00:00:00Z',
    },
  };
}

describe('what the cluster state keeps of an object', () => {
  it('a Pod keeps its metadata, the spec fields naming its node, network and ports, and its phase and addresses, nothing else', () => {
    const stored = storedForm(Kinds.Pod, verbosePod('web-1'));
    expect(stored).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      // Metadata is kept (modules may select on annotations), minus the two write-side fields.
      metadata: {
        name: 'web-1',
        namespace: 'shop',
        uid: 'uid-web-1',
        resourceVersion: '42',
        labels: { app: 'web', 'pod-template-hash': '5d9f' },
        annotations: { 'prometheus.io/scrape': 'true' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d9f', uid: 'rs' }],
      },
      // What PodInfo is derived from (node, hostNetwork, container and native-sidecar ports) and the pod's identity.
      spec: {
        nodeName: 'node-1',
        hostNetwork: false,
        serviceAccountName: 'web',
        containers: [{ name: 'main', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] }],
        initContainers: [{ name: 'migrate' }, { name: 'proxy', restartPolicy: 'Always', ports: [{ name: 'proxy', containerPort: 15001 }] }],
      },
      // Whether it runs (IP ownership) and its addresses.
      status: { phase: 'Running', podIP: '10.0.0.7', podIPs: [{ ip: '10.0.0.7' }], hostIP: '192.168.0.1', hostIPs: [{ ip: '192.168.0.1' }] },
    });
  });

  it('a Node keeps its metadata, its spec and the addresses nodes peers match, not its images or conditions', () => {
    const node: KubeObject = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-1', labels: { zone: 'a' }, managedFields: [{}] },
      spec: { podCIDR: '10.0.0.0/24', podCIDRs: ['10.0.0.0/24'], providerID: 'aws:///i-1' },
      status: {
        addresses: [{ type: 'InternalIP', address: '192.168.0.1' }],
        images: [{ names: ['example/web:1'], sizeBytes: 1 }],
        conditions: [{ type: 'Ready', status: 'True' }],
        nodeInfo: { kubeletVersion: 'v1.31.0' },
        capacity: { cpu: '4' },
      },
    };
    expect(storedForm(Kinds.Node, node)).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-1', labels: { zone: 'a' } },
      spec: { podCIDR: '10.0.0.0/24', podCIDRs: ['10.0.0.0/24'], providerID: 'aws:///i-1' },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.0.1' }] },
    });
  });

  it('policies and other kinds stay whole except for managedFields and the last-applied copy of themselves', () => {
    const policy: KubeObject = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'np', namespace: 'shop', annotations: { [LAST_APPLIED_ANNOTATION]: '{}' }, managedFields: [{}] },
      spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] },
      status: { conditions: [] },
    };
    expect(storedForm(Kinds.NetworkPolicy, policy)).toEqual({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'np', namespace: 'shop' },
      spec: policy.spec,
      status: policy.status,
    });
  });

  it('storing an object leaves the delivered object as it was, and editable', () => {
    const pod = verbosePod('web-1');
    const before = structuredClone(pod);
    storedForm(Kinds.Pod, pod);
    expect(pod).toEqual(before);
    pod.spec.containers[0].ports.push({ containerPort: 9090 });
    pod.metadata.labels!.extra = 'yes';
    expect(pod.spec.containers[0].ports).toHaveLength(2);
  });

  it('replicas with equal labels and ports share one frozen copy of each', () => {
    const a = storedForm(Kinds.Pod, verbosePod('web-1'));
    const b = storedForm(Kinds.Pod, verbosePod('web-2'));
    const c = storedForm(Kinds.Pod, verbosePod('web-3', { app: 'web', 'pod-template-hash': 'other' }));
    expect(b.metadata.labels).toBe(a.metadata.labels);
    expect(c.metadata.labels).not.toBe(a.metadata.labels);
    expect(b.spec.containers).toBe(a.spec.containers);
    expect(Object.isFrozen(a.metadata.labels)).toBe(true);
    expect(Object.isFrozen(a.spec.containers[0].ports[0])).toBe(true);
  });

  it('policies share every repeated part of their specs, one frozen copy each, and keep what differs and the field order', () => {
    const policy = (name: string, app: string, port: number | string): KubeObject => ({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name, namespace: 'shop' },
      spec: {
        podSelector: { matchLabels: { app } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } } }], ports: [{ protocol: 'TCP', port }] }],
      },
    });
    const delivered = [policy('a', 'web', 8080), policy('b', 'db', 8080), policy('c', 'web', '8080')];
    const before = structuredClone(delivered);
    const [a, b, c] = delivered.map((p) => storedForm(Kinds.NetworkPolicy, p));
    // What is stored reads (and is delivered to modules) exactly as it came, keys in their order.
    expect([a, b, c].map((p) => JSON.stringify(p))).toEqual(before.map((p) => JSON.stringify(p)));
    expect(delivered).toEqual(before);
    expect(Object.isFrozen(delivered[0].spec)).toBe(false);
    // Equal subtrees are one object; a difference anywhere below makes its own copy of every level above it.
    expect(b.spec.policyTypes).toBe(a.spec.policyTypes);
    expect(b.spec.ingress).toBe(a.spec.ingress);
    expect(b.spec.podSelector).not.toBe(a.spec.podSelector);
    expect(c.spec.podSelector).toBe(a.spec.podSelector);
    expect(c.spec.ingress).not.toBe(a.spec.ingress);
    expect(c.spec.ingress[0].from).toBe(a.spec.ingress[0].from);
    expect(c.spec.ingress[0].ports[0].port).toBe('8080');
    expect(storedForm(Kinds.NetworkPolicy, policy('d', 'web', 8080)).spec).toBe(a.spec);
    expect(Object.isFrozen(a.spec.ingress[0].ports[0])).toBe(true);
    expect(() => { a.spec.policyTypes.push('Egress'); }).toThrow(TypeError);
    // Each policy keeps its own metadata.
    expect(b.metadata).not.toBe(a.metadata);
    expect(b.metadata.name).toBe('b');
  });

  it('a shared spec tells a missing field, an undefined one and a null one apart', () => {
    const withSpec = (spec: Record<string, unknown>): KubeObject => ({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'shop' }, spec });
    const [missing, undef, nul] = [{}, { type: undefined }, { type: null }].map((spec) => storedForm(Kinds.Service, withSpec(spec)).spec);
    expect(undef).not.toBe(missing);
    expect(nul).not.toBe(undef);
    expect('type' in undef).toBe(true);
    expect(nul.type).toBeNull();
  });

  it('a spec holding something that is not plain JSON (a Date a YAML reader made) keeps it, and still shares its plain parts', () => {
    const at = new Date(0);
    const withDate = (name: string): KubeObject => ({
      apiVersion: 'example.io/v1',
      kind: 'Thing',
      metadata: { name, namespace: 'shop' },
      spec: { at, selector: { matchLabels: { app: 'web' } } },
    });
    const [a, b] = [withDate('a'), withDate('b')].map((o) => storedForm('example.io/v1/Thing' as KindKey, o));
    expect(a.spec.at).toBe(at);
    expect(Object.isFrozen(a.spec)).toBe(false);
    expect(b.spec).not.toBe(a.spec);
    expect(b.spec.selector).toBe(a.spec.selector);
    // Two distinct Dates are never taken for one shared value.
    const other = storedForm('example.io/v1/Thing' as KindKey, { ...withDate('c'), spec: { at: new Date(1), selector: { matchLabels: { app: 'web' } } } });
    expect(other.spec.at.getTime()).toBe(1);
  });

  it('strings and numbers that would print alike are not taken for one another', () => {
    const withSpec = (spec: Record<string, unknown>): KubeObject => ({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'shop' }, spec });
    const [a, b, c, d] = [{ port: 80 }, { port: '80' }, { x: 'a,1:b' }, { x: 'a', '1:b': undefined }].map((spec) => storedForm(Kinds.Service, withSpec(spec)).spec);
    expect(a.port).toBe(80);
    expect(b.port).toBe('80');
    expect(c).not.toBe(d);
    expect(c.x).toBe('a,1:b');
  });

  it('pods of one namespace and node share their PodInfo label sets, and a namespace label change still reaches every pod', () => {
    const state = new ClusterState();
    state.replace(Kinds.Namespace, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'a' } } }]);
    state.replace(Kinds.Pod, [verbosePod('web-1'), { ...verbosePod('web-2'), status: { phase: 'Running', podIP: '10.0.0.8' } }]);
    const [p1, p2] = [state.podByName('shop', 'web-1')!, state.podByName('shop', 'web-2')!];
    expect(p2.namespaceLabels).toBe(p1.namespaceLabels);
    expect(p2.podLabels).toBe(p1.podLabels);
    expect(p2.containerPorts).toBe(p1.containerPorts);
    expect(p1.containerPorts.map((p) => p.port)).toEqual([8080, 15001]);

    state.apply(Kinds.Namespace, { type: 'upsert', object: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'b' } } } });
    expect(state.podByName('shop', 'web-1')!.namespaceLabels.team).toBe('b');
    expect(state.podByName('shop', 'web-2')!.namespaceLabels.team).toBe('b');
  });
});
