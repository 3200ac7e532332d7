// kwp recommend's policies, checked the way a user would: the output written
// out, loaded back as strictly validated manifests, and every observed flow and
// some unobserved ones decided by the real WASM pipeline with it applied.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { loadManifests } from '../sources/manifest-files.js';
import { OfflineEvaluator, priorityTieWarnings, stateFromObjects, type FlowInput } from '../eval.js';
import type { KubeObject } from '../contract.js';
import type { FlowProtocol } from '../flows.js';
import { recordedFlowsFromValues } from './recorded-flows.js';
import { recommendPolicies, type RecommendOptions } from './recommend.js';
import { checkRecommendation } from './recommend-check.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const ns = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
function pod(namespace: string, name: string, labels: Record<string, string>, ips: string[], ports: Array<{ name?: string; containerPort: number; protocol?: string }> = []): KubeObject {
  return {
    apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, labels },
    spec: { containers: [{ name: 'c', ...(ports.length ? { ports } : {}) }] },
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  };
}

const CLUSTER: KubeObject[] = [
  ns('web'), ns('shop'),
  pod('web', 'frontend-7d9f8b6c5d-x2kq9', { 'app.kubernetes.io/name': 'frontend', 'pod-template-hash': '7d9f8b6c5d' }, ['10.244.1.10', 'fd00::10'], [{ name: 'http', containerPort: 8080 }]),
  pod('web', 'debug', { 'app.kubernetes.io/name': 'debug' }, ['10.244.1.30']),
  pod('shop', 'api-5c4b9d7f8-abcde', { 'app.kubernetes.io/name': 'api', 'pod-template-hash': '5c4b9d7f8' }, ['10.244.2.10'], [{ name: 'http', containerPort: 8080 }, { name: 'dns', containerPort: 53, protocol: 'UDP' }]),
  pod('shop', 'api-5c4b9d7f8-fghij', { 'app.kubernetes.io/name': 'api', 'pod-template-hash': '5c4b9d7f8' }, ['10.244.2.11'], [{ name: 'http', containerPort: 8080 }]),
  pod('shop', 'db-0', { 'app.kubernetes.io/name': 'db', 'statefulset.kubernetes.io/pod-name': 'db-0', 'controller-revision-hash': 'db-6b5f7c9d8' }, ['10.244.2.20'], [{ containerPort: 5432 }]),
  pod('shop', 'db-1', { 'app.kubernetes.io/name': 'db', 'statefulset.kubernetes.io/pod-name': 'db-1', 'controller-revision-hash': 'db-6b5f7c9d8' }, ['10.244.2.21'], [{ containerPort: 5432 }]),
];

const OBSERVED = [
  { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080, protocol: 'TCP', count: 41, verdict: 'allow' },
  { src: 'shop/api-5c4b9d7f8-fghij', dst: 'shop/db-0', port: 5432, protocol: 'TCP' },
  { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/api-5c4b9d7f8-fghij', port: 53, protocol: 'UDP' },
  { src: '203.0.113.7', dst: 'web/frontend-7d9f8b6c5d-x2kq9', port: 8080, protocol: 'TCP' },
  { src: '2001:db8::7', dst: 'web/frontend-7d9f8b6c5d-x2kq9', port: 8080, protocol: 'TCP' },
];

/** The recommendation as `kwp apply -f` would get it: YAML text, read back as strictly validated manifests. */
async function roundTrip(objects: KubeObject[], dir: string, file: string): Promise<KubeObject[]> {
  const path = join(dir, file);
  writeFileSync(path, objects.map((o) => stringify(o)).join('---\n'));
  return (await loadManifests([path])).objects;
}

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'kwp-recommend-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function recommend(options: RecommendOptions = {}) {
  return recommendPolicies(stateFromObjects(CLUSTER), recordedFlowsFromValues(OBSERVED, 'observed').flows, options);
}

function verdicts(objects: KubeObject[], flows: FlowInput[]): string[] {
  const ev = new OfflineEvaluator({ objects });
  try {
    return flows.map((f) => `${f.src} -> ${f.dst} ${f.protocol ?? 'TCP'}/${f.port} ${ev.evaluate(f).verdict}`);
  } finally {
    ev.dispose();
  }
}

const UNOBSERVED: FlowInput[] = [
  { src: 'web/debug', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 },
  { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/db-0', port: 5432 },
  { src: 'shop/api-5c4b9d7f8-abcde', dst: 'shop/db-1', port: 5433 },
  { src: '203.0.113.8', dst: 'web/frontend-7d9f8b6c5d-x2kq9', port: 8080 },
  { src: '2001:db8::8', dst: 'web/frontend-7d9f8b6c5d-x2kq9', port: 8080 },
];

describe.each([
  ['NetworkPolicies', {}, 'np.yaml'],
  ['Admin-tier ClusterNetworkPolicies (--cluster)', { cluster: true }, 'cnp.yaml'],
] as const)('recommended %s', (_name, options, file) => {
  let written: KubeObject[];
  beforeAll(async () => { written = await roundTrip(recommend(options).objects, dir, file); });

  it('pass strict validation and allow every observed flow', () => {
    expect(verdicts([...CLUSTER, ...written], OBSERVED.map(({ src, dst, port, protocol }) => ({ src, dst, port, protocol: protocol as FlowProtocol }))).every((v) => v.endsWith(' allow'))).toBe(true);
  });

  it('deny unobserved flows between known pods and from unobserved addresses, which were allowed before', () => {
    expect(verdicts(CLUSTER, UNOBSERVED).every((v) => v.endsWith(' allow'))).toBe(true);
    expect(verdicts([...CLUSTER, ...written], UNOBSERVED).filter((v) => v.endsWith(' allow'))).toEqual([]);
  });

  it('pass their own check: nothing observed stays denied, and the newly denied connections are listed', () => {
    const check = checkRecommendation({ objects: CLUSTER, recommended: written, flows: recordedFlowsFromValues(OBSERVED, 'observed').flows });
    expect(check.notAllowed).toEqual([]);
    expect(check.newlyDenied).toContainEqual({ src: 'web/debug', dst: 'shop/api-5c4b9d7f8-abcde', protocol: 'TCP', port: 8080 });
    expect(check.newlyDenied).not.toContainEqual(expect.objectContaining({ src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 }));
    expect(check.cells).toBe(6 * 6 * 3);
  });
});

describe('recommended NetworkPolicies', () => {
  const byName = (objects: KubeObject[]) => Object.fromEntries(objects.map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o]));

  it('are one per destination workload, selecting it by its labels without the per-pod ones', () => {
    const { objects } = recommend();
    expect(objects.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`)).toEqual([
      'NetworkPolicy shop/api-observed', 'NetworkPolicy shop/db-observed', 'NetworkPolicy web/frontend-observed',
    ]);
    expect(byName(objects)['shop/db-observed'].spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'db' } });
    expect(byName(objects)['shop/api-observed'].spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'api' } });
  });

  it('admit each source workload on the ports it used, by name where the destination declares one, across namespaces by the namespace name', () => {
    const api = byName(recommend().objects)['shop/api-observed'];
    expect(api.spec.ingress).toEqual([{
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'web' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'frontend' } } }],
      ports: [{ protocol: 'TCP', port: 'http' }, { protocol: 'UDP', port: 53 }],
    }]);
    const db = byName(recommend().objects)['shop/db-observed'];
    expect(db.spec.ingress).toEqual([{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } } }], ports: [{ protocol: 'TCP', port: 5432 }] }]);
  });

  it('admit addresses outside the cluster as /32 and /128 blocks', () => {
    const frontend = byName(recommend().objects)['web/frontend-observed'];
    expect(frontend.spec.ingress.map((r: any) => r.from[0].ipBlock.cidr)).toEqual(['2001:db8::7/128', '203.0.113.7/32']);
  });

  it('cover only the destinations of --namespace', () => {
    expect(recommend({ namespace: 'web' }).objects.map((o) => o.metadata.name)).toEqual(['frontend-observed']);
  });

  it('keep app labels only while they alone select just the workload', () => {
    const canary = pod('shop', 'api-canary', { 'app.kubernetes.io/name': 'api', track: 'canary' }, ['10.244.2.12'], [{ name: 'http', containerPort: 8080 }]);
    const state = stateFromObjects([...CLUSTER, canary]);
    const { objects } = recommendPolicies(state, recordedFlowsFromValues([{ src: 'web/debug', dst: 'shop/api-canary', port: 8080 }], 'o').flows);
    expect(objects[0].spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'api', track: 'canary' } });
  });

  it('say which observed flows no policy is written for', () => {
    const { notes } = recommendPolicies(stateFromObjects(CLUSTER), recordedFlowsFromValues([{ src: 'shop/db-0', dst: '198.51.100.1', port: 443 }, OBSERVED[1]], 'o').flows);
    expect(notes).toEqual(['o: flow 1: shop/db-0 -> 198.51.100.1 TCP/443: the destination is no pod of the cluster, so no ingress policy is written for it (egress stays open)']);
  });
});

describe('recommended ClusterNetworkPolicies', () => {
  it('are Admin-tier policies per destination workload: Accept per source workload and port, then Deny from every other pod; addresses in a NetworkPolicy', () => {
    const { objects } = recommend({ cluster: true, priority: 7 });
    expect(objects.map((o) => `${o.kind} ${o.metadata.name}`)).toEqual([
      'ClusterNetworkPolicy shop-api-observed', 'ClusterNetworkPolicy shop-db-observed',
      'ClusterNetworkPolicy web-frontend-observed', 'NetworkPolicy frontend-observed-addresses',
    ]);
    const api = objects[0];
    expect(api.spec).toEqual({
      tier: 'Admin', priority: 7,
      subject: { pods: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } } } },
      ingress: [
        {
          name: 'accept-from-web-frontend', action: 'Accept',
          from: [{ pods: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'web' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'frontend' } } } }],
          protocols: [{ destinationNamedPort: 'http' }, { udp: { destinationPort: { number: 53 } } }],
        },
        { name: 'deny-other-pods', action: 'Deny', from: [{ namespaces: {} }] },
      ],
    });
    expect(objects.slice(0, 3).map((o) => o.spec.priority)).toEqual([7, 8, 9]);
  });
});

interface Run { code: number; stdout: string; stderr: string }
function kwp(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kwp.js', ...args], { cwd: root }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('kwp recommend', () => {
  it('prints YAML documents ready for kubectl apply, and its check on stderr', async () => {
    const r = await kwp(['recommend', '--manifests', 'examples/flows/manifests', '--flows', 'examples/flows/recorded.jsonl']);
    expect(r.code).toBe(0);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJSON());
    expect(docs.map((d) => d.metadata.name)).toEqual(['api-observed', 'db-observed', 'frontend-observed']);
    expect(r.stderr).toContain('# checked: every recorded flow is allowed with the recommendation');
    expect(r.stderr).toMatch(/# of 75 connections between known pods on the recorded ports, \d+ allowed now would be denied:/);
    expect(r.stderr).toContain('#   TCP/5432 to shop/db-0 from shop/db-0, web/debug, web/frontend-7d9f8b6c5d-x2kq9');
  });

  it('prints a v1 List with -o json', async () => {
    const r = await kwp(['recommend', '--manifests', 'examples/flows/manifests', '--flows', 'examples/flows/recorded.jsonl', '--cluster', '-o', 'json']);
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list).toMatchObject({ apiVersion: 'v1', kind: 'List' });
    expect(list.items.map((o: KubeObject) => o.kind)).toEqual(['ClusterNetworkPolicy', 'ClusterNetworkPolicy', 'ClusterNetworkPolicy', 'NetworkPolicy']);
  });

  it('exits 1 when a recorded flow stays denied whatever it writes, naming the policy that denies it', async () => {
    const deny = join(dir, 'deny-from-web.yaml');
    writeFileSync(deny, `apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: { name: deny-from-web }
spec:
  tier: Admin
  priority: 5
  subject: { namespaces: { matchLabels: { kubernetes.io/metadata.name: shop } } }
  ingress:
    - { action: Deny, from: [{ namespaces: { matchLabels: { kubernetes.io/metadata.name: web } } }] }
`);
    const r = await kwp(['recommend', '--manifests', 'examples/flows/manifests', '--manifests', deny, '--flows', 'examples/flows/recorded.jsonl']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('# 2 recorded flow(s) would still be denied');
    expect(r.stderr).toMatch(/web\/debug -> shop\/api-5c4b9d7f8-abcde TCP\/9090  DENY .*\[CNP:Admin\] Deny \(deny-from-web/);
  });

  it('exits 2 for bad input, naming the file and line', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"src":"web/debug","dst":"shop/db-0"}\n');
    const r = await kwp(['recommend', '--manifests', 'examples/flows/manifests', '--flows', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`KWP_ERR_FLOWS: ${bad}: flow 1 (line 1): field "port" is missing`);
  });
});

describe('recommended egress (--egress)', () => {
  const WITH_EXTERNAL = [...OBSERVED, { src: 'shop/api-5c4b9d7f8-abcde', dst: '198.51.100.20', port: 443, protocol: 'TCP' }];
  const observed = () => recordedFlowsFromValues(WITH_EXTERNAL, 'observed').flows;
  const egressOf = (objects: KubeObject[]) => objects.filter((o) => o.spec.policyTypes?.includes('Egress'));

  it('writes one egress NetworkPolicy per source workload: to each destination workload by its labels, to each outside address as a /32, on the ports used', () => {
    const { objects, notes } = recommendPolicies(stateFromObjects(CLUSTER), observed(), { egress: true });
    expect(egressOf(objects).map((o) => `${o.metadata.namespace}/${o.metadata.name}`)).toEqual(['shop/api-egress-observed', 'web/frontend-egress-observed']);
    const api = egressOf(objects)[0];
    expect(api.spec).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } },
      policyTypes: ['Egress'],
      egress: [
        { to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'db' } } }], ports: [{ protocol: 'TCP', port: 5432 }] },
        { to: [{ ipBlock: { cidr: '198.51.100.20/32' } }], ports: [{ protocol: 'TCP', port: 443 }] },
      ],
    });
    expect(egressOf(objects)[1].spec.egress).toEqual([{
      to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } } }],
      ports: [{ protocol: 'TCP', port: 'http' }, { protocol: 'UDP', port: 53 }],
    }]);
    expect(notes.join('\n')).not.toContain('198.51.100.20');
    // Without the flag: ingress only, and the outside destination is a note.
    const ingressOnly = recommendPolicies(stateFromObjects(CLUSTER), observed());
    expect(egressOf(ingressOnly.objects)).toEqual([]);
    expect(ingressOnly.notes.join('\n')).toContain('198.51.100.20');
  });

  it('allow every observed flow and deny what the workloads did not send, checked on the WASM pipeline', async () => {
    const written = await roundTrip(recommendPolicies(stateFromObjects(CLUSTER), observed(), { egress: true }).objects, dir, 'egress.yaml');
    const check = checkRecommendation({ objects: CLUSTER, recommended: written, flows: observed() });
    expect(check.notAllowed).toEqual([]);
    const unobservedEgress: FlowInput[] = [
      { src: 'shop/api-5c4b9d7f8-abcde', dst: '198.51.100.21', port: 443 },
      { src: 'shop/api-5c4b9d7f8-abcde', dst: '198.51.100.20', port: 80 },
      { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: '198.51.100.20', port: 443 },
    ];
    expect(verdicts(CLUSTER, unobservedEgress).every((v) => v.endsWith(' allow'))).toBe(true);
    expect(verdicts([...CLUSTER, ...written], unobservedEgress).filter((v) => v.endsWith(' allow'))).toEqual([]);
  });
});

describe('recommendations found wanting by the random tests (recommend-random.test.ts)', () => {
  const stable = pod('shop', 'queue-7c6d5b4a39-aaaaa', { app: 'queue', 'pod-template-hash': '7c6d5b4a39' }, ['10.244.3.10'], [{ containerPort: 4789, protocol: 'UDP' }]);
  const canary = pod('shop', 'queue-5b4a397c6d-bbbbb', { app: 'queue', track: 'canary', 'pod-template-hash': '5b4a397c6d' }, ['10.244.3.11'], [{ containerPort: 4789, protocol: 'UDP' }]);
  const flowsOf = (values: unknown[]) => recordedFlowsFromValues(values, 'observed').flows;

  it.each([['NetworkPolicies', {}], ['ClusterNetworkPolicies', { cluster: true }]] as const)(
    'select a workload whose labels its canary sibling shares with the sibling\'s extra label required absent, so neither gets the other\'s sources (%s)',
    async (_name, options) => {
      const cluster = [...CLUSTER, stable, canary];
      const observed = [
        { src: 'web/debug', dst: 'shop/queue-7c6d5b4a39-aaaaa', port: 4789, protocol: 'UDP' },
        { src: 'shop/api-5c4b9d7f8-abcde', dst: 'shop/queue-5b4a397c6d-bbbbb', port: 4789, protocol: 'UDP' },
      ];
      const { objects } = recommendPolicies(stateFromObjects(cluster), flowsOf(observed), options);
      const written = await roundTrip(objects, dir, `canary-${_name}.yaml`);
      const selectors = written.map((o) => o.spec.podSelector ?? o.spec.subject.pods.podSelector);
      expect(selectors).toContainEqual({ matchLabels: { app: 'queue' }, matchExpressions: [{ key: 'track', operator: 'DoesNotExist' }] });
      expect(verdicts([...cluster, ...written], observed as FlowInput[]).filter((v) => !v.endsWith(' allow'))).toEqual([]);
      // Each source reaches the workload it was seen at, not its sibling.
      expect(verdicts([...cluster, ...written], [
        { src: 'web/debug', dst: 'shop/queue-5b4a397c6d-bbbbb', port: 4789, protocol: 'UDP' },
        { src: 'shop/api-5c4b9d7f8-abcde', dst: 'shop/queue-7c6d5b4a39-aaaaa', port: 4789, protocol: 'UDP' },
      ]).filter((v) => v.endsWith(' allow'))).toEqual([]);
    },
  );

  it('write a port by number when the replicas of the workload name it differently, so the flows to every replica are allowed', async () => {
    const a = pod('shop', 'cache-6f5e4d3c2b-aaaaa', { app: 'cache', 'pod-template-hash': '6f5e4d3c2b' }, ['10.244.4.10'], [{ name: 'redis', containerPort: 6379 }]);
    const b = pod('shop', 'cache-6f5e4d3c2b-bbbbb', { app: 'cache', 'pod-template-hash': '6f5e4d3c2b' }, ['10.244.4.11'], [{ name: 'redis-tls', containerPort: 6379 }]);
    const observed = [
      { src: 'web/debug', dst: 'shop/cache-6f5e4d3c2b-aaaaa', port: 6379 },
      { src: 'web/debug', dst: 'shop/cache-6f5e4d3c2b-bbbbb', port: 6379 },
    ];
    const cluster = [...CLUSTER, a, b];
    for (const options of [{}, { cluster: true }]) {
      const written = await roundTrip(recommendPolicies(stateFromObjects(cluster), flowsOf(observed), options).objects, dir, 'renamed.yaml');
      const cache = written.find((o) => o.metadata.name.includes('cache'))!;
      expect(JSON.stringify(cache.spec)).not.toContain('redis');
      expect(verdicts([...cluster, ...written], observed)).toEqual(observed.map((f) => `${f.src} -> ${f.dst} TCP/6379 allow`));
    }
  });

  it('with --cluster, admit a pod\'s traffic to its own address in the NetworkPolicy beside the cluster policy, since no ClusterNetworkPolicy governs it', async () => {
    const observed = [
      { src: '10.244.2.10', dst: '10.244.2.10', port: 8080 },
      { src: '203.0.113.7', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 },
    ];
    const written = await roundTrip(recommendPolicies(stateFromObjects(CLUSTER), flowsOf(observed), { cluster: true }).objects, dir, 'self.yaml');
    const beside = written.find((o) => o.kind === 'NetworkPolicy')!;
    expect(beside.spec.ingress).toContainEqual({ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } } }], ports: [{ protocol: 'TCP', port: 'http' }] });
    expect(verdicts([...CLUSTER, ...written], observed).filter((v) => !v.endsWith(' allow'))).toEqual([]);
    // Another replica of the workload is still judged at the Admin tier, where nothing admitted it.
    expect(verdicts([...CLUSTER, ...written], [{ src: 'shop/api-5c4b9d7f8-fghij', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 }])[0]).toMatch(/ deny$/);
  });
});

describe('the check of a recommendation in a cluster of mixed IP families', () => {
  it('decides only the pairs of known pods that share a family, so IPv6-only pods beside IPv4-only ones do not fail it', () => {
    const v6 = pod('shop', 'ledger-0', { 'app.kubernetes.io/name': 'ledger' }, ['fd00::40'], [{ containerPort: 7000 }]);
    const cluster = [...CLUSTER, v6];
    const observed = recordedFlowsFromValues([{ src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/ledger-0', port: 7000 }], 'observed').flows;
    const { objects } = recommendPolicies(stateFromObjects(cluster), observed);
    const check = checkRecommendation({ objects: cluster, recommended: objects, flows: observed });
    expect(check.notAllowed).toEqual([]);
    // 7 pods: the six IPv4 ones pair with each other; the IPv6-only one with itself and the dual-stack frontend, both ways.
    expect(check.cells).toBe(6 * 6 + 3);
    expect(check.newlyDenied).toEqual([{ src: 'shop/ledger-0', dst: 'shop/ledger-0', protocol: 'TCP', port: 7000 }]);
  });
});

describe('recommended ClusterNetworkPolicies beside Admin-tier policies of the cluster', () => {
  it('skip the priorities those policies hold, so none of them ties with the recommendation', () => {
    const held = [100, 102].map((priority): KubeObject => ({
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: `held-${priority}` },
      spec: { tier: 'Admin', priority, subject: { namespaces: {} }, ingress: [{ name: 'pass-web', action: 'Pass', from: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'web' } } }] }] },
    }));
    const cluster = [...CLUSTER, ...held];
    const { objects } = recommendPolicies(stateFromObjects(cluster), recordedFlowsFromValues(OBSERVED, 'observed').flows, { cluster: true });
    expect(objects.filter((o) => o.kind === 'ClusterNetworkPolicy').map((o) => o.spec.priority)).toEqual([101, 103, 104]);
    expect(priorityTieWarnings([...cluster, ...objects])).toEqual([]);
  });
});

describe('recommended ClusterNetworkPolicies below an Admin-tier Pass', () => {
  it('admit the observed pod sources in the NetworkPolicy beside them too, since the Pass hands their traffic to the NetworkPolicies that policy isolates', async () => {
    const pass: KubeObject = {
      apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name: 'pass-web' },
      spec: { tier: 'Admin', priority: 5, subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } }, ingress: [{ name: 'pass-web', action: 'Pass', from: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'web' } } }] }] },
    };
    const cluster = [...CLUSTER, pass];
    const observed = [
      { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 },
      { src: '203.0.113.7', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 },
    ];
    const written = await roundTrip(recommendPolicies(stateFromObjects(cluster), recordedFlowsFromValues(observed, 'observed').flows, { cluster: true }).objects, dir, 'pass.yaml');
    expect(verdicts([...cluster, ...written], observed).filter((v) => !v.endsWith(' allow'))).toEqual([]);
    // The Pass hands web/debug down as well; the NetworkPolicy admits only what was observed.
    expect(verdicts([...cluster, ...written], [{ src: 'web/debug', dst: 'shop/api-5c4b9d7f8-abcde', port: 8080 }, { src: 'web/frontend-7d9f8b6c5d-x2kq9', dst: 'shop/api-5c4b9d7f8-abcde', port: 9090 }])).toEqual([
      'web/debug -> shop/api-5c4b9d7f8-abcde TCP/8080 deny', 'web/frontend-7d9f8b6c5d-x2kq9 -> shop/api-5c4b9d7f8-abcde TCP/9090 deny',
    ]);
  });
});
