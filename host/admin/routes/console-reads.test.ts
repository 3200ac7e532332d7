import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadManifests } from '../../sources/manifest-files.js';
import { OfflineEvaluator, stateFromObjects } from '../../eval.js';
import { PolicyEngine } from '../../pipeline/engine.js';
import { BuiltinModules, ChainedModules } from '../../pipeline/modules.js';
import { defaultPipeline } from '../../pipeline/spec.js';
import { ModuleStore } from '../../control/module-store.js';
import { PipelineController } from '../../control/pipeline-controller.js';
import { createAdminServer, type AdminServer } from '../server.js';
import { formatMatrix, predictMatrix } from '../../cli/eval.js';
import { Kinds, type KubeObject } from '../../contract.js';
import { MAX_MATRIX_CELLS } from './matrix.js';

const TOKEN = 'console-reads-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

interface Agentish { server: AdminServer; store: ModuleStore; controller: PipelineController; engine: PolicyEngine; objects: KubeObject[] }

async function start(objects: KubeObject[], readsOpen = false): Promise<Agentish> {
  const stateDir = mkdtempSync(join(tmpdir(), 'kwp-console-reads-'));
  const store = new ModuleStore({ stateDir, validation: 'inline' });
  const engine = new PolicyEngine({ state: stateFromObjects(objects), modules: new ChainedModules([store, new BuiltinModules()]) });
  const controller = new PipelineController({ engine, fallback: defaultPipeline(), stateDir, store });
  controller.start();
  const server = await createAdminServer({ store, controller, engine, token: TOKEN, readsOpen, port: 0 });
  return { server, store, controller, engine, objects };
}

async function stop(a: Agentish) {
  await a.server.close();
  await a.store.close();
  a.controller.stop();
}

let basic: Agentish;
beforeAll(async () => { basic = await start((await loadManifests(['examples/basic/manifests'])).objects); });
afterAll(async () => stop(basic));

const get = (url: string, headers: Record<string, string> = auth) => basic.server.app.inject({ method: 'GET', url, headers });
const matrix = (payload: unknown) => basic.server.app.inject({ method: 'POST', url: '/v1/matrix', headers: auth, payload: payload as object });

describe('GET /v1/pipeline/status', () => {
  it('lists the active stages in order with the module bytes each runs, its mode and failure policy', async () => {
    const res = await get('/v1/pipeline/status');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.revision).toBe(1);
    expect(body.stages.map((s: { name: string }) => s.name)).toEqual(defaultPipeline().stages.map((s) => s.name));
    const np = body.stages.find((s: { name: string }) => s.name === 'np');
    const compiled = basic.engine.active.stages.find((s) => s.name === 'np')!.compiled;
    expect(np).toMatchObject({ label: 'NP', module: 'network-policy', moduleName: compiled.meta.name, moduleVersion: compiled.meta.version, sha256: compiled.sha256, mode: 'enforce' });
    expect(Date.parse(body.readAt)).not.toBeNaN();
  });

  it('counts each verdict of a stage: an explained flow moves Accept on the stage that accepted it and Next on those before', async () => {
    const before = (await get('/v1/pipeline/status')).json().stages;
    const res = await basic.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: 'x/a', dst: 'y/a', port: 80 } });
    expect(res.json().verdict).toBe('allow');
    const after = (await get('/v1/pipeline/status')).json().stages;
    const delta = (name: string, key: string) => after.find((s: any) => s.name === name).counters[key] - before.find((s: any) => s.name === name).counters[key];
    // Egress of x/a: every stage says Next; ingress of y/a: cnp-admin and anp Next, then np Accepts.
    expect([delta('np', 'accept'), delta('np', 'next'), delta('cnp-admin', 'next'), delta('banp', 'next')]).toEqual([1, 1, 2, 1]);
  });
});

describe('GET /v1/cluster/pods and /v1/cluster/namespaces', () => {
  it('lists every pod with its labels, addresses and declared ports, sorted by namespace and name', async () => {
    const pods = (await get('/v1/cluster/pods')).json().pods;
    expect(pods.map((p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`)).toEqual(['x/a', 'x/b', 'y/a', 'y/b']);
    expect(pods[0]).toEqual({
      namespace: 'x', name: 'a', labels: { app: 'web' }, ips: ['10.244.1.10'], nodeName: 'node-1', hostNetwork: false,
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }, { port: 81, protocol: 'TCP' }],
    });
  });

  it('narrows pods to a namespace and an equality-based label selector', async () => {
    const names = async (q: string) => (await get(`/v1/cluster/pods?${q}`)).json().pods.map((p: any) => `${p.namespace}/${p.name}`);
    expect(await names('namespace=y')).toEqual(['y/a', 'y/b']);
    expect(await names('selector=app%3Dweb')).toEqual(['x/a']);
    expect(await names('selector=app!%3Dweb,app')).toEqual(['x/b', 'y/a', 'y/b']);
    expect(await names('namespace=x&selector=!app')).toEqual([]);
  });

  it('refuses a selector it cannot parse with KWP_ERR_REQUEST_INVALID naming the query and the part at fault', async () => {
    const res = await get('/v1/cluster/pods?selector=app%20in%20(web)');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ code: 'KWP_ERR_REQUEST_INVALID', message: expect.stringMatching(/^GET \/v1\/cluster\/pods: query "selector": "app in \(web\)" is not a label requirement/) });
  });

  it('lists namespaces with their labels and pod counts', async () => {
    expect((await get('/v1/cluster/namespaces')).json().namespaces).toEqual([
      { name: 'x', labels: { team: 'frontend' }, pods: 2 },
      { name: 'y', labels: { team: 'backend' }, pods: 2 },
    ]);
  });
});

describe('POST /v1/matrix', () => {
  it('computes the same matrix as kwp matrix does from the manifests, for each port asked', async () => {
    const res = await matrix({ ports: ['80', '81/tcp'] });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.pods).toEqual(['x/a', 'x/b', 'y/a', 'y/b']);
    const ev = new OfflineEvaluator({ objects: basic.objects });
    try {
      for (const [i, port] of [80, 81].entries()) {
        const offline = predictMatrix(ev, body.pods, port, 'TCP');
        const text = formatMatrix(body.pods, (s, d) => offline.get(`${s}>${d}`)!);
        const fromApi = formatMatrix(body.pods, (s, d) => body.matrices[i].rows[body.pods.indexOf(s)][body.pods.indexOf(d)] === '.');
        expect({ protocol: body.matrices[i].protocol, port: body.matrices[i].port, text: fromApi }).toEqual({ protocol: 'TCP', port, text });
      }
    } finally {
      ev.dispose();
    }
    // The README's matrix: only x/a reaches y/a, on the named port http (80).
    expect(body.matrices[0].rows).toEqual(['...X', '..XX', '..XX', '..XX']);
    expect(body.matrices[1].rows).toEqual(['..XX', '..XX', '..XX', '..XX']);
    expect(body.revision).toBe(basic.engine.active.revision);
  });

  it('decides with the active pipeline: a pipeline without the NetworkPolicy stage allows everything', async () => {
    const view = basic.controller.get();
    await basic.controller.set({ stages: view.stages.filter((s) => s.name !== 'np') }, view.revision, 'test');
    try {
      const body = (await matrix({ namespace: 'y', ports: ['80'] })).json();
      expect(body).toEqual({ revision: view.revision + 1, pods: ['y/a', 'y/b'], matrices: [{ protocol: 'TCP', port: 80, rows: ['..', '..'] }] });
    } finally {
      await basic.controller.rollback();
    }
  });

  it('takes a label selection', async () => {
    const body = (await matrix({ selector: 'app in-list', ports: ['80'] }));
    expect(body.json().code).toBe('KWP_ERR_REQUEST_INVALID');
    const ok = (await matrix({ selector: 'app=web', ports: ['80', '53/UDP'] })).json();
    expect(ok.pods).toEqual(['x/a']);
    expect(ok.matrices.map((m: any) => `${m.protocol}/${m.port}`)).toEqual(['TCP/80', 'UDP/53']);
  });

  it('refuses a port it cannot read, naming the field', async () => {
    const res = await matrix({ ports: ['80', 'http'] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ code: 'KWP_ERR_REQUEST_INVALID', message: expect.stringContaining('POST /v1/matrix body: ports[1]: "http" is not a port') });
  });

  it('refuses a matrix of more cells than the limit before deciding any', async () => {
    const pods: KubeObject[] = Array.from({ length: 60 }, (_, i) => ({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: `p${i}`, namespace: 'big' },
      spec: { nodeName: 'n' }, status: { phase: 'Running', podIP: `10.9.${i >> 8}.${i & 255}` },
    }));
    const big = await start([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'big' } }, ...pods]);
    try {
      const res = await big.server.app.inject({ method: 'POST', url: '/v1/matrix', headers: auth, payload: { ports: ['80', '81', '82', '83', '84', '85', '86', '87', '88', '89', '90', '91'] } });
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toContain(`60 pods × 60 × 12 port(s) is 43200 cells, over the limit of ${MAX_MATRIX_CELLS}`);
      expect(big.engine.active.stages.every((s) => s.counters.decisions === 0)).toBe(true);
    } finally {
      await stop(big);
    }
  });
});

describe('access to the console and its reads', () => {
  it('the new reads need the token unless reads are open', async () => {
    for (const url of ['/v1/pipeline/status', '/v1/cluster/pods', '/v1/cluster/namespaces']) {
      expect((await get(url, {})).json().code).toBe('KWP_ERR_UNAUTHORIZED');
    }
    expect((await basic.server.app.inject({ method: 'POST', url: '/v1/matrix', payload: { ports: ['80'] } })).json().code).toBe('KWP_ERR_UNAUTHORIZED');
    const open = await start(basic.objects, true);
    try {
      expect((await open.server.app.inject({ method: 'GET', url: '/v1/cluster/pods' })).statusCode).toBe(200);
      expect((await open.server.app.inject({ method: 'POST', url: '/v1/matrix', payload: { ports: ['80'] } })).statusCode).toBe(200);
    } finally {
      await stop(open);
    }
  });

  it('serves the console files without a token, with a policy that allows nothing but this origin', async () => {
    const index = await get('/ui/', {});
    expect(index.statusCode).toBe(200);
    expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(index.body).toContain('<script type="module" src="app.js"></script>');
    expect(index.headers['content-security-policy']).toContain("default-src 'none'; script-src 'self'");
    expect(index.headers['x-frame-options']).toBe('DENY');
    const app = await get('/ui/views/pipeline.js', {});
    expect([app.statusCode, app.headers['content-type']]).toEqual([200, 'text/javascript; charset=utf-8']);
    const again = await get('/ui/views/pipeline.js', { 'if-none-match': String(app.headers.etag) });
    expect(again.statusCode).toBe(304);
  });

  it('redirects /ui to /ui/ relatively, and answers unknown or escaping paths with KWP_ERR_ROUTE_NOT_FOUND', async () => {
    const redirect = await get('/ui', {});
    expect([redirect.statusCode, redirect.headers.location]).toEqual([308, 'ui/']);
    for (const url of ['/ui/missing.js', '/ui/..%2F..%2Fpackage.json', '/ui/..%2Froutes%2Fconsole.ts']) {
      const res = await get(url, {});
      expect([url, res.statusCode]).toEqual([url, 404]);
      expect(res.json().code).toBe('KWP_ERR_ROUTE_NOT_FOUND');
    }
    // A literal ../ is resolved by the URL parser before routing: it leaves /ui/ and meets the API's token check.
    const dotted = await get('/ui/../routes/console.ts', {});
    expect([dotted.statusCode, dotted.json().code]).toEqual([401, 'KWP_ERR_UNAUTHORIZED']);
  });

  it('every file the console loads is one the server serves: nothing comes from another origin', async () => {
    const seen = new Set<string>();
    const queue = ['index.html'];
    while (queue.length) {
      const name = queue.shift()!;
      if (seen.has(name)) continue;
      seen.add(name);
      const res = await get(`/ui/${name}`, {});
      expect([name, res.statusCode]).toEqual([name, 200]);
      const dir = name.includes('/') ? name.slice(0, name.lastIndexOf('/') + 1) : '';
      const pattern = name.endsWith('.js') ? /^\s*(?:import|export)[^'"\n;]*\bfrom\s*['"]([^'"]+)['"]/gm : /(?:src|href)="([^"]+)"/g;
      const refs = [...res.body.matchAll(pattern)].map((m) => m[1]).filter((r) => !r.startsWith('#'));
      for (const ref of refs) {
        expect(ref, `${name} refers to ${ref}`).not.toMatch(/^(https?:)?\/\//);
        queue.push(new URL(ref, `http://x/${dir}`).pathname.slice(1));
      }
    }
    expect([...seen]).toEqual(expect.arrayContaining(['app.js', 'style.css', 'views/pipeline.js', 'views/reachability.js']));
  });
});
