import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows, type FlowResult } from '../../host/eval.js';
import { fastPathSetNames } from '../../host/dataplane/fast-path-rules.js';
import { Lab, OUTSIDE, sweepStaleLabs, type HeldConnection } from '../lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../lab/kwp-agent.js';
import { applyPolicies, firstProbe, replaceYaml, sleep, REFRESH_SETTLE_MS } from './agent-lab.js';

// kube-proxy-style Services in the netns lab (iptables nat in the node
// namespace: ClusterIP DNAT with random balancing over the endpoints, the
// hairpin SNAT to 169.254.1.1, a NodePort reached from an outside host), with
// `kwp agent` enforcing. Real connections through the Services must come out
// as `kwp eval` decides the same flows per endpoint.

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;
let manifests: string;
let policyFile: string;
let tokenFile: string;
const held: HeldConnection[] = [];

const np = (namespace: string, name: string, spec: Record<string, unknown>): KubeObject => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace }, spec });
const nsSel = (name: string) => ({ matchLabels: { 'kubernetes.io/metadata.name': name } });
const denyShop = {
  ingress: [{ name: 'deny-from-shop', action: 'Deny', from: [{ namespaces: nsSel('shop') }] }],
  egress: [{ name: 'deny-to-shop', action: 'Deny', to: [{ namespaces: nsSel('shop') }] }],
};
const cnp = (name: string, tier: 'Admin' | 'Baseline'): KubeObject => ({
  apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name }, spec: { tier, priority: 10, subject: { namespaces: nsSel('shop') }, ...denyShop },
});
const anp = (kind: 'AdminNetworkPolicy' | 'BaselineAdminNetworkPolicy'): KubeObject => ({
  apiVersion: 'policy.networking.k8s.io/v1alpha1', kind, metadata: { name: kind === 'AdminNetworkPolicy' ? 'deny-shop' : 'default' },
  spec: { ...(kind === 'AdminNetworkPolicy' ? { priority: 10 } : {}), subject: { namespaces: nsSel('shop') }, ...denyShop },
});

/** Green web pods take nothing; blue ones only what comes from namespace front. */
const labelPolicies = (): KubeObject[] => [
  np('shop', 'green-isolated', { podSelector: { matchLabels: { team: 'green' } }, policyTypes: ['Ingress'] }),
  np('shop', 'blue-from-front', { podSelector: { matchLabels: { team: 'blue' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsSel('front') }] }] }),
];

/** `kwp eval --output json` on the agent's own manifest directory. */
async function kwpEval(flows: Array<Record<string, unknown>>): Promise<FlowResult[]> {
  const flowsFile = join(dir, 'flows.json');
  writeFileSync(flowsFile, JSON.stringify(flows));
  const { stdout } = await run(process.execPath, [join(root, 'bin', 'kwp.js'), 'eval', '--manifests', manifests, '--flows', flowsFile, '--output', 'json']);
  return JSON.parse(stdout) as FlowResult[];
}

/** `kwp explain ARGS --output json` against the agent's admin API, from inside the node namespace. */
async function kwpExplain(args: string[]): Promise<{ verdict: string; walkthrough: string; notes: string[]; endpoints?: Array<{ endpoint: string; port: number; verdict: string }> }> {
  const { stdout } = await lab.execInNode(process.execPath, [join(root, 'bin', 'kwp.js'), 'explain', ...args, '--output', 'json', `--token-file=${tokenFile}`]);
  return JSON.parse(stdout);
}

/** The entries of the kernel fast path's IPv4 set of `verdict` (the agent's default table), as `SRC,tcp:PORT,DST` with their packet counts. */
async function fastPathEntries(verdict: 'accept' | 'deny'): Promise<Map<string, number>> {
  const set = fastPathSetNames('kube-wasm-policies', 'xtables')[verdict === 'accept' ? 'accept4' : 'deny4'];
  const { stdout } = await lab.execInNode('ipset', ['list', set, '-o', 'save']);
  const entries = new Map<string, number>();
  for (const line of stdout.split('\n')) {
    const m = new RegExp(`^add ${set} (\\S+) .*packets (\\d+)`).exec(line);
    if (m) entries.set(m[1], Number(m[2]));
  }
  return entries;
}

async function untilEntry(verdict: 'accept' | 'deny', entry: string): Promise<number> {
  const by = Date.now() + 10_000;
  for (;;) {
    const packets = (await fastPathEntries(verdict)).get(entry);
    if (packets !== undefined) return packets;
    if (Date.now() > by) throw new Error(`no ${entry} in the fast path's ${verdict} set within 10 s`);
    await sleep(50);
  }
}

/** `count` new connections from `src` to `host:port`; how many got their echo. */
async function connections(src: string, host: string, port: number, count = 6): Promise<number> {
  let ok = 0;
  for (let i = 0; i < count; i++) if ((await lab.tcp(src, host, port, 800)).ok) ok++;
  return ok;
}

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'client', namespace: 'front', labels: { app: 'client' } },
      { name: 'web-1', namespace: 'shop', labels: { app: 'web', team: 'blue' }, tcpPorts: [8080] },
      { name: 'web-2', namespace: 'shop', labels: { app: 'web', team: 'blue' }, tcpPorts: [8080] },
      { name: 'web-3', namespace: 'shop', labels: { app: 'web', team: 'green' }, tcpPorts: [8080] },
      { name: 'self', namespace: 'shop', labels: { app: 'self' }, tcpPorts: [80] },
    ],
    udpPorts: [],
    outside: true,
    services: [
      { name: 'blue', namespace: 'shop', selector: { team: 'blue' }, ports: [{ port: 80, targetPort: 'tcp-8080', nodePort: 30080 }] },
      { name: 'green', namespace: 'shop', selector: { team: 'green' }, ports: [{ port: 80, targetPort: 'tcp-8080' }] },
      { name: 'self', namespace: 'shop', selector: { app: 'self' }, ports: [{ port: 8000, targetPort: 80 }] },
      { name: 'moving', namespace: 'shop', selector: { app: 'moving' }, ports: [{ port: 80, targetPort: 8080 }] },
    ],
  });
  await lab.setServiceEndpoints('shop/moving', ['shop/web-1']);
  dir = mkdtempSync(join(tmpdir(), 'kwp-services-'));
  manifests = join(dir, 'manifests');
  policyFile = join(manifests, 'policies.yaml');
  await lab.writeManifests(manifests);
  await replaceYaml(policyFile, []);
  tokenFile = join(dir, 'admin.token');
  writeFileSync(tokenFile, 'services-e2e-token-0123456789abcdef', { mode: 0o600 });
  // The fast path explicitly, so the case about its keys holds whatever the default is.
  agent = await startKwpAgent(lab, { manifests: [manifests], args: [`--admin-token-file=${tokenFile}`, '--fast-path'] });
  console.log(`kwp agent running, dataplane queue mode: ${agent.queueMode}`);
});

afterAll(async () => {
  for (const conn of held.splice(0)) await conn.close().catch(() => undefined);
  await agent?.stop();
  await lab?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kube-proxy-style Services under kwp agent', () => {
  it('reach their endpoints without policies: ClusterIP, the Service hairpin and the NodePort from outside', async () => {
    expect(await connections('front/client', lab.serviceIP('shop/blue'), 80)).toBe(6);
    expect(await connections('shop/self', lab.serviceIP('shop/self'), 8000, 3)).toBe(3);
    expect(await connections(OUTSIDE, lab.nodeOutsideIp!, 30080, 3)).toBe(3);
  });

  it('decide by the labels of the pod a Service sent the connection to, as kwp eval predicts per endpoint', async () => {
    await applyPolicies(agent!, policyFile, labelPolicies());
    const predicted = await kwpEval([
      { src: 'front/client', dst: 'shop/blue', port: 80 },
      { src: 'front/client', dst: lab.serviceIP('shop/green'), port: 80 },
      { src: lab.outsideIp, dst: lab.nodeOutsideIp, port: 30080 },
    ]);
    console.log(predicted.map((r) => r.walkthrough).join('\n'));
    expect(predicted.map((r) => [r.dst, r.via?.endpoint, r.via?.port, r.verdict])).toEqual([
      ['shop/blue', 'shop/web-1', 8080, 'allow'],
      ['shop/blue', 'shop/web-2', 8080, 'allow'],
      [lab.serviceIP('shop/green'), 'shop/web-3', 8080, 'deny'],
      [lab.nodeOutsideIp, 'shop/web-1', 8080, 'deny'],
      [lab.nodeOutsideIp, 'shop/web-2', 8080, 'deny'],
    ]);
    expect(await connections('front/client', lab.serviceIP('shop/blue'), 80)).toBe(6);
    expect(await connections('front/client', lab.serviceIP('shop/green'), 80, 3)).toBe(0);
    expect(await connections(OUTSIDE, lab.nodeOutsideIp!, 30080, 3)).toBe(0);
  });

  it.each([
    ['an Admin-tier ClusterNetworkPolicy', () => [cnp('deny-shop', 'Admin')]],
    ['a Baseline-tier ClusterNetworkPolicy', () => [cnp('deny-shop', 'Baseline')]],
    ['an AdminNetworkPolicy', () => [anp('AdminNetworkPolicy')]],
    ['a BaselineAdminNetworkPolicy', () => [anp('BaselineAdminNetworkPolicy')]],
  ])('%s denying the namespace denies the Service hairpin and leaves the pod\'s own-IP connection alone', async (_kind, policies) => {
    await applyPolicies(agent!, policyFile, policies());
    const predicted = await evaluateFlows({ objects: [...lab.manifests(), ...policies()], flows: [{ src: 'shop/self', dst: lab.serviceIP('shop/self'), port: 8000 }, { src: 'shop/self', dst: 'shop/self', port: 80 }] });
    // The first flow goes to the Service shop/self (by its ClusterIP: the pod has the same name), the second to the pod's own IP.
    expect(predicted.map((r) => [r.via?.hairpin ?? false, r.verdict])).toEqual([[true, 'deny'], [false, 'allow']]);
    expect(await connections('shop/self', lab.serviceIP('shop/self'), 8000, 3)).toBe(0);
    expect(await connections('shop/self', lab.pod('shop/self').ip, 80, 3)).toBe(3);
    const hairpin = await kwpExplain(['--src', 'shop/self', '--dst', 'shop/self', '--port', '80', '--via-service']);
    const ownIP = await kwpExplain(['--src', 'shop/self', '--dst', 'shop/self', '--port', '80']);
    expect([hairpin.verdict, ownIP.verdict]).toEqual(['deny', 'allow']);
    expect(hairpin.notes.join('\n')).toContain('Service hairpin');
  });

  it('NetworkPolicy (hairpin implementation-defined upstream) judges the Service hairpin like pod-to-pod traffic', async () => {
    const isolated = [np('shop', 'self-from-front', { podSelector: { matchLabels: { app: 'self' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsSel('front') }] }] })];
    await applyPolicies(agent!, policyFile, isolated);
    const [predicted] = await evaluateFlows({ objects: [...lab.manifests(), ...isolated], flows: [{ src: 'shop/self', dst: lab.serviceIP('shop/self'), port: 8000 }] });
    expect([predicted.via?.hairpin, predicted.verdict]).toEqual([true, 'deny']);
    expect(await connections('shop/self', lab.serviceIP('shop/self'), 8000, 3)).toBe(0);
    // Its own-IP connection never leaves its network namespace: no policy on the node sees it.
    expect(await connections('shop/self', lab.pod('shop/self').ip, 80, 3)).toBe(3);
  });

  it('strict mode cuts a connection made through a Service within the same sweep as a direct one', async () => {
    await applyPolicies(agent!, policyFile, labelPolicies());
    const viaService = await lab.hold('front/client', lab.serviceIP('shop/moving'), 80);
    const direct = await lab.hold('front/client', lab.pod('shop/web-1').ip, 8080);
    held.push(viaService, direct);
    expect((await viaService.send()).ok).toBe(true);
    expect((await direct.send()).ok).toBe(true);
    const setAt = performance.now();
    await replaceYaml(policyFile, [np('shop', 'web-closed', { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] })]);
    const [service, pod] = await Promise.all([
      firstProbe(setAt, 5000, () => viaService.send(300), false),
      firstProbe(setAt, 5000, () => direct.send(300), false),
    ]);
    console.log(`after the policy change: the direct connection was cut ${pod.at} ms, the one through Service shop/moving ${service.at} ms after the write`);
    expect(pod.at).toBeDefined();
    expect(service.at).toBeDefined();
    // One sweep cuts both; each probe waits up to 300 ms for its echo, so that is the spread two cuts in one sweep can show.
    expect(Math.abs(service.at! - pod.at!)).toBeLessThan(1000);
    await sleep(REFRESH_SETTLE_MS);
  });

  it('the kernel fast path keeps a Service connection under the endpoint it was sent to, never under the ClusterIP or the Service port, and never keeps a Service hairpin', async () => {
    const selfFromFront = np('shop', 'self-from-front', { podSelector: { matchLabels: { app: 'self' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: nsSel('front') }] }] });
    await applyPolicies(agent!, policyFile, [...labelPolicies(), selfFromFront]);
    const client = lab.pod('front/client').ip;
    const self = lab.pod('shop/self').ip;
    // Through shop/moving (port 80 to web-1's 8080): the queue sees, and the set keeps, the endpoint's tuple.
    const endpointTuple = `${client},tcp:8080,${lab.pod('shop/web-1').ip}`;
    expect(await connections('front/client', lab.serviceIP('shop/moving'), 80, 1)).toBe(1);
    const before = await untilEntry('accept', endpointTuple);
    // So a direct connection to the same endpoint and port, which every stage judges the same way, is decided by that entry.
    expect(await connections('front/client', lab.pod('shop/web-1').ip, 8080, 3)).toBe(3);
    expect((await fastPathEntries('accept')).get(endpointTuple)).toBeGreaterThan(before);
    // A Service hairpin (shop/self to itself through shop/self; denied: only front may reach it) goes to the agent every time.
    expect(await connections('shop/self', lab.serviceIP('shop/self'), 8000, 3)).toBe(0);
    // Fills run in order: once a tuple decided after the hairpins is in, a kept hairpin would be too.
    const later = `${client},tcp:8080,${lab.pod('shop/web-2').ip}`;
    expect(await connections('front/client', lab.pod('shop/web-2').ip, 8080, 1)).toBe(1);
    await untilEntry('accept', later);
    const kept = [...(await fastPathEntries('accept')).keys(), ...(await fastPathEntries('deny')).keys()];
    expect(kept.filter((e) => e.startsWith(`${self},`) && e.endsWith(`,${self}`))).toEqual([]);
    const serviceIPs = ['shop/blue', 'shop/green', 'shop/self', 'shop/moving'].map((s) => lab.serviceIP(s));
    expect(kept.filter((e) => serviceIPs.some((ip) => e.endsWith(`,${ip}`)) || /,tcp:(80|8000),/.test(e))).toEqual([]);
    expect(kept).toContain(endpointTuple);
  });

  it('follows a Service whose endpoints change: new connections go to, and are judged as, the new endpoint', async () => {
    await applyPolicies(agent!, policyFile, labelPolicies());
    expect(await connections('front/client', lab.serviceIP('shop/moving'), 80, 3)).toBe(3);
    // kwp explain takes the Service IP and names the pod conntrack saw the connections rewritten to.
    const explained = await kwpExplain(['--src', 'front/client', '--dst', lab.serviceIP('shop/moving'), '--port', '80']);
    console.log(explained.walkthrough, explained.notes);
    expect(explained.endpoints?.map((e) => [e.endpoint, e.port, e.verdict])).toEqual([['shop/web-1', 8080, 'allow']]);
    expect(explained.notes.join('\n')).toContain('conntrack: connections from front/client');
    await lab.setServiceEndpoints('shop/moving', ['shop/web-3']);
    const reloaded = agent!.nextLog('manifests reloaded', 20_000);
    await lab.writeManifests(manifests);
    await reloaded;
    const predicted = await kwpEval([{ src: 'front/client', dst: 'shop/moving', port: 80 }]);
    expect(predicted.map((r) => [r.via?.endpoint, r.verdict])).toEqual([['shop/web-3', 'deny']]);
    // The old endpoint was allowed: wait for the refusal the new endpoint gets, not a fixed settle time.
    const refusedBy = Date.now() + 20_000;
    while (await connections('front/client', lab.serviceIP('shop/moving'), 80, 1) > 0 && Date.now() < refusedBy) await sleep(100);
    expect(await connections('front/client', lab.serviceIP('shop/moving'), 80, 3)).toBe(0);
  });
});
