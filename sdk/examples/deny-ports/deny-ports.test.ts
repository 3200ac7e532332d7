import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { loadModule, namespace, pod, startPluginCluster, type CompiledEvaluator, type PluginCluster } from '../../../host/testing/index.js';

// Built by scripts/build-wasm.mjs (npm run build:wasm) from ./assembly.
const wasmFile = fileURLToPath(new URL('../../../dist/wasm/examples/deny-ports.wasm', import.meta.url));

const objects = [
  namespace('shop'),
  pod('shop/web', '10.0.0.10', { labels: { app: 'web' } }),
  pod('shop/db', '10.0.0.20', { labels: { app: 'db' } }),
];

describe('deny-ports', () => {
  let cluster: PluginCluster;
  // Compiling (and fuel-instrumenting) takes most of a second: once per file is enough.
  let wasm: CompiledEvaluator;
  beforeAll(async () => {
    wasm = loadModule(wasmFile);
    cluster = await startPluginCluster({ module: wasm, objects, stage: { config: { ports: [23, 3389], protocols: ['TCP'] } } });
  });
  afterAll(() => cluster?.dispose());

  it('reads its name and failure policy from module.json', () => {
    expect(cluster.module.meta).toMatchObject({ name: 'deny-ports', version: '1.0.0', kinds: [], failurePolicy: 'fail-open' });
  });

  it('denies every configured port over TCP and leaves the rest to later stages', () => {
    cluster.expectFlows([
      { name: 'telnet', src: 'shop/web', dst: 'shop/db', port: 23, expect: 'deny' },
      { name: 'rdp', src: 'shop/db', dst: 'shop/web', port: 3389, expect: 'deny' },
      { name: 'postgres', src: 'shop/web', dst: 'shop/db', port: 5432, expect: 'allow' },
      { name: 'telnet over UDP', src: 'shop/web', dst: 'shop/db', port: 23, protocol: 'UDP', expect: 'allow' },
      { name: 'telnet to the outside', src: 'shop/web', dst: '192.0.2.1', port: 23, expect: 'deny' },
      { name: 'telnet from the outside', src: '192.0.2.1', dst: 'shop/db', port: 23, expect: 'deny' },
    ]);
  });

  it('explains a denial with the protocol and port in the walkthrough', () => {
    const r = cluster.expectWalkthrough({ src: 'shop/web', dst: 'shop/db', port: 3389 }, '[deny-ports] Deny (TCP/3389 is denied cluster-wide)');
    expect(r.egress).toEqual([{ stage: 'deny-ports', label: 'deny-ports', verdict: 'Deny', mode: 'enforce', reason: 'TCP/3389 is denied cluster-wide' }]);
  });

  it('answers Next, not Accept, for a port it does not know', () => {
    expect(cluster.pluginStep({ src: 'shop/web', dst: 'shop/db', port: 80 }, 'egress')?.verdict).toBe('Next');
    expect(cluster.pluginStep({ src: 'shop/web', dst: 'shop/db', port: 80 }, 'ingress')?.verdict).toBe('Next');
  });

  it('counts a verdict only when the protocols list names the protocol', async () => {
    const udp = await startPluginCluster({ module: wasm, objects, stage: { config: { ports: [53], protocols: ['UDP'] } } });
    try {
      udp.expectDenied({ src: 'shop/web', dst: 'shop/db', port: 53, protocol: 'UDP' });
      udp.expectAllowed({ src: 'shop/web', dst: 'shop/db', port: 53, protocol: 'TCP' });
    } finally {
      udp.dispose();
    }
  });

  it.each([
    [{}, 'config.ports must be a non-empty list'],
    [{ ports: [] }, 'config.ports must be a non-empty list'],
    [{ ports: [0] }, 'config.ports[0] must be a port number from 1 to 65535'],
    [{ ports: [22, 70000] }, 'config.ports[1] must be a port number from 1 to 65535'],
    [{ ports: [22], protocols: ['ICMP'] }, 'config.protocols[0] must be TCP, UDP or SCTP'],
  ])('refuses the config %j with a reason the agent reports', async (config, reason) => {
    await expect(startPluginCluster({ module: wasm, objects, stage: { config } })).rejects.toMatchObject({
      code: 'KWP_ERR_CONFIG_REJECTED',
      message: expect.stringContaining(reason),
    });
  });

  it('in audit mode counts its denials without enforcing them', async () => {
    const audit = await startPluginCluster({ module: wasm, objects, stage: { config: { ports: [23] }, mode: 'audit' } });
    try {
      const r = audit.expectAllowed({ src: 'shop/web', dst: 'shop/db', port: 23 });
      expect(r.walkthrough).toContain('[deny-ports] audit Deny');
      expect(audit.counters.deny).toBe(2);
    } finally {
      audit.dispose();
    }
  });

  it('in front of the built-in pipeline it denies before any NetworkPolicy allows', async () => {
    const allowAll = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'allow-all', namespace: 'shop' },
      spec: { podSelector: {}, ingress: [{}], policyTypes: ['Ingress'] },
    };
    const full = await startPluginCluster({ module: wasm, objects: [...objects, allowAll], stage: { config: { ports: [23] } }, pipeline: 'before-builtins' });
    try {
      full.expectDenied({ src: 'shop/web', dst: 'shop/db', port: 23 });
      full.expectWalkthrough({ src: 'shop/web', dst: 'shop/db', port: 80 }, 'ingress: [NP] Accept');
    } finally {
      full.dispose();
    }
  });
});
