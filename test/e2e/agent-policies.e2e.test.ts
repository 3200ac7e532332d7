import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../../host/contract.js';
import { Lab, sweepStaleLabs, type LabFlow } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { applyPolicies, measureAgainst, mismatches, predict, replaceYaml, verdictOf } from './agent-lab.js';

// `kwp agent --manifests DIR` (compiled, from dist/) in a lab's node namespace,
// one lab and one agent for every policy set: the suite rewrites the policy
// file, waits for the agent's reload, and measures real TCP and UDP between
// five pods in three namespaces. Every measured flow must be what `kwp eval`
// predicts from the same objects, and each set names a few witness flows that
// show the feature it is about decides something.

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;
let policyFile: string;

const np = (namespace: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace },
  spec,
});

const nsName = (name: string) => ({ matchLabels: { 'kubernetes.io/metadata.name': name } });

const tcp = (src: string, dst: string, port: number): LabFlow => ({ src, dst, protocol: 'TCP', port });
const udp = (src: string, dst: string, port: number): LabFlow => ({ src, dst, protocol: 'UDP', port });

interface PolicySet {
  name: string;
  policies: () => KubeObject[];
  /** Flows whose prediction shows the feature decides: each must come out as written. */
  witnesses: Array<[LabFlow, 'allow' | 'deny']>;
}

const sets: PolicySet[] = [
  {
    name: 'default deny (ingress and egress in x, ingress in y)',
    policies: () => [
      np('x', 'default-deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }),
      np('y', 'default-deny-ingress', { podSelector: {}, policyTypes: ['Ingress'] }),
    ],
    witnesses: [
      [tcp('z/client', 'x/web', 80), 'deny'],
      [udp('z/client', 'x/web', 5353), 'deny'],
      [tcp('x/web', 'x/db', 80), 'deny'],
      [tcp('x/web', 'z/client', 80), 'deny'],
      [tcp('z/client', 'y/api', 80), 'deny'],
      [tcp('y/api', 'z/client', 80), 'allow'],
      [udp('y/web', 'z/client', 5353), 'allow'],
    ],
  },
  {
    name: 'namespace selectors (matchLabels on ingress, matchExpressions on egress)',
    policies: () => [
      np('x', 'from-blue', { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'blue' } } }] }] }),
      np('z', 'egress-to-red', {
        podSelector: {},
        policyTypes: ['Egress'],
        egress: [{ to: [{ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['red'] }] } }] }],
      }),
    ],
    witnesses: [
      [tcp('x/db', 'x/web', 80), 'allow'],
      [tcp('y/api', 'x/web', 80), 'deny'],
      [udp('y/web', 'x/db', 5353), 'deny'],
      [tcp('z/client', 'x/web', 80), 'deny'],
      [tcp('z/client', 'y/api', 80), 'allow'],
    ],
  },
  {
    name: 'pod selectors (same namespace, and with a namespace selector)',
    policies: () => [
      np('x', 'db-from-web', { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }] }),
      np('y', 'api-from-any-web', {
        podSelector: { matchLabels: { app: 'api' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'web' } } }] }],
      }),
    ],
    witnesses: [
      [tcp('x/web', 'x/db', 5432), 'allow'],
      [tcp('y/web', 'x/db', 5432), 'deny'],
      [tcp('z/client', 'x/db', 80), 'deny'],
      [tcp('x/web', 'y/api', 80), 'allow'],
      [udp('y/web', 'y/api', 5353), 'allow'],
      [tcp('z/client', 'y/api', 80), 'deny'],
      [tcp('z/client', 'x/web', 80), 'allow'],
    ],
  },
  {
    name: 'named ports (ingress TCP and UDP, egress resolved on the destination)',
    policies: () => [
      np('x', 'db-postgres-only', { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'], ingress: [{ ports: [{ port: 'tcp-5432' }] }] }),
      np('x', 'web-alt-and-dns', {
        podSelector: { matchLabels: { app: 'web' } },
        policyTypes: ['Ingress'],
        ingress: [{ ports: [{ protocol: 'TCP', port: 'tcp-8080' }, { protocol: 'UDP', port: 'udp-5353' }] }],
      }),
      np('z', 'client-to-alt-port', { podSelector: {}, policyTypes: ['Egress'], egress: [{ ports: [{ protocol: 'TCP', port: 'tcp-8080' }] }] }),
    ],
    witnesses: [
      [tcp('y/api', 'x/db', 5432), 'allow'],
      [tcp('y/api', 'x/db', 80), 'deny'],
      [udp('y/api', 'x/db', 5353), 'deny'],
      [tcp('x/db', 'x/web', 8080), 'allow'],
      [tcp('x/db', 'x/web', 80), 'deny'],
      [udp('x/db', 'x/web', 5353), 'allow'],
      [tcp('z/client', 'x/web', 8080), 'allow'],
      [tcp('z/client', 'y/api', 80), 'deny'],
    ],
  },
  {
    name: 'ipBlock with except (ingress into x, egress from y/web)',
    policies: () => {
      const api = lab.pod('y/api').ip;
      const [webIp, dbIp] = [lab.pod('x/web').ip, lab.pod('x/db').ip];
      // The lab numbers pods consecutively from .2, so x/web and x/db form an aligned /31.
      if (Number(dbIp.split('.')[3]) !== Number(webIp.split('.')[3]) + 1 || Number(webIp.split('.')[3]) % 2 !== 0) throw new Error(`x/web ${webIp} and x/db ${dbIp} are not an aligned /31`);
      return [
        np('x', 'from-pod-network-but-api', {
          podSelector: {},
          policyTypes: ['Ingress'],
          ingress: [{ from: [{ ipBlock: { cidr: '10.244.1.0/24', except: [`${api}/32`] } }] }],
        }),
        np('y', 'web-egress-to-x-block', {
          podSelector: { matchLabels: { app: 'web' } },
          policyTypes: ['Egress'],
          egress: [{ to: [{ ipBlock: { cidr: `${webIp}/31` } }] }],
        }),
      ];
    },
    witnesses: [
      [tcp('y/api', 'x/web', 80), 'deny'],
      [udp('y/api', 'x/db', 5353), 'deny'],
      [tcp('z/client', 'x/db', 5432), 'allow'],
      [tcp('y/web', 'x/web', 8080), 'allow'],
      [tcp('y/web', 'z/client', 80), 'deny'],
      [tcp('y/web', 'y/api', 80), 'deny'],
    ],
  },
  {
    name: 'an Admin-tier ClusterNetworkPolicy Deny over a NetworkPolicy Accept',
    policies: () => [
      np('x', 'allow-all-ingress', { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] }),
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: 'z-may-not-reach-x' },
        spec: {
          tier: 'Admin',
          priority: 5,
          subject: { namespaces: nsName('x') },
          ingress: [{ name: 'deny-from-z', action: 'Deny', from: [{ namespaces: nsName('z') }] }],
        },
      },
    ],
    witnesses: [
      [tcp('z/client', 'x/web', 80), 'deny'],
      [udp('z/client', 'x/db', 5353), 'deny'],
      [tcp('y/api', 'x/web', 80), 'allow'],
      [tcp('z/client', 'y/api', 80), 'allow'],
    ],
  },
  {
    name: 'a Baseline-tier ClusterNetworkPolicy default deny that a NetworkPolicy refines',
    policies: () => [
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: 'baseline-deny-ingress' },
        spec: { tier: 'Baseline', priority: 100, subject: { namespaces: {} }, ingress: [{ name: 'deny-all', action: 'Deny', from: [{ namespaces: {} }] }] },
      },
      np('x', 'web-from-red', { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'red' } } }] }] }),
    ],
    witnesses: [
      [tcp('y/api', 'x/web', 80), 'allow'],
      [udp('y/web', 'x/web', 5353), 'allow'],
      [tcp('z/client', 'x/web', 80), 'deny'],
      [tcp('y/api', 'x/db', 80), 'deny'],
      [tcp('x/web', 'z/client', 80), 'deny'],
    ],
  },
  {
    name: 'a BaselineAdminNetworkPolicy deny that a NetworkPolicy refines',
    policies: () => [
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha1',
        kind: 'BaselineAdminNetworkPolicy',
        metadata: { name: 'default' },
        spec: { subject: { namespaces: {} }, ingress: [{ name: 'deny-from-z', action: 'Deny', from: [{ namespaces: nsName('z') }] }] },
      },
      np('y', 'api-from-z', { podSelector: { matchLabels: { app: 'api' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsName('z') }] }] }),
    ],
    witnesses: [
      [tcp('z/client', 'y/api', 80), 'allow'],
      [tcp('z/client', 'y/web', 80), 'deny'],
      [tcp('z/client', 'x/web', 8080), 'deny'],
      [tcp('x/web', 'y/api', 80), 'deny'],
      [tcp('x/web', 'y/web', 80), 'allow'],
    ],
  },
];

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'web', namespace: 'x', labels: { app: 'web' }, tcpPorts: [80, 8080] },
      { name: 'db', namespace: 'x', labels: { app: 'db' }, tcpPorts: [80, 5432] },
      { name: 'api', namespace: 'y', labels: { app: 'api' } },
      { name: 'web', namespace: 'y', labels: { app: 'web' } },
      { name: 'client', namespace: 'z', labels: { app: 'client' } },
    ],
    namespaceLabels: { x: { team: 'blue' }, y: { team: 'red' }, z: { team: 'blue' } },
  });
  dir = mkdtempSync(join(tmpdir(), 'kwp-agent-policies-'));
  policyFile = join(dir, 'policies.yaml');
  await lab.writeManifests(dir);
  await replaceYaml(policyFile, sets[0].policies());
  agent = await startKwpAgent(lab, { manifests: [dir] });
  console.log(`kwp agent running, dataplane queue mode: ${agent.queueMode}`);
});

afterAll(async () => {
  await agent?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kwp agent --manifests enforces what kwp eval predicts, on real TCP and UDP', () => {
  it.each(sets.map((set, index) => [set.name, index] as const))('%s', async (name, index) => {
    const set = sets[index];
    const policies = set.policies();
    // The first set is already loaded: the agent started with it.
    if (index > 0) await applyPolicies(agent!, policyFile, policies);
    const predicted = await predict(lab, [...lab.manifests(), ...policies]);
    for (const [flow, verdict] of set.witnesses) {
      expect(`${flow.src} -> ${flow.dst} ${flow.protocol}/${flow.port}: ${verdictOf(predicted, flow)}`).toBe(`${flow.src} -> ${flow.dst} ${flow.protocol}/${flow.port}: ${verdict}`);
    }
    const rows = await measureAgainst(lab, `${name} [queue mode ${agent!.queueMode}]`, predicted);
    expect(rows.some((r) => r.predicted === 'deny')).toBe(true);
    expect(rows.some((r) => r.predicted === 'allow')).toBe(true);
    expect(mismatches(rows)).toEqual([]);
  });
});
