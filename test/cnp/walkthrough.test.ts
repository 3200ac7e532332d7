// Walkthrough cases in the manner of Policy Assistant's `analyze --mode
// walkthrough` demo: a pod pair and a port in, the verdict and the chain of
// tiers that produced it out. The same intent is written in both API
// generations, and then both generations are stacked in one pipeline.
import { describe, it, expect } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import { splitWalkthrough, toFlow } from './harness.js';
import { anp, banp, cnp, networkPolicy, portNumber, tcp } from './policies.js';
import { namespace, pod, NODES } from './topology.js';

const ports = [
  { name: 'serve-80-tcp', containerPort: 80, protocol: 'TCP' },
  { name: 'serve-81-tcp', containerPort: 81, protocol: 'TCP' },
];

function demoCluster(): KubeObject[] {
  return [
    namespace('demo'),
    namespace('demo2', { development: 'true' }),
    pod({ namespace: 'demo', name: 'a', labels: { pod: 'a' }, ips: ['10.244.9.10'], nodeName: NODES[1].name, ports }),
    pod({ namespace: 'demo', name: 'b', labels: { pod: 'b' }, ips: ['10.244.9.11'], nodeName: NODES[1].name, ports }),
    pod({ namespace: 'demo2', name: 'nginx', labels: { app: 'nginx' }, ips: ['10.244.9.20'], nodeName: NODES[2].name, ports }),
  ];
}

const everyNamespace = { namespaces: {} };
const denyEverythingToA = networkPolicy('demo', 'deny-anything-to-pod-a', {
  podSelector: { matchLabels: { pod: 'a' } },
  policyTypes: ['Ingress'],
  ingress: [],
});

const v1alpha1 = [
  anp('anp1', 1, everyNamespace, { ingress: [{ name: 'allow-80', action: 'Allow', from: [everyNamespace], ports: [portNumber(80)] }] }),
  anp('anp2', 2, everyNamespace, { ingress: [{ name: 'development-ns', action: 'Pass', from: [{ namespaces: { matchLabels: { development: 'true' } } }] }] }),
  denyEverythingToA,
  banp(everyNamespace, { ingress: [{ name: 'baseline-deny', action: 'Deny', from: [everyNamespace] }] }),
];

const v1alpha2 = [
  cnp('cnp1', 'Admin', 1, everyNamespace, { ingress: [{ name: 'allow-80', action: 'Accept', from: [everyNamespace], protocols: [tcp(80)] }] }),
  cnp('cnp2', 'Admin', 2, everyNamespace, { ingress: [{ name: 'development-ns', action: 'Pass', from: [{ namespaces: { matchLabels: { development: 'true' } } }] }] }),
  denyEverythingToA,
  cnp('default', 'Baseline', 1000, everyNamespace, { ingress: [{ name: 'baseline-deny', action: 'Deny', from: [everyNamespace] }] }),
];

interface Row { src: string; dst: string; port: number; verdict: 'allow' | 'deny'; ingress: RegExp }

async function walk(objects: KubeObject[], rows: Row[]): Promise<void> {
  const results = await evaluateFlows({ objects: [...demoCluster(), ...objects], flows: rows.map((r, i) => toFlow(r, i + 1)) });
  rows.forEach((row, i) => {
    const r = results[i];
    const [egress, ingress] = splitWalkthrough(r.walkthrough);
    expect(r.verdict, r.walkthrough).toBe(row.verdict);
    expect(ingress, r.walkthrough).toMatch(row.ingress);
    // None of these policies has egress rules.
    expect(egress, r.walkthrough).toBe('no stage decided');
  });
}

describe('walkthroughs of the Policy Assistant demo', () => {
  it.each([
    ['v1alpha1 AdminNetworkPolicy / BaselineAdminNetworkPolicy', v1alpha1, 'ANP', 'BANP', 'anp'],
    ['v1alpha2 ClusterNetworkPolicy', v1alpha2, 'CNP:Admin', 'CNP:Baseline', 'cnp'],
  ])('%s: an admin allow, a baseline deny and a Pass ending in a NetworkPolicy drop', async (_, objects, admin, baseline, g) => {
    const a = admin.replace(':', '\\:');
    await walk(objects as KubeObject[], [
      { src: 'demo/a', dst: 'demo/b', port: 80, verdict: 'allow', ingress: new RegExp(`^\\[${a}\\] Accept \\(${g}1, allow-80: namespaces all, port TCP/80\\)$`) },
      { src: 'demo/a', dst: 'demo/b', port: 81, verdict: 'deny', ingress: new RegExp(`^\\[${baseline.replace(':', '\\:')}\\] Deny \\(default, baseline-deny: namespaces all, any port\\)$`) },
      { src: 'demo2/nginx', dst: 'demo/a', port: 81, verdict: 'deny', ingress: new RegExp(`^\\[${a}\\] Pass \\(${g}2, development-ns: namespaces development=true, any port\\) -> \\[NP\\] Deny`) },
      // The admin allow outranks the NetworkPolicy that isolates pod a.
      { src: 'demo2/nginx', dst: 'demo/a', port: 80, verdict: 'allow', ingress: new RegExp(`^\\[${a}\\] Accept \\(${g}1, allow-80: namespaces all, port TCP/80\\)$`) },
      { src: 'demo2/nginx', dst: 'demo/b', port: 81, verdict: 'deny', ingress: new RegExp(`^\\[${a}\\] Pass \\(${g}2, development-ns: namespaces development=true, any port\\) -> \\[${baseline.replace(':', '\\:')}\\] Deny \\(default, baseline-deny: namespaces all, any port\\)$`) },
    ]);
  });

  it('both generations in one pipeline: a CNP Admin Pass reaches the ANP tier, and an ANP Pass reaches the NetworkPolicy', async () => {
    await walk([
      cnp('dev-pass', 'Admin', 5, everyNamespace, { ingress: [{ name: 'development-ns', action: 'Pass', from: [{ namespaces: { matchLabels: { development: 'true' } } }] }] }),
      anp('anp-pass-81', 5, everyNamespace, { ingress: [{ name: 'pass-81', action: 'Pass', from: [everyNamespace], ports: [portNumber(81)] }] }),
      anp('anp-deny-dev', 6, everyNamespace, { ingress: [{ name: 'deny-development', action: 'Deny', from: [{ namespaces: { matchLabels: { development: 'true' } } }] }] }),
      denyEverythingToA,
      cnp('default', 'Baseline', 1000, everyNamespace, { ingress: [{ name: 'baseline-deny', action: 'Deny', from: [everyNamespace] }] }),
    ], [
      { src: 'demo2/nginx', dst: 'demo/b', port: 80, verdict: 'deny', ingress: /^\[CNP:Admin\] Pass \(dev-pass, development-ns: namespaces development=true, any port\) -> \[ANP\] Deny \(anp-deny-dev, deny-development: namespaces development=true, any port\)$/ },
      { src: 'demo2/nginx', dst: 'demo/a', port: 81, verdict: 'deny', ingress: /^\[CNP:Admin\] Pass \(dev-pass, development-ns: namespaces development=true, any port\) -> \[ANP\] Pass \(anp-pass-81, pass-81: namespaces all, port TCP\/81\) -> \[NP\] Deny/ },
      { src: 'demo2/nginx', dst: 'demo/b', port: 81, verdict: 'deny', ingress: /^\[CNP:Admin\] Pass \(dev-pass, development-ns: namespaces development=true, any port\) -> \[ANP\] Pass \(anp-pass-81, pass-81: namespaces all, port TCP\/81\) -> \[CNP:Baseline\] Deny \(default, baseline-deny: namespaces all, any port\)$/ },
      { src: 'demo/a', dst: 'demo/b', port: 80, verdict: 'deny', ingress: /^\[CNP:Baseline\] Deny \(default, baseline-deny: namespaces all, any port\)$/ },
    ]);
  });
});
