import { AdminMetrics } from './metrics.js';
import { describe, it, expect, afterEach } from 'vitest';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import Fastify from 'fastify';
import swagger from '@fastify/swagger';
import { builtinWasmDir } from '../pipeline/modules.js';
import { sandboxModule, INFINITE_LOOP, DEFAULT_META } from '../../test/fixtures/sandbox-modules.js';
import { signModule } from '../control/signature.js';
import { adminHarness, auth, ADMIN_TOKEN, ALLOW_FIRST, DENY_FIRST, scriptedStage, type AdminHarness, type HarnessOptions } from '../../test/fixtures/admin-harness.js';
import { Kinds } from '../contract.js';
import { adminApi } from './plugin.js';

const scripted = () => readFileSync(join(builtinWasmDir(), 'fixtures', 'scripted.wasm'));
const named = (name: string, version = '1.0.0', extra: Parameters<typeof sandboxModule>[0] = {}) =>
  sandboxModule({ meta: { ...DEFAULT_META, name, version }, ...extra });
const wasm = { ...auth, 'content-type': 'application/wasm' };

const open: AdminHarness[] = [];
async function harness(options: HarnessOptions = {}): Promise<AdminHarness> {
  const h = await adminHarness(options);
  open.push(h);
  return h;
}
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.server.close();
    await h.store.close();
    h.controller.stop();
  }
});

function upload(h: AdminHarness, bytes: Uint8Array, name: string, version = '1.0.0', headers: Record<string, string> = {}) {
  return h.server.app.inject({ method: 'POST', url: `/v1/modules?name=${name}&version=${version}`, headers: { ...wasm, ...headers }, payload: Buffer.from(bytes) });
}

describe('module routes', () => {
  it('an upload answers 201 with the stored module, and 200 for the same bytes again', async () => {
    const h = await harness();
    const first = await upload(h, scripted(), 'scripted');
    expect(first.statusCode).toBe(201);
    expect(first.json()).toMatchObject({ created: true, module: { name: 'scripted', version: '1.0.0', abi: '1.4', size: scripted().length } });
    const again = await upload(h, scripted(), 'scripted');
    expect(again.statusCode).toBe(200);
    expect(again.json().created).toBe(false);
  });

  const refusals: Array<[string, () => Uint8Array, string, number, string]> = [
    ['bad bytes', () => new TextEncoder().encode('MZ not wasm'), 'junk', 400, 'KWP_ERR_MODULE_INVALID'],
    ['a wrong ABI', () => named('abi', '1.0.0', { abiVersion: 0x00030000 }), 'abi', 422, 'KWP_ERR_ABI_VERSION'],
    ['a forbidden import', () => named('wasi', '1.0.0', { imports: ['(import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))'] }), 'wasi', 422, 'KWP_ERR_IMPORT_NOT_ALLOWED'],
    ['no memory maximum', () => named('nomax', '1.0.0', { memory: '(memory (export "memory") 1)' }), 'nomax', 422, 'KWP_ERR_MEMORY_UNBOUNDED'],
    ['a missing export', () => named('noexp', '1.0.0', { omitExports: ['kwp_explain'] }), 'noexp', 422, 'KWP_ERR_EXPORT_MISSING'],
    ['a missing kwp.meta', () => sandboxModule({ meta: null }), 'nometa', 422, 'KWP_ERR_METADATA'],
    ['a trapping self-test', () => named('traps', '1.0.0', { decideBody: '(unreachable)' }), 'traps', 422, 'KWP_ERR_SELF_TEST'],
    ['an infinite-loop self-test', () => named('loops', '1.0.0', { decideBody: INFINITE_LOOP }), 'loops', 422, 'KWP_ERR_SELF_TEST'],
    ['a start function that traps', () => named('starts', '1.0.0', { startBody: '(unreachable)' }), 'starts', 422, 'KWP_ERR_INSTANTIATE'],
    ['a name that differs from kwp.meta', () => named('real-name'), 'other-name', 422, 'KWP_ERR_NAME_MISMATCH'],
  ];
  it.each(refusals)('an upload with %s is refused with its code and status', async (_what, build, name, status, code) => {
    const h = await harness();
    const res = await upload(h, build(), name);
    expect(res.statusCode).toBe(status);
    expect(Object.keys(res.json()).sort()).toEqual(['code', 'message']);
    expect(res.json().code).toBe(code);
    expect(res.json().message).toContain(`upload ${name}@1.0.0`);
    expect(h.store.list()).toEqual([]);
  });

  it('a module over the size cap is refused by the store, and a far larger body by the body limit, both as KWP_ERR_MODULE_TOO_LARGE', async () => {
    const h = await harness({ limits: { maxModuleBytes: 1000 } });
    const justOver = await upload(h, new Uint8Array(1500), 'big');
    expect([justOver.statusCode, justOver.json().code]).toEqual([413, 'KWP_ERR_MODULE_TOO_LARGE']);
    expect(justOver.json().message).toMatch(/1500 bytes, over the cap of 1000 bytes/);
    const huge = await upload(h, new Uint8Array(200_000), 'big');
    expect([huge.statusCode, huge.json().code]).toEqual([413, 'KWP_ERR_MODULE_TOO_LARGE']);
  });

  it('a module configured for its self-test through the config query is stored', async () => {
    const h = await harness();
    const bytes = readFileSync(join(builtinWasmDir(), 'admin-network-policy.wasm'));
    const version = /"version"\s*:\s*"([^"]+)"/.exec(bytes.toString('latin1'))![1];
    const refused = await upload(h, bytes, 'admin-network-policy', version);
    expect(refused.json().code).toBe('KWP_ERR_CONFIG_REJECTED');
    const res = await h.server.app.inject({ method: 'POST', url: `/v1/modules?name=admin-network-policy&version=${version}&config=${encodeURIComponent('{"tier":"Admin"}')}`, headers: wasm, payload: bytes });
    expect(res.statusCode).toBe(201);
  });

  it('different bytes under a stored name and version are a 409 conflict', async () => {
    const h = await harness();
    await upload(h, named('dup'), 'dup');
    const res = await upload(h, named('dup', '1.0.0', { decideBody: '(i32.const 0) (drop) (i32.const 0)' }), 'dup');
    expect([res.statusCode, res.json().code]).toEqual([409, 'KWP_ERR_MODULE_CONFLICT']);
  });

  describe('signatures', () => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const stranger = generateKeyPairSync('ed25519');

    it('a correctly signed upload is stored and names its key', async () => {
      const h = await harness({ trustedKeys: [publicKey] });
      const bytes = scripted();
      const res = await upload(h, bytes, 'scripted', '1.0.0', { 'x-kwp-signature': signModule(privateKey, bytes, 'scripted', '1.0.0') });
      expect(res.statusCode).toBe(201);
      expect(res.json().module.signedBy).toMatch(/^[0-9a-f]{16}$/);
    });

    it('an unsigned upload is refused when keys are trusted', async () => {
      const h = await harness({ trustedKeys: [publicKey] });
      const res = await upload(h, scripted(), 'scripted');
      expect([res.statusCode, res.json().code]).toEqual([401, 'KWP_ERR_SIGNATURE_REQUIRED']);
    });

    it('a bad signature is refused', async () => {
      const h = await harness({ trustedKeys: [publicKey] });
      const bytes = scripted();
      const res = await upload(h, bytes, 'scripted', '1.0.0', { 'x-kwp-signature': signModule(stranger.privateKey, bytes, 'scripted', '1.0.0') });
      expect([res.statusCode, res.json().code]).toEqual([422, 'KWP_ERR_SIGNATURE_INVALID']);
    });

    it('a signature replayed under another name is refused', async () => {
      const h = await harness({ trustedKeys: [publicKey] });
      const v = named('original');
      const signature = signModule(privateKey, v, 'original', '1.0.0');
      const replay = await upload(h, v, 'impostor', '1.0.0', { 'x-kwp-signature': signature });
      expect([replay.statusCode, replay.json().code]).toEqual([422, 'KWP_ERR_SIGNATURE_INVALID']);
      expect((await upload(h, v, 'original', '1.0.0', { 'x-kwp-signature': signature })).statusCode).toBe(201);
    });
  });

  it('listing, inspecting and removing modules; a module in use cannot be removed', async () => {
    const h = await harness();
    await upload(h, named('plug', '1.0.0'), 'plug', '1.0.0');
    await upload(h, named('plug', '1.1.0'), 'plug', '1.1.0');
    await upload(h, named('plug', '2.0.0'), 'plug', '2.0.0');
    const list = await h.server.app.inject({ method: 'GET', url: '/v1/modules', headers: auth });
    expect(list.json().modules.map((m: any) => m.version)).toEqual(['1.0.0', '1.1.0', '2.0.0']);
    const put = await h.server.app.inject({ method: 'PUT', url: '/v1/pipeline', headers: auth, payload: { stages: [{ name: 'p', module: 'plug@1.1.0' }] } });
    expect(put.statusCode).toBe(200);
    const one = await h.server.app.inject({ method: 'GET', url: '/v1/modules/plug', headers: auth });
    expect(one.json().versions.map((m: any) => `${m.version}:${m.usedBy.join(',')}`)).toEqual(['2.0.0:', '1.1.0:p', '1.0.0:']);
    const inUse = await h.server.app.inject({ method: 'DELETE', url: '/v1/modules/plug@1.1.0', headers: auth });
    expect([inUse.statusCode, inUse.json().code]).toEqual([409, 'KWP_ERR_MODULE_IN_USE']);
    const byAt = await h.server.app.inject({ method: 'DELETE', url: '/v1/modules/plug@2.0.0', headers: auth });
    expect(byAt.json().removed.map((m: any) => m.version)).toEqual(['2.0.0']);
    const byQuery = await h.server.app.inject({ method: 'DELETE', url: '/v1/modules/plug?version=1.0.0', headers: auth });
    expect(byQuery.json().removed.map((m: any) => m.version)).toEqual(['1.0.0']);
    const missing = await h.server.app.inject({ method: 'GET', url: '/v1/modules/nothing', headers: auth });
    expect([missing.statusCode, missing.json().code]).toEqual([404, 'KWP_ERR_MODULE_NOT_FOUND']);
  });

  it('uploads beyond the burst are rate limited with Retry-After', async () => {
    const h = await harness({ uploadBurst: 2, uploadsPerMinute: 6 });
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await upload(h, scripted(), 'scripted')).statusCode);
    expect(codes.slice(0, 2)).toEqual([201, 200]);
    const limited = await upload(h, scripted(), 'scripted');
    expect([limited.statusCode, limited.json().code]).toEqual([429, 'KWP_ERR_RATE_LIMITED']);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });

  it("one client's burst does not use up another client's uploads", async () => {
    const h = await harness({ uploadBurst: 2, uploadsPerMinute: 6 });
    const from = (remoteAddress: string) => h.server.app.inject({
      method: 'POST', url: '/v1/modules?name=scripted&version=1.0.0', headers: wasm, payload: Buffer.from(scripted()), remoteAddress,
    });
    const burst: number[] = [];
    for (let i = 0; i < 3; i++) burst.push((await from('192.0.2.10')).statusCode);
    expect(burst).toEqual([201, 200, 429]);
    const limited = await from('192.0.2.10');
    expect(limited.json().message).toMatch(/too many uploads from 192\.0\.2\.10; retry in \d+ s/);
    expect((await from('192.0.2.20')).statusCode).toBe(200);
    expect((await from('192.0.2.20')).statusCode).toBe(200);
    expect((await from('192.0.2.20')).statusCode).toBe(429);
  });

  it('a caller without the token takes no upload tokens from its address', async () => {
    const h = await harness({ uploadBurst: 1, uploadsPerMinute: 6 });
    const payload = Buffer.from(scripted());
    for (let i = 0; i < 3; i++) {
      const res = await h.server.app.inject({ method: 'POST', url: '/v1/modules?name=scripted&version=1.0.0', headers: { 'content-type': 'application/wasm' }, payload });
      expect(res.statusCode).toBe(401);
    }
    expect((await upload(h, scripted(), 'scripted')).statusCode).toBe(201);
  });

  it('a module sent as JSON is refused with KWP_ERR_MEDIA_TYPE, a missing name with KWP_ERR_REQUEST_INVALID', async () => {
    const h = await harness();
    const json = await h.server.app.inject({ method: 'POST', url: '/v1/modules?name=x&version=1', headers: { ...auth, 'content-type': 'text/plain' }, payload: 'hello' });
    expect([json.statusCode, json.json().code]).toEqual([415, 'KWP_ERR_MEDIA_TYPE']);
    const noName = await h.server.app.inject({ method: 'POST', url: '/v1/modules?version=1', headers: wasm, payload: scripted() });
    expect([noName.statusCode, noName.json().code]).toEqual([400, 'KWP_ERR_REQUEST_INVALID']);
    expect(noName.json().message).toMatch(/querystring must have required property 'name'/);
  });
});

describe('pipeline routes', () => {
  it('GET gives the pipeline with its revision as ETag; PUT with a stale If-Match is 412; rollback swaps back; history tells the story', async () => {
    const h = await harness();
    const app = h.server.app;
    const get = await app.inject({ method: 'GET', url: '/v1/pipeline', headers: auth });
    expect(get.headers.etag).toBe('"1"');
    expect(get.json()).toMatchObject({ revision: 1, stages: ALLOW_FIRST.stages });
    // Each stage's module resolved to the exact bytes it runs.
    expect(get.json().modules.map((m: any) => [m.stage, m.name, /^[0-9a-f]{64}$/.test(m.sha256)])).toEqual(ALLOW_FIRST.stages.map((st) => [st.name, 'scripted', true]));
    const put = await app.inject({ method: 'PUT', url: '/v1/pipeline', headers: { ...auth, 'if-match': '"1"' }, payload: DENY_FIRST });
    expect([put.statusCode, put.headers.etag]).toEqual([200, '"2"']);
    expect(put.json()).toMatchObject({ revision: 2, previousRevision: 1 });
    const stale = await app.inject({ method: 'PUT', url: '/v1/pipeline', headers: { ...auth, 'if-match': '"1"' }, payload: ALLOW_FIRST });
    expect([stale.statusCode, stale.json().code]).toEqual([412, 'KWP_ERR_PRECONDITION_FAILED']);
    const back = await app.inject({ method: 'POST', url: '/v1/pipeline/rollback', headers: auth });
    expect([back.statusCode, back.json().revision, back.headers.etag]).toEqual([200, 1, '"1"']);
    const history = await app.inject({ method: 'GET', url: '/v1/pipeline/history', headers: auth });
    expect(history.json().history.map((e: any) => e.action)).toEqual(['startup', 'set', 'rollback']);
  });

  it('a bad pipeline body, a missing module or a malformed If-Match change nothing', async () => {
    const h = await harness();
    const app = h.server.app;
    const cases: Array<[unknown, Record<string, string>, number, string]> = [
      [{ stages: [{ name: 'Bad Name', module: 'scripted' }] }, {}, 400, 'KWP_ERR_PIPELINE_INVALID'],
      [{ stages: [{ name: 'x', module: 'not-stored' }] }, {}, 404, 'KWP_ERR_MODULE_NOT_FOUND'],
      [{ stages: [{ name: 'x', module: 'scripted', config: { egress: 'Maybe' } }] }, {}, 422, 'KWP_ERR_CONFIG_REJECTED'],
      [ALLOW_FIRST, { 'if-match': 'yesterday' }, 400, 'KWP_ERR_REQUEST_INVALID'],
      [[1, 2], {}, 400, 'KWP_ERR_REQUEST_INVALID'],
    ];
    for (const [payload, headers, status, code] of cases) {
      const res = await app.inject({ method: 'PUT', url: '/v1/pipeline', headers: { ...auth, ...headers }, payload: payload as object });
      expect([res.statusCode, res.json().code]).toEqual([status, code]);
    }
    expect(h.controller.revision).toBe(1);
  });

  it('two concurrent PUTs based on the same ETag: one activates, the other is a 412, and each answers the revision it saw', async () => {
    const h = await harness();
    const app = h.server.app;
    let activated = 0;
    h.controller.observe({ activated: () => { activated++; } });
    const put = (payload: object) => app.inject({ method: 'PUT', url: '/v1/pipeline', headers: { ...auth, 'if-match': '"1"' }, payload });
    const [a, b] = await Promise.all([put(DENY_FIRST), put({ stages: [ALLOW_FIRST.stages[0]] })]);
    expect([a.statusCode, a.headers.etag, a.json().revision]).toEqual([200, '"2"', 2]);
    expect([b.statusCode, b.json().code]).toEqual([412, 'KWP_ERR_PRECONDITION_FAILED']);
    expect(activated).toBe(1);
    expect((await app.inject({ method: 'GET', url: '/v1/pipeline', headers: auth })).json()).toMatchObject({ revision: 2, previousRevision: 1, stages: DENY_FIRST.stages });
  });

  it('rolling back with nothing to roll back to is a 409', async () => {
    const h = await harness();
    const res = await h.server.app.inject({ method: 'POST', url: '/v1/pipeline/rollback', headers: auth });
    expect([res.statusCode, res.json().code]).toEqual([409, 'KWP_ERR_NO_PREVIOUS_PIPELINE']);
  });
});

describe('explain, probes, metrics and the OpenAPI document', () => {
  it('explain decides a flow between two pods on the active pipeline and walks it', async () => {
    const h = await harness();
    const res = await h.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: 'default/a', dst: 'default/b', port: 80 } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ revision: 1, verdict: 'allow', egress: [{ stage: 'allow', verdict: 'Accept', reason: 'allow says Accept' }] });
    expect(res.json().walkthrough).toBe('default/a -> default/b TCP/80  ALLOW  egress: [allow] Accept (allow says Accept)  ingress: [allow] Accept (allow says Accept)');
    await h.controller.set(DENY_FIRST);
    const after = await h.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: '10.0.0.1', dst: '10.0.0.2', port: 443, protocol: 'UDP' } });
    expect(after.json()).toMatchObject({ revision: 2, verdict: 'deny' });
    const bad = await h.server.app.inject({ method: 'POST', url: '/v1/explain', headers: auth, payload: { src: 'default/a', dst: 'default/nobody', port: 80 } });
    expect([bad.statusCode, bad.json().code]).toEqual([400, 'KWP_ERR_FLOWS']);
  });

  it('healthz is always open and readyz answers 503 until the sources are synced', async () => {
    let ready = false;
    const h = await harness({ ready: () => ready });
    const app = h.server.app;
    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    const notYet = await app.inject({ method: 'GET', url: '/readyz' });
    expect([notYet.statusCode, notYet.json().code]).toEqual([503, 'KWP_ERR_NOT_READY']);
    ready = true;
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
  });

  it('metrics export the dataplane counters and packet-process percentiles when a dataplane runs', async () => {
    const h = await harness({});
    const fake = { counters: { packets: 0, accepted: 0, dropped: 0, parseErrors: 0, dnsAnswers: 0 }, decisionMicros: { p50: () => 7, p99: () => 42 } };
    const metrics = new AdminMetrics({ controller: h.controller, processMetrics: false, dataplane: fake as never });
    fake.counters.packets = 10; fake.counters.accepted = 8; fake.counters.dropped = 2;
    let text = await metrics.text();
    expect(text).toContain('kwp_dataplane_packets_total 10');
    expect(text).toContain('kwp_dataplane_dropped_total 2');
    expect(text).toContain('kwp_packet_process_micros{quantile="0.99"} 42');
    fake.counters.packets = 15;
    text = await metrics.text();
    expect(text).toContain('kwp_dataplane_packets_total 15');
    expect(text).toContain('kwp_dataplane_parse_errors_total 0');
  });

  it('metrics say which path strict mode cuts connections with, and how many it cut', async () => {
    const h = await harness({});
    const fake = { counters: { strictCut: 0, strictCutFailures: 0 }, decisionMicros: { p50: () => 0, p99: () => 0 }, strictCutPath: 'netlink' as string | undefined };
    const metrics = new AdminMetrics({ controller: h.controller, processMetrics: false, dataplane: fake as never });
    fake.counters.strictCut = 9000;
    let text = await metrics.text();
    expect(text).toContain('kwp_dataplane_strict_cut_path{path="netlink"} 1');
    expect(text).toContain('kwp_dataplane_strict_cut_total 9000');
    fake.strictCutPath = 'conntrack-process';
    text = await metrics.text();
    expect(text).toContain('kwp_dataplane_strict_cut_path{path="conntrack-process"} 1');
    expect(text).not.toContain('path="netlink"');
  });

  it('metrics count verdicts, failures, swaps, uploads and NFQUEUE state with the kwp_ prefix', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-nfq-'));
    const proc = join(dir, 'nfnetlink_queue');
    writeFileSync(proc, '  100  12345     3   2 65531     7     9      812  1\n');
    const h = await harness({ nfqueueStatsFile: proc });
    const app = h.server.app;
    const packet = { family: 4 as const, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]), srcPort: 1, dstPort: 80, icmpType: 0, icmpCode: 0 };
    for (let i = 0; i < 5; i++) h.engine.allows(packet);
    await upload(h, new Uint8Array(10), 'junk');
    await h.controller.set({ stages: [{ name: 'flaky', module: 'scripted', config: { egress: 'Accept', ingress: 'Accept', trapPort: 666 } }] });
    h.engine.allows({ ...packet, dstPort: 666 });
    const text = (await app.inject({ method: 'GET', url: '/metrics', headers: auth })).body;
    expect(text).toContain('kwp_stage_verdicts_total{stage="allow",module="scripted",direction="egress",verdict="accept"} 5');
    expect(text).toContain('kwp_stage_verdicts_total{stage="allow",module="scripted",direction="ingress",verdict="accept"} 5');
    expect(text).toContain('kwp_module_traps_total{stage="flaky",module="scripted"} 1');
    expect(text).toContain('kwp_pipeline_revision 2');
    expect(text).toContain('kwp_pipeline_swaps_total{action="set"} 1');
    expect(text).toContain('kwp_module_uploads_total{outcome="KWP_ERR_MODULE_INVALID"} 1');
    expect(text).toMatch(/kwp_stage_decision_seconds_count\{stage="allow"\} 10/);
    expect(text).toContain('kwp_nfqueue_waiting_packets{queue="100"} 3');
    expect(text).toContain('kwp_nfqueue_user_dropped_packets{queue="100"} 9');
  });

  it('a stage shared between revisions is counted and timed once, also after the pipeline that first ran it is retired', async () => {
    const h = await harness();
    const app = h.server.app;
    const packet = { family: 4 as const, protocol: 6, src: new Uint8Array([10, 0, 0, 1]), dst: new Uint8Array([10, 0, 0, 2]), srcPort: 1, dstPort: 80, icmpType: 0, icmpCode: 0 };
    const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics', headers: auth })).body;
    const first = h.engine.active;
    for (let i = 0; i < 5; i++) h.engine.allows(packet);
    await scrape();
    // A reorder: both stages are the first pipeline's, shared.
    await h.controller.set(DENY_FIRST);
    expect(h.engine.active.stages[1]).toBe(first.stages[0]);
    for (let i = 0; i < 3; i++) h.engine.allows(packet);
    // The first pipeline is retired; its stages live on in the one kept for rollback.
    await h.controller.set({ stages: [scriptedStage('other', 'Accept')] });
    await h.controller.set(ALLOW_FIRST);
    expect(h.engine.active.stages[0]).toBe(first.stages[0]);
    for (let i = 0; i < 2; i++) h.engine.allows(packet);
    const text = await scrape();
    expect(text).toContain('kwp_stage_verdicts_total{stage="allow",module="scripted",direction="egress",verdict="accept"} 7');
    expect(text).toContain('kwp_stage_verdicts_total{stage="deny",module="scripted",direction="egress",verdict="deny"} 3');
    // One sample per decision (sampleEvery 1): 7 packets, both directions, through the allow stage.
    expect(text).toMatch(/kwp_stage_decision_seconds_count\{stage="allow"\} 14\n/);
  });

  it('metrics show the decision-cache hits and misses of each stage that keeps a cache', async () => {
    const h = await harness();
    h.engine.state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: 'default', name: 'b-from-a' },
      spec: { podSelector: { matchLabels: { app: 'b' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'a' } } }] }] },
    } });
    expect((await upload(h, readFileSync(join(builtinWasmDir(), 'network-policy.wasm')), 'network-policy')).statusCode).toBe(201);
    await h.controller.set({ stages: [
      { name: 'np', module: 'network-policy' },
      { name: 'np-computed', module: 'network-policy', config: { decisionCache: false } },
      scriptedStage('allow', 'Accept'),
    ] });
    const packet = { family: 4 as const, protocol: 6, src: new Uint8Array([10, 0, 0, 2]), dst: new Uint8Array([10, 0, 0, 1]), srcPort: 1, dstPort: 80, icmpType: 0, icmpCode: 0 };
    // b → a: b's egress is not isolated (Next), a's ingress is not either. Both
    // directions are one module call (the pair walk), answered by one pair
    // entry: computed for the first packet, a hit for each of the other two.
    for (let i = 0; i < 3; i++) h.engine.allows({ ...packet, srcPort: 1000 + i });
    const text = (await h.server.app.inject({ method: 'GET', url: '/metrics', headers: auth })).body;
    expect(text).toContain('kwp_stage_decision_cache_misses{stage="np",module="network-policy"} 1');
    expect(text).toContain('kwp_stage_decision_cache_hits{stage="np",module="network-policy"} 2');
    expect(text).not.toMatch(/kwp_stage_decision_cache_\w+\{stage="np-computed"/);
    expect(text).not.toMatch(/kwp_stage_decision_cache_\w+\{stage="allow"/);
  });

  it('the OpenAPI document lists every route', async () => {
    const h = await harness();
    const doc = (await h.server.app.inject({ method: 'GET', url: '/openapi.json', headers: auth })).json();
    expect(doc.openapi).toBe('3.0.3');
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${path}`)).sort();
    expect(routes).toEqual([
      'DELETE /v1/modules/{name}', 'GET /healthz', 'GET /metrics', 'GET /readyz', 'GET /v1/cluster/namespaces', 'GET /v1/cluster/pods', 'GET /v1/flows',
      'GET /v1/modules', 'GET /v1/modules/{name}', 'GET /v1/pipeline', 'GET /v1/pipeline/history', 'GET /v1/pipeline/status',
      'POST /v1/diff', 'POST /v1/explain', 'POST /v1/matrix', 'POST /v1/modules', 'POST /v1/pipeline/rollback', 'PUT /v1/pipeline',
    ]);
  });

  it('an unknown route is a KWP_ERR_ROUTE_NOT_FOUND', async () => {
    const h = await harness();
    const res = await h.server.app.inject({ method: 'GET', url: '/v2/nothing', headers: auth });
    expect([res.statusCode, res.json().code]).toEqual([404, 'KWP_ERR_ROUTE_NOT_FOUND']);
  });
});

describe('authentication', () => {
  const routes: Array<[string, string, 'read' | 'write']> = [
    ['GET', '/v1/modules', 'read'], ['GET', '/v1/pipeline', 'read'], ['GET', '/v1/pipeline/history', 'read'], ['GET', '/metrics', 'read'],
    ['GET', '/openapi.json', 'read'], ['POST', '/v1/explain', 'read'],
    ['GET', '/v1/pipeline/status', 'read'], ['GET', '/v1/cluster/pods', 'read'], ['GET', '/v1/cluster/namespaces', 'read'], ['POST', '/v1/matrix', 'read'],
    ['POST', '/v1/modules?name=x&version=1', 'write'], ['PUT', '/v1/pipeline', 'write'], ['POST', '/v1/pipeline/rollback', 'write'], ['DELETE', '/v1/modules/x', 'write'],
  ];

  it.each(routes)('%s %s without a token is 401 and with a wrong token 403', async (method, url) => {
    const h = await harness();
    const none = await h.server.app.inject({ method: method as 'GET', url });
    expect([none.statusCode, none.json().code]).toEqual([401, 'KWP_ERR_UNAUTHORIZED']);
    const wrong = await h.server.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } });
    expect([wrong.statusCode, wrong.json().code]).toEqual([403, 'KWP_ERR_FORBIDDEN']);
  });

  it('with readsOpen, reads need no token but every change still does', async () => {
    const h = await harness({ readsOpen: true });
    for (const [method, url, access] of routes) {
      const payloads: Record<string, object> = { '/v1/explain': { src: 'default/a', dst: 'default/b', port: 80 }, '/v1/matrix': { ports: ['80'] } };
      const res = await h.server.app.inject({ method: method as 'GET', url, ...(method === 'POST' && payloads[url] ? { payload: payloads[url] } : {}) });
      if (access === 'read') expect(res.statusCode, `${method} ${url}`).toBe(200);
      else expect(res.json().code, `${method} ${url}`).toBe('KWP_ERR_UNAUTHORIZED');
    }
  });

  it('a server without a configured token refuses changes even with a bearer header', async () => {
    const h = await harness({ token: undefined, readsOpen: true });
    const res = await h.server.app.inject({ method: 'POST', url: '/v1/pipeline/rollback', headers: auth });
    expect([res.statusCode, res.json().code]).toEqual([401, 'KWP_ERR_UNAUTHORIZED']);
    expect(res.json().message).toMatch(/no token configured/);
  });
});

describe('embedding', () => {
  it('the plugin mounts under a prefix in another Fastify without touching its other routes or error handling', async () => {
    const h = await harness();
    const host = Fastify();
    host.get('/own', async () => { throw new Error('host error'); });
    await host.register(adminApi, { prefix: '/kwp', store: h.store, controller: h.controller, engine: h.engine, token: ADMIN_TOKEN });
    const mine = await host.inject({ method: 'GET', url: '/kwp/v1/pipeline', headers: auth });
    expect([mine.statusCode, mine.json().revision]).toEqual([200, 1]);
    const theirs = await host.inject({ method: 'GET', url: '/own' });
    expect(theirs.statusCode).toBe(500);
    expect(theirs.json().code).toBeUndefined();
    const doc = (await host.inject({ method: 'GET', url: '/kwp/openapi.json', headers: auth })).json();
    expect(Object.keys(doc.paths)).toContain('/kwp/v1/pipeline');
    await host.close();
  });

  it('a host server with its own OpenAPI document gets the admin routes in it', async () => {
    const h = await harness();
    const host = Fastify();
    await host.register(swagger, { openapi: { info: { title: 'host', version: '1' } } });
    host.get('/own', async () => 'ok');
    await host.register(adminApi, { prefix: '/kwp', store: h.store, controller: h.controller, engine: h.engine, token: ADMIN_TOKEN });
    await host.ready();
    const paths = Object.keys(host.swagger().paths ?? {});
    expect(paths).toEqual(expect.arrayContaining(['/own', '/kwp/v1/pipeline', '/kwp/v1/modules']));
    const viaAdmin = await host.inject({ method: 'GET', url: '/kwp/openapi.json', headers: auth });
    expect(viaAdmin.json().info.title).toBe('host');
    await host.close();
  });
});
