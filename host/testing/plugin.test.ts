import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinWasmDir } from '../pipeline/modules.js';
import { loadModule, namespace, pod, service, startPluginCluster, PolicyAssertionError, type CompiledEvaluator } from './index.js';

// The scripted fixture answers whatever its stage config says, traps on
// trapPort and loops forever on loopPort: enough to exercise every helper.
const scriptedFile = join(builtinWasmDir(), 'fixtures', 'scripted.wasm');
const objects = [namespace('a'), pod('a/x', '10.1.0.1', { labels: { app: 'x' } }), pod('a/y', '10.1.0.2', { labels: { app: 'y' } })];

describe('the plugin test kit', () => {
  let scripted: CompiledEvaluator;
  let dir: string;
  beforeAll(() => {
    scripted = loadModule(scriptedFile);
    dir = mkdtempSync(join(tmpdir(), 'kwp-testkit-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('compiles a module with the agent\'s static checks and reads its metadata', () => {
    expect(scripted.meta).toMatchObject({ name: 'scripted', failurePolicy: 'fail-closed', abi: { major: 1, minor: 4 } });
  });

  it('reports a missing module file with the path and how to build it', () => {
    expect(() => loadModule(join(dir, 'nope.wasm'))).toThrow(/nope\.wasm: cannot read the module \(ENOENT\); build it first/);
  });

  it('refuses bytes that are not WebAssembly with the agent\'s error code', () => {
    expect(() => loadModule(new TextEncoder().encode('not wasm'))).toThrow(expect.objectContaining({ code: 'KWP_ERR_MODULE_INVALID' }));
  });

  it('decides flows through the plugin alone and shows its verdict and reason in the walkthrough', async () => {
    const c = await startPluginCluster({ module: scripted, objects, stage: { config: { egress: 'Deny', reason: 'scripted' } } });
    try {
      const r = c.expectDenied({ src: 'a/x', dst: 'a/y', port: 80 });
      expect(r.walkthrough).toMatch(/^a\/x -> a\/y TCP\/80 {2}DENY {2}egress: \[scripted\] Deny/);
      expect(c.pluginStep({ src: 'a/x', dst: 'a/y', port: 80 }, 'egress')).toMatchObject({ stage: 'scripted', verdict: 'Deny' });
      expect(() => c.expectAllowed({ src: 'a/x', dst: 'a/y', port: 80 })).toThrow(/expected a\/x -> a\/y TCP\/80 to be allowed, but it was denied:\n {2}a\/x -> a\/y/);
    } finally {
      c.dispose();
    }
  });

  it('lists every wrong flow of a table in one error', async () => {
    const c = await startPluginCluster({ module: scripted, objects, stage: { config: { ingress: 'Deny' } } });
    try {
      let caught: unknown;
      try {
        c.expectFlows([
          { name: 'first', src: 'a/x', dst: 'a/y', port: 1, expect: 'allow' },
          { name: 'second', src: 'a/y', dst: 'a/x', port: 2, expect: 'deny' },
          { name: 'third', src: 'a/y', dst: 'a/x', port: 3, expect: 'allow' },
        ]);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(PolicyAssertionError);
      const e = caught as PolicyAssertionError;
      expect(e.message).toMatch(/^2 of 3 flows decided wrongly:\n {2}first: expected allow, got deny\n/);
      expect(e.message).toContain('third: expected allow, got deny');
      expect(e.results.map((r) => r.name)).toEqual(['first', 'third']);
    } finally {
      c.dispose();
    }
  });

  it('refuses a table flow without an expectation instead of passing it silently', async () => {
    const c = await startPluginCluster({ module: scripted, objects });
    try {
      expect(() => c.expectFlows([{ src: 'a/x', dst: 'a/y', port: 1 }])).toThrow(/flow 1 \(a\/x -> a\/y TCP\/1\) has no "expect"/);
    } finally {
      c.dispose();
    }
  });

  it('places the plugin after the built-in pipeline when asked', async () => {
    const denyAll = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'deny', namespace: 'a' },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    };
    const c = await startPluginCluster({ module: scripted, objects: [...objects, denyAll], stage: { config: { ingress: 'Accept' } }, pipeline: 'after-builtins' });
    try {
      // NetworkPolicy isolates a/y and denies first: the plugin after it never gets to accept.
      const r = c.expectDenied({ src: 'a/x', dst: 'a/y', port: 80 });
      expect(r.ingress.map((t) => t.stage)).toEqual(['cnp-admin', 'anp', 'np']);
      expect(c.pluginStep({ src: 'a/x', dst: 'a/y', port: 80 }, 'ingress')).toBeUndefined();
    } finally {
      c.dispose();
    }
  });

  it('takes a full pipeline that names the plugin\'s module', async () => {
    const c = await startPluginCluster({
      module: scripted, objects,
      pipeline: { stages: [{ name: 'first', label: 'ONE', module: 'scripted', config: { egress: 'Pass', reason: 'handed on' } }, { name: 'second', module: 'scripted', config: { egress: 'Deny' } }] },
    });
    try {
      expect(c.stageName).toBe('first');
      c.expectWalkthrough({ src: 'a/x', dst: 'a/y', port: 80 }, /egress: \[ONE\] Pass \(handed on\) -> \[second\] Deny/);
    } finally {
      c.dispose();
    }
  });

  it('refuses stage options next to a full pipeline instead of ignoring them', async () => {
    await expect(startPluginCluster({ module: scripted, objects, stage: { mode: 'audit' }, pipeline: { stages: [{ name: 's', module: 'scripted' }] } }))
      .rejects.toThrow(/"stage" applies only when the kit places the plugin/);
  });

  it('reads manifests from files as kwp eval does', async () => {
    writeFileSync(join(dir, 'cluster.yaml'), [
      'apiVersion: v1\nkind: Namespace\nmetadata: {name: m}',
      'apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: m}\nstatus: {podIP: 10.9.0.1}',
    ].join('\n---\n'));
    const c = await startPluginCluster({ module: scripted, manifests: dir, stage: { config: { egress: 'Deny' } } });
    try {
      c.expectDenied({ src: 'm/p', dst: '192.0.2.1', port: 80 });
    } finally {
      c.dispose();
    }
  });

  it('answers the failure policy when the module traps, and counts the trap', async () => {
    const c = await startPluginCluster({ module: scripted, objects, stage: { config: { trapPort: 666 } } });
    try {
      const r = c.expectDenied({ src: 'a/x', dst: 'a/y', port: 666 });
      expect(r.egress[0]).toMatchObject({ verdict: 'Deny', failure: 'trap' });
      expect(c.counters.traps).toBeGreaterThan(0);
    } finally {
      c.dispose();
    }
  });

  it('answers fail-open when the stage overrides the module\'s fail-closed and fuel runs out', async () => {
    const c = await startPluginCluster({ module: scripted, objects, stage: { config: { loopPort: 777 }, failurePolicy: 'fail-open' } });
    try {
      const r = c.expectAllowed({ src: 'a/x', dst: 'a/y', port: 777 });
      expect(r.egress[0]).toMatchObject({ verdict: 'Next', failure: 'fuel' });
      expect(c.counters.fuelExhausted).toBeGreaterThan(0);
    } finally {
      c.dispose();
    }
  });

  it('delivers objects applied and removed while the plugin runs', async () => {
    const c = await startPluginCluster({ module: scripted, objects, stage: { config: { egress: 'Deny' } } });
    try {
      expect(() => c.evaluate({ src: 'a/late', dst: 'a/y', port: 80 })).toThrow(/a\/late/);
      const late = pod('a/late', '10.1.0.9');
      c.apply(late);
      c.expectDenied({ src: 'a/late', dst: 'a/y', port: 80 });
      c.remove(late);
      expect(() => c.evaluate({ src: 'a/late', dst: 'a/y', port: 80 })).toThrow(/a\/late/);
    } finally {
      c.dispose();
    }
  });

  it('builds a Service whose selector and ports read as the API server writes them', () => {
    expect(service('a/web', { app: 'x' }, [{ name: 'http', port: 80, targetPort: 'http' }])).toEqual({
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'a' },
      spec: { selector: { app: 'x' }, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }] },
    });
    expect(() => pod('no-namespace', '10.0.0.1')).toThrow(/pod "no-namespace": write it as "namespace\/name"/);
  });
});
