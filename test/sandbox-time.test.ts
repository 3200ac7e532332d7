import { describe, it, expect, afterEach } from 'vitest';
import type { AdminHarness } from './fixtures/admin-harness.js';
import { closeHarnesses, explainOverHttp as explain, explainWhileWatched, harnessRunningAlone } from './fixtures/health-watch.js';
import { sandboxModule, fillLoop, BIG_MEMORY, DEFAULT_META } from './fixtures/sandbox-modules.js';

// Hostile modules on the live decision path of an agent (store, controller,
// engine and admin API over HTTP): they behave for the self-test's probe
// (port 80) and fill 64 MiB of memory in an endless loop for port 4242 only,
// in kwp_decide or in kwp_explain. Metered by length, each such call runs out
// of its tank: the flow is answered with the stage's failure policy within
// the bound, and /healthz keeps answering within a second.
const HOSTILE_PORT = 4242;
/** What the default tanks allow, generously: a decision's million units of 64 MiB fills take ~30 ms. */
const DECISION_BOUND_MS = 5000;
const HEALTH_BOUND_MS = 1000;
const FILL = 64 * 1024 * 1024 - 1024;

const open: AdminHarness[] = [];
afterEach(() => closeHarnesses(open));

/** kwp_decide: for the hostile port, `hostile`; otherwise Accept with reason 1 (the batch is at 4096, one record). */
function decideFor(hostile: string): string {
  return `
    (if (i32.eq (i32.load16_u (i32.const ${4096 + 6})) (i32.const ${HOSTILE_PORT})) (then ${hostile}))
    (i32.store8 (i32.const ${4096 + 52}) (i32.const 1))
    (i32.store (i32.const ${4096 + 56}) (i32.const 1))
    (i32.const 0)`;
}

async function agentWith(name: string, opts: Parameters<typeof sandboxModule>[0]): Promise<string> {
  const bytes = sandboxModule({ memory: BIG_MEMORY, meta: { ...DEFAULT_META, name, failurePolicy: 'fail-closed' }, ...opts });
  // The upload's self-test bound (1 s of wall clock) has its own tests
  // (host/control/upload-deadline.test.ts); here it is not the subject, and on
  // a loaded 2-core machine instantiating a 64 MiB memory has taken longer.
  const { url, put } = await harnessRunningAlone(open, name, bytes, { limits: { selfTestTimeoutMs: 10_000 } });
  expect(put.status, await put.clone().text()).toBe(200);
  return url;
}

describe('a module filling memory in a loop for one port is bounded on the decision path', () => {
  it('in kwp_decide: that flow gets the stage failure policy within the bound, other flows are decided, /healthz answers throughout', async () => {
    const url = await agentWith('fills-in-decide', { decideBody: decideFor(`${fillLoop(FILL).replace(/\(i32\.const 0\)$/, '')}`) });
    expect((await explain(url, 80)).body.verdict).toBe('allow');
    const { body, ms, slowest } = await explainWhileWatched(url, HOSTILE_PORT);
    expect(body.verdict).toBe('deny');
    expect(body.egress[0]).toMatchObject({ stage: 'hostile', failure: 'fuel' });
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
  }, 60_000);

  it('in kwp_explain: the reason is dropped within the bound, the verdict stands, /healthz answers throughout', async () => {
    // The decision stores the flow's port as its reason code; kwp_explain fills in a loop for the hostile one.
    const decide = `
      (i32.store8 (i32.const ${4096 + 52}) (i32.const 1))
      (i32.store (i32.const ${4096 + 56}) (i32.load16_u (i32.const ${4096 + 6})))
      (i32.const 0)`;
    const url = await agentWith('fills-in-explain', {
      decideBody: decide,
      explainBody: `(if (i32.eq (local.get $reason) (i32.const ${HOSTILE_PORT})) (then ${fillLoop(FILL).replace(/\(i32\.const 0\)$/, '')})) (i32.const 0)`,
    });
    const { body, ms, slowest } = await explainWhileWatched(url, HOSTILE_PORT);
    expect(body.egress[0]).toMatchObject({ stage: 'hostile', verdict: 'Accept' });
    expect(body.egress[0].reason).toBeUndefined();
    expect(ms).toBeLessThan(DECISION_BOUND_MS);
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
  }, 60_000);
});
