import { describe, it, expect, afterEach } from 'vitest';
import { auth, type AdminHarness } from './fixtures/admin-harness.js';
import { closeHarnesses, explainOverHttp as explain, explainWhileWatched, harnessRunningAlone, slowestHealthAnswer, until } from './fixtures/health-watch.js';
import { sandboxModule, DEFAULT_META } from './fixtures/sandbox-modules.js';
import { Kinds } from '../host/contract.js';
import type { SandboxLimits } from '../host/runtime/limits.js';

// Hostile modules uploaded to an agent (store, controller, engine with
// isolated instances, admin API over HTTP) whose loops fuel cannot stop in
// time: each iteration is 2,000 instructions of straight-line code and pays
// one unit, and the tank is raised to the most the limits allow (30 million
// units a decision: minutes of looping). They behave for the self-test's probe
// (port 80) and loop for port 4242 only. The wall-clock backstop alone bounds
// them: the call is stopped at its deadline, the flow answered by the stage's
// failure policy, /healthz answers within a second throughout, and the stage
// is rebuilt.
const HOSTILE_PORT = 4242;
const LIMITS: Partial<SandboxLimits> = { fuelPerDecision: 30_000_000, fuelPerCall: 2_000_000_000, feedDeadlineMs: 2000, deadlineQuarantineMs: 500 };
/** The default decisionDeadlineMs (50) and callDeadlineMs (500), plus what a loaded machine adds to one HTTP request. */
const DECISION_BOUND_MS = 3000;
const HEALTH_BOUND_MS = 1000;

/** A loop whose every iteration is 2,000 additions: 30 million units of fuel (500 a turn) outlast the 50 ms deadline. */
const HEAVY_LOOP = `(loop $forever ${'(global.set $sink (i32.add (global.get $sink) (i32.const 7)))'.repeat(2000)} (br $forever))`;

const open: AdminHarness[] = [];
afterEach(() => closeHarnesses(open));

/** kwp_decide: the hostile port loops; everything else is accepted with the port as reason code (the batch is at 4096, one record). */
const DECIDE = `
  (if (i32.eq (i32.load16_u (i32.const ${4096 + 6})) (i32.const ${HOSTILE_PORT})) (then ${HEAVY_LOOP}))
  (i32.store8 (i32.const ${4096 + 52}) (i32.const 1))
  (i32.store (i32.const ${4096 + 56}) (i32.load16_u (i32.const ${4096 + 6})))
  (i32.const 0)`;

function agentWith(name: string, opts: Parameters<typeof sandboxModule>[0], config?: Record<string, unknown>) {
  const bytes = sandboxModule({ meta: { ...DEFAULT_META, name, kinds: [Kinds.NetworkPolicy], failurePolicy: 'fail-closed' }, ...opts });
  return harnessRunningAlone(open, name, bytes, { limits: LIMITS, isolation: 'worker' }, config);
}

describe('a module looping where fuel cannot stop it in time, on an agent over HTTP', () => {
  it('in kwp_decide: that flow is denied within the bound, others are decided, /healthz answers, the stage is counted and rebuilt', async () => {
    const { url, h, put } = await agentWith('loops-in-decide', { decideBody: DECIDE });
    expect(put.status, await put.clone().text()).toBe(200);
    expect((await explain(url, 80)).body.verdict).toBe('allow');
    const { body, ms, slowest } = await explainWhileWatched(url, HOSTILE_PORT);
    expect(body.verdict).toBe('deny');
    expect(body.egress[0]).toMatchObject({ stage: 'hostile', failure: 'deadline' });
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
    const metrics = await (await fetch(`${url}/metrics`, { headers: auth })).text();
    expect(metrics).toMatch(/kwp_stage_deadline_exceeded_total\{[^}]*stage="hostile"[^}]*\} 1/);
    const stage = h.engine.active.stages[0];
    await until('the rebuild', () => stage.healthy && stage.counters.rebuilds >= 1);
    expect((await explain(url, 80)).body.verdict).toBe('allow');
    expect(await (await fetch(`${url}/metrics`, { headers: auth })).text()).toMatch(/kwp_stage_rebuilds_total\{[^}]*stage="hostile"[^}]*\} 1/);
  }, 120_000);

  it('in kwp_configure: PUT /v1/pipeline is refused within the bound and the running pipeline stays', async () => {
    const started = performance.now();
    const { url, put } = await agentWith('loops-in-configure', {
      decideBody: DECIDE,
      configureBody: `(if (i32.gt_u (local.get $len) (i32.const 2)) (then ${HEAVY_LOOP})) (i32.const 0)`,
    }, { hang: true });
    const body = await put.json();
    expect(put.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(body)).toContain('KWP_ERR_DEADLINE_EXCEEDED');
    expect(performance.now() - started).toBeLessThan(60_000);
    expect((await (await fetch(`${url}/healthz`)).status)).toBe(200);
  }, 120_000);

  it('in kwp_object: the delivery is stopped, /healthz answers, and the stage keeps the last state it held', async () => {
    const { url, h, put } = await agentWith('loops-in-object', {
      decideBody: DECIDE,
      objectBody: `(if (i32.gt_u (local.get $len) (i32.const 1500)) (then ${HEAVY_LOOP})) (i32.const 0)`,
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const stage = h.engine.active.stages[0];
    const large = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'large', namespace: 'default' },
      spec: { podSelector: {}, ingress: [{ ports: Array.from({ length: 200 }, (_, i) => ({ protocol: 'TCP', port: 1000 + i })) }] },
    };
    const delivered = new Promise<void>((resolve) => setTimeout(() => { h.engine.state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: large }); resolve(); }, 100));
    const slowest = await slowestHealthAnswer(url, delivered.then(() => until('the last good state held', () => stage.stateProblem?.kind === 'rejected' && stage.healthy)));
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
    expect(stage.counters.deadlineExceeded).toBeGreaterThanOrEqual(1);
    expect((await explain(url, 80)).body.verdict).toBe('allow');
  }, 120_000);

  it('in kwp_explain: the reason is dropped within the bound, the verdict stands, /healthz answers', async () => {
    const { url, put } = await agentWith('loops-in-explain', {
      decideBody: DECIDE,
      explainBody: `(if (i32.eq (local.get $reason) (i32.const ${HOSTILE_PORT + 1})) (then ${HEAVY_LOOP})) (i32.const 0)`,
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const { body, ms, slowest } = await explainWhileWatched(url, HOSTILE_PORT + 1);
    expect(body.egress[0]).toMatchObject({ stage: 'hostile', verdict: 'Accept' });
    expect(body.egress[0].reason).toBeUndefined();
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
  }, 120_000);
});
