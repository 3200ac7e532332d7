import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadManifests } from '../sources/manifest-files.js';

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'kwp-validate-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NAMESPACE = 'apiVersion: v1\nkind: Namespace\nmetadata: { name: x }\n';
const POLICY = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: deny, namespace: x }
spec:
  podSelector: { matchLabels: { app: web } }
  policyTypes: [Ingress]
  ingress:
    - from: [{ ipBlock: { cidr: 10.0.0.0/8 } }, { namespaceSelector: { matchExpressions: [{ key: team, operator: In, values: [a] }] } }]
      ports: [{ protocol: TCP, port: 80 }]
`;

let n = 0;
async function load(yaml: string, options = {}): Promise<string> {
  const file = join(dir, `case-${++n}.yaml`);
  writeFileSync(file, `${NAMESPACE}---\n${yaml}`);
  try {
    await loadManifests([file], options);
    return 'loaded';
  } catch (err) {
    return (err as Error).message.replaceAll(file, 'FILE');
  }
}

describe('strict validation of manifests', () => {
  it('loads a valid NetworkPolicy', async () => {
    expect(await load(POLICY)).toBe('loaded');
  });

  it.each([
    ['kind NetworkPolcy', POLICY.replace('kind: NetworkPolicy', 'kind: NetworkPolcy'),
      'FILE: document 2 (NetworkPolcy x/deny): unknown kind "NetworkPolcy" in apiVersion "networking.k8s.io/v1"; did you mean "NetworkPolicy" (apiVersion "networking.k8s.io/v1")?'],
    ['apiVersion networking.k8s.io/v2', POLICY.replace('networking.k8s.io/v1', 'networking.k8s.io/v2'),
      'FILE: document 2 (NetworkPolicy x/deny): apiVersion "networking.k8s.io/v2" has no kind NetworkPolicy; NetworkPolicy is served as apiVersion "networking.k8s.io/v1"'],
    ['podSelectr', POLICY.replace('podSelector: { matchLabels', 'podSelectr: { matchLabels'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.podSelectr: unknown field "podSelectr"; did you mean "podSelector"?\n' +
      'FILE: document 2 (NetworkPolicy x/deny): spec.podSelector: required field missing; write "podSelector: {}" to select every pod in the namespace'],
    ['policyTypes [Ingres]', POLICY.replace('[Ingress]', '[Ingres]'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.policyTypes[0]: "Ingres" is not one of Ingress, Egress; did you mean "Ingress"?'],
    ['matchLabel', POLICY.replace('{ matchLabels: { app', '{ matchLabel: { app'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.podSelector.matchLabel: unknown field "matchLabel"; did you mean "matchLabels"?'],
    ['port 70000', POLICY.replace('port: 80', 'port: 70000'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.ingress[0].ports[0].port: 70000 is out of range; write a value 1-65535'],
    ['CIDR /99', POLICY.replace('10.0.0.0/8', '10.0.0.0/99'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.ingress[0].from[0].ipBlock.cidr: "10.0.0.0/99" is not a valid cidr; write an address and a prefix length such as 10.0.0.0/24 or fd00::/64 (prefix 0-32 for IPv4, 0-128 for IPv6)'],
    ['operator Frobnicate', POLICY.replace('operator: In', 'operator: Frobnicate'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.ingress[0].from[1].namespaceSelector.matchExpressions[0].operator: "Frobnicate" is not one of In, NotIn, Exists, DoesNotExist'],
    ['protocol tcp', POLICY.replace('protocol: TCP', 'protocol: tcp'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.ingress[0].ports[0].protocol: "tcp" is not one of TCP, UDP, SCTP; did you mean "TCP"?'],
    ['ipBlock with a selector', POLICY.replace('{ ipBlock: { cidr: 10.0.0.0/8 } }', '{ ipBlock: { cidr: 10.0.0.0/8 }, podSelector: {} }'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.ingress[0].from[0]: ipBlock cannot be combined with podSelector; write them as separate peers'],
    ['a label value that is a number', POLICY.replace('{ app: web }', '{ app: 7 }'),
      'FILE: document 2 (NetworkPolicy x/deny): spec.podSelector.matchLabels.app: must be a string, not the number 7'],
  ])('refuses %s, naming the file, document, field and what to write', async (_name, yaml, message) => {
    expect(await load(yaml)).toBe(message);
  });

  it('lists the problems of every document in one error', async () => {
    const two = `${POLICY.replace('[Ingress]', '[Ingres]')}---\n${POLICY.replace('name: deny', 'name: other').replace('port: 80', 'port: 0')}`;
    expect((await load(two)).split('\n')).toEqual([
      'FILE: document 2 (NetworkPolicy x/deny): spec.policyTypes[0]: "Ingres" is not one of Ingress, Egress; did you mean "Ingress"?',
      'FILE: document 3 (NetworkPolicy x/other): spec.ingress[0].ports[0].port: 0 is out of range; write a value 1-65535',
    ]);
  });

  const CNP = `apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: { name: guard }
spec:
  tier: Admin
  priority: 10
  subject: { namespaces: {} }
  ingress:
    - action: Deny
      from: [{ namespaces: { matchLabels: { team: z } } }]
      protocols: [{ tcp: { destinationPort: { range: { start: 80, end: 90 } } } }]
`;

  it('checks the network-policy-api limits: priority range, tiers, actions, one field per peer, ranges', async () => {
    expect(await load(CNP)).toBe('loaded');
    expect(await load(CNP.replace('priority: 10', 'priority: 1001'))).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.priority: 1001 is out of range; write a value 0-1000');
    expect(await load(CNP.replace('tier: Admin', 'tier: Admn'))).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.tier: "Admn" is not one of Admin, Baseline; did you mean "Admin"?');
    expect(await load(CNP.replace('action: Deny', 'action: Allow'))).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.ingress[0].action: "Allow" is not one of Accept, Deny, Pass');
    expect(await load(CNP.replace('{ namespaces: { matchLabels: { team: z } } }', '{ namespaces: {}, pods: { namespaceSelector: {}, podSelector: {} } }'))).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.ingress[0].from[0]: set exactly one of namespaces, pods (found namespaces, pods)');
    expect(await load(CNP.replace('end: 90', 'end: 70'))).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.ingress[0].protocols[0].tcp.destinationPort.range.end: 70 must be greater than the start of the range (80)');
  });

  it('refuses more rules than the CRD allows', async () => {
    const rule = '    - action: Deny\n      from: [{ namespaces: {} }]\n';
    const many = CNP.replace(/  ingress:\n[\s\S]*$/, `  ingress:\n${rule.repeat(26)}`);
    expect(await load(many)).toBe(
      'FILE: document 2 (ClusterNetworkPolicy guard): spec.ingress: has 26 entries; at most 25 are allowed, split it into more rules or policies');
  });

  it('holds AdminNetworkPolicy and BaselineAdminNetworkPolicy to their own CRDs', async () => {
    const anp = `apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: { name: a }
spec:
  priority: 5
  subject: { namespaces: {} }
  egress:
    - action: Allow
      to: [{ networks: [10.0.0.0/8] }]
      ports: [{ portNumber: { protocol: UDP, port: 53 } }]
`;
    expect(await load(anp)).toBe('loaded');
    expect(await load(anp.replace('action: Allow', 'action: Accept'))).toBe(
      'FILE: document 2 (AdminNetworkPolicy a): spec.egress[0].action: "Accept" is not one of Allow, Deny, Pass');
    const banp = anp.replace('AdminNetworkPolicy', 'BaselineAdminNetworkPolicy').replace('  priority: 5\n', '');
    expect(await load(banp)).toBe(
      'FILE: document 2 (BaselineAdminNetworkPolicy a): metadata.name: must be "default", not "a"');
    expect(await load(banp.replace('name: a', 'name: default').replace('action: Allow', 'action: Pass'))).toBe(
      'FILE: document 2 (BaselineAdminNetworkPolicy default): spec.egress[0].action: "Pass" is not one of Allow, Deny');
  });

  it('refuses unknown fields of a Pod the agent reads, and keeps the fields it does not read', async () => {
    const pod = `apiVersion: v1
kind: Pod
metadata: { name: p, namespace: x }
spec:
  nodeName: n1
  containers: [{ name: c, image: nginx, resources: { limits: { cpu: 1 } }, ports: [{ name: http, containerPort: 80 }] }]
status: { podIP: 10.0.0.1, conditions: [] }
`;
    expect(await load(pod)).toBe('loaded');
    expect(await load(pod.replace('nodeName', 'nodeNme'))).toBe(
      'FILE: document 2 (Pod x/p): spec.nodeNme: unknown field "nodeNme"; did you mean "nodeName"?');
    expect(await load(pod.replace('containerPort: 80', 'containerPort: 80, protocol: HTTP'))).toBe(
      'FILE: document 2 (Pod x/p): spec.containers[0].ports[0].protocol: "HTTP" is not one of TCP, UDP, SCTP');
    expect(await load(pod.replace('podIP: 10.0.0.1', 'podIP: 10.0.0.300'))).toBe(
      'FILE: document 2 (Pod x/p): status.podIP: "10.0.0.300" is not a valid ip; write an IPv4 or IPv6 address such as 10.0.0.1 or fd00::1');
  });

  it('knows a custom kind from its CustomResourceDefinition among the manifests and checks it against the CRD schema', async () => {
    const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: windows.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { plural: windows, singular: window, kind: Window }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, properties: { start: { type: string } } }
`;
    const window = 'apiVersion: example.com/v1\nkind: Window\nmetadata: { name: w, namespace: x }\nspec: { start: "02:00" }\n';
    expect(await load(window)).toMatch(/unknown kind "Window" \(apiVersion "example.com\/v1"\): it is no built-in kind and no CustomResourceDefinition among the manifests defines it/);
    expect(await load(`${crd}---\n${window}`)).toBe('loaded');
    expect(await load(`${crd}---\n${window.replace('start:', 'begin:')}`)).toBe(
      'FILE: document 3 (Window x/w): spec.begin: unknown field "begin"; the fields here are start');
    expect(await load(window, { kinds: ['example.com/v1/Window'] })).toBe('loaded');
  });

  it('skips kwp configuration and standard kinds no evaluator reads, saying so', async () => {
    const file = join(dir, 'mixed.yaml');
    writeFileSync(file, 'apiVersion: kwp.io/v1\nkind: Pipeline\nstages: []\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: { name: web, namespace: x }\nspec: {}\n');
    const { objects, warnings } = await loadManifests([file]);
    expect(objects).toEqual([]);
    expect(warnings).toEqual([
      `${file}: document 2: Deployment x/web skipped: kwp reads the pods a workload runs, not the workload: list those Pods (with status.podIPs) to evaluate traffic to them`,
      `${file}: document 1: Pipeline (kwp.io/v1) configures kwp and is not a cluster object; skipped (give a pipeline file with --pipeline)`,
    ]);
  });
});
