// The embedding example beside `kwp agent` on one node (root): two programs,
// two nftables tables, two queue pairs, two mark ranges. Each enforces its own
// policy, and traffic neither denies passes both untouched.
import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { Lab, sweepStaleLabs, type LabProcess } from '../../test/lab/lab.js';
import { startKwpAgent, type KwpAgentHandle } from '../../test/lab/kwp-agent.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
let lab: Lab;
let agent: KwpAgentHandle | undefined;
let embed: LabProcess | undefined;

// Namespace y accepts only namespace x (kwp agent's NetworkPolicy); the
// embedder denies TCP 81 everywhere (its deny-ports module).
const networkPolicy = {
  apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'only-from-x', namespace: 'y' },
  spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'x' } } }] }] },
};

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'a', namespace: 'x', tcpPorts: [80, 81] },
      { name: 'b', namespace: 'z', tcpPorts: [80, 81] },
      { name: 'c', namespace: 'y', tcpPorts: [80, 81] },
    ],
  });
  const agentDir = mkdtempSync(join(tmpdir(), 'kwp-embed-agent-'));
  const embedDir = mkdtempSync(join(tmpdir(), 'kwp-embed-daemon-'));
  await lab.writeManifests(agentDir);
  await lab.writeManifests(embedDir);
  writeFileSync(join(agentDir, 'policy.yaml'), stringify(networkPolicy));
  agent = await startKwpAgent(lab, { manifests: [agentDir], args: ['--admin-address=off'] });

  const daemon = join(root, 'dist', 'examples', 'embed', 'daemon.js');
  const wasm = join(root, 'dist', 'wasm', 'examples', 'deny-ports.wasm');
  if (!existsSync(daemon) || !existsSync(wasm)) throw new Error('run `npm run build` first: the example runs from dist/');
  embed = lab.spawnInNode(process.execPath, [daemon, '--manifests', embedDir, '--module', wasm, '--deny-ports', '81',
    '--state-dir', mkdtempSync(join(tmpdir(), 'kwp-embed-state-')), '--listen', '127.0.0.1:9555']);
  await embed.waitForLine((l) => l.includes('embed example running'), 90_000, 'stderr');
}, 180_000);

afterAll(async () => {
  if (embed) {
    embed.child.kill('SIGTERM');
    await embed.waitForLine((l) => l.includes('embed example stopped'), 20_000, 'stderr').catch(() => undefined);
    await embed.kill();
  }
  await agent?.stop();
  await lab?.destroy();
});

describe('an embedding daemon beside kwp agent', () => {
  it('each enforces its own policy and passes what it does not manage', async () => {
    console.log(`kwp agent queue mode: ${agent!.queueMode}`);
    const cases: Array<[string, string, number, boolean, string]> = [
      ['x/a', 'y/c', 80, true, 'allowed by both'],
      ['z/b', 'y/c', 80, false, "kwp agent's NetworkPolicy denies z"],
      ['x/a', 'y/c', 81, false, "the embedder's deny-ports denies 81"],
      ['x/a', 'z/b', 80, true, 'no policy of either selects z/b'],
      ['z/b', 'x/a', 81, false, 'deny-ports is cluster-wide'],
    ];
    const observed = [];
    for (const [src, dst, port, expected, why] of cases) {
      const r = await lab.tcp(src, dst, port, 1000);
      observed.push(`${src} -> ${dst} TCP/${port}: ${r.ok ? 'allowed' : 'denied'} (${why})`);
      expect(r.ok, `${src} -> ${dst} TCP/${port}: ${why}`).toBe(expected);
    }
    console.log(observed.join('\n'));
  });

  it('serves its own route and the admin API under its own prefix', async () => {
    const out = await lab.execInNode('sh', ['-c', 'curl -s 127.0.0.1:9555/status; echo; curl -s 127.0.0.1:9555/policy/healthz']);
    expect(out.stdout).toContain('"daemon":"embed-example"');
    expect(out.stdout).toContain(`"queueMode":"${agent!.queueMode}"`);
    expect(out.stdout).toContain('{"status":"ok"}');
  });
});
