// The web console in a real browser: Debian's chromium, headless, driven by
// playwright-core (which never downloads a browser of its own), against a real
// `kwp agent --dataplane=off` child process serving the compiled package
// (npm run build first; `npm test` does). Every check reads the agent's admin
// API afterwards, so a console that only looks right fails.
// KWP_UPDATE_SCREENSHOTS=1 also writes docs/console/*.png.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const CHROMIUM = process.env.KWP_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.KWP_UPDATE_SCREENSHOTS === '1';
const SHOT_DIR = join(ROOT, 'docs', 'console');
/** A laptop screen. */
const VIEWPORT = { width: 1366, height: 860 };

interface RunningAgent { url: string; token: string; child: ChildProcess; stateDir: string }

async function startAgent(extra: string[] = []): Promise<RunningAgent> {
  const dir = mkdtempSync(join(tmpdir(), 'kwp-console-'));
  const token = 'console-test-token-' + Math.random().toString(16).slice(2).padEnd(16, '0');
  writeFileSync(join(dir, 'token'), token + '\n', { mode: 0o600 });
  const stateDir = join(dir, 'state');
  const child = spawn(process.execPath, [
    join(ROOT, 'bin', 'kwp.js'), 'agent', '--dataplane=off', '--manifests', join(ROOT, 'examples', 'basic', 'manifests'),
    '--state-dir', stateDir, '--admin-token-file', join(dir, 'token'), '--admin-address', '127.0.0.1:0', ...extra,
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  const log: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kwp agent did not report its admin URL within 30 s:\n${log.join('\n')}`)), 30_000);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`kwp agent exited with ${code}:\n${log.join('\n')}`)); });
    createInterface({ input: child.stderr! }).on('line', (line) => {
      log.push(line);
      try {
        const entry = JSON.parse(line);
        if (entry.msg === 'admin API listening') { clearTimeout(timer); resolve(entry.url); }
      } catch { /* not a log line */ }
    });
  });
  return { url, token, child, stateDir };
}

async function stopAgent(a: RunningAgent | undefined) {
  if (!a || a.child.exitCode !== null) return;
  const exited = new Promise((resolve) => a.child.once('exit', resolve));
  a.child.kill('SIGTERM');
  await exited;
}

/** The admin API, read and changed directly, to check what the console did. */
async function call(a: RunningAgent, path: string, init: { method?: string; body?: unknown; bytes?: Uint8Array; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${a.token}`, ...(init.headers ?? {}) };
  let body: BodyInit | undefined;
  if (init.bytes) { body = init.bytes as BodyInit; headers['content-type'] = 'application/wasm'; }
  else if (init.body !== undefined) { body = JSON.stringify(init.body); headers['content-type'] = 'application/json'; }
  const res = await fetch(`${a.url}${path}`, { method: init.method ?? 'GET', headers, body });
  return { status: res.status, json: await res.json() as any };
}

const stageOrder = async (a: RunningAgent) => (await call(a, '/v1/pipeline')).json.stages.map((s: { name: string }) => s.name);

async function shot(page: Page, name: string) {
  if (!SHOTS) return;
  mkdirSync(SHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SHOT_DIR, `${name}.png`), fullPage: true });
}

let agent: RunningAgent;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist', 'host', 'admin', 'ui', 'index.html'))) {
    throw new Error('dist/host/admin/ui is missing: run "npm run build" first (npm test does)');
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium package (.ci/run does) or point KWP_CHROMIUM at one`);
  }
  [agent, browser] = await Promise.all([
    startAgent(),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] }),
  ]);
  page = await browser.newPage({ viewport: VIEWPORT, reducedMotion: 'reduce' });
  page.on('pageerror', (err) => pageErrors.push(err.message));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stopAgent(agent);
});

describe('the web console in headless Chromium, against a running kwp agent', () => {
  it('asks for the token the agent requires for reads, then draws the pipeline stages in order with module, version, digest, mode and failure policy', async () => {
    await page.goto(`${agent.url}/ui/`);
    const dialog = page.locator('#token-dialog');
    await dialog.waitFor({ state: 'visible' });
    await expect.poll(() => page.textContent('#token-why')).toMatch(/GET \/v1\/pipeline\/status: send the admin token as "Authorization: Bearer <token>"/);
    await page.fill('#token-input', agent.token);
    await page.click('#token-dialog button[value="ok"]');
    await dialog.waitFor({ state: 'hidden' });

    const status = (await call(agent, '/v1/pipeline/status')).json;
    const names = status.stages.map((s: { name: string }) => s.name);
    await page.locator('.stage').nth(names.length - 1).waitFor();
    expect(await page.locator('.stage').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.stage))).toEqual(names);
    expect(await page.locator('.stage .label').allTextContents()).toEqual(status.stages.map((s: { label: string }) => s.label));
    const np = status.stages.find((s: { name: string }) => s.name === 'np');
    const card = page.locator('[data-stage="np"]');
    const facts = await card.locator('.facts').innerText();
    for (const fact of [np.moduleName, np.moduleVersion, np.sha256.slice(0, 12), np.failurePolicy]) expect(facts).toContain(fact);
    expect(await card.locator('.badge').innerText()).toBe(np.mode);
    // The token stays in this tab's session storage, never in the URL.
    expect(await page.evaluate(() => sessionStorage.getItem('kwp.adminToken'))).toBe(agent.token);
    expect(page.url()).not.toContain(agent.token);
  });

  it('shows the verdict counters the agent keeps, live, and a rate per second for each', async () => {
    for (let i = 0; i < 3; i++) await call(agent, '/v1/explain', { method: 'POST', body: { src: 'x/a', dst: 'y/a', port: 80 } });
    await call(agent, '/v1/explain', { method: 'POST', body: { src: 'x/b', dst: 'y/a', port: 80 } });
    const np = (await call(agent, '/v1/pipeline/status')).json.stages.find((s: { name: string }) => s.name === 'np').counters;
    expect([np.accept, np.deny]).toEqual([3, 1]);
    const cell = (what: string) => page.textContent(`[data-stage="np"] [data-total="${what}"]`);
    await expect.poll(() => cell('accept'), { timeout: 10_000 }).toBe('3');
    expect([await cell('deny'), await cell('traps'), await cell('fuelExhausted')]).toEqual(['1', '0', '0']);
    // A rate needs two readings of the same revision: a number instead of the dash.
    await expect.poll(() => page.textContent('[data-stage="np"] [data-rate="accept"]'), { timeout: 10_000 }).toMatch(/^\d+\.\d$/);
    await shot(page, 'pipeline');
  });

  it('moves a stage by keyboard into a draft, previews the new order without changing the agent, and applies it with If-Match', async () => {
    const before = await stageOrder(agent);
    expect(before).toEqual(['cnp-admin', 'anp', 'np', 'banp', 'cnp-baseline']);
    await page.focus('[data-stage="np"]');
    await page.keyboard.press('Alt+ArrowUp');
    await page.keyboard.press('Alt+ArrowUp');
    expect(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.stage)).toBe('np');
    expect(await page.locator('.stage').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.stage))).toEqual(['np', 'cnp-admin', 'anp', 'banp', 'cnp-baseline']);
    const preview = page.locator('.preview');
    await preview.waitFor();
    expect(await preview.locator('h2').innerText()).toBe('Draft: a new order based on revision 1');
    expect(await preview.locator('li.changed').allInnerTexts()).toEqual(['NP (np) ↑ from 3', 'CNP:Admin (cnp-admin) ↓ from 1', 'ANP (anp) ↓ from 2']);
    expect(await stageOrder(agent)).toEqual(before);
    await shot(page, 'pipeline-draft');

    await preview.getByRole('button', { name: 'Apply (If-Match: "1")' }).click();
    await expect.poll(async () => (await call(agent, '/v1/pipeline')).json.revision, { timeout: 10_000 }).toBe(2);
    expect(await stageOrder(agent)).toEqual(['np', 'cnp-admin', 'anp', 'banp', 'cnp-baseline']);
    await expect.poll(() => page.textContent('[role="status"].ok')).toBe('Applied: revision 2 is active (rollback goes to revision 1).');
    expect(await preview.isHidden()).toBe(true);
  });

  it('a draft made on a revision that is no longer active is refused by the agent, and the refusal is shown as sent', async () => {
    await page.focus('[data-stage="cnp-baseline"]');
    await page.keyboard.press('Alt+ArrowUp');
    await page.locator('.preview').waitFor();
    // Someone else changes the pipeline meanwhile (same order, a new revision).
    const current = (await call(agent, '/v1/pipeline')).json;
    const other = await call(agent, '/v1/pipeline', { method: 'PUT', body: { stages: current.stages }, headers: { 'if-match': `"${current.revision}"` } });
    expect(other.json.revision).toBe(3);
    await page.getByRole('button', { name: 'Apply (If-Match: "2")' }).click();
    const error = page.locator('[role="alert"].error', { hasText: 'KWP_ERR_PRECONDITION_FAILED' });
    await error.waitFor();
    expect(await error.innerText()).toMatch(/^KWP_ERR_PRECONDITION_FAILED: If-Match names revision 2 but revision 3 is active/);
    expect((await call(agent, '/v1/pipeline')).json.revision).toBe(3);
    await page.getByRole('button', { name: 'Discard draft' }).click();
    await page.locator('.preview').waitFor({ state: 'hidden' });
  });

  it('moves a stage by drag and drop and applies it', async () => {
    await page.dragAndDrop('[data-stage="banp"]', '[data-stage="np"]');
    expect(await page.locator('.stage').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.stage))).toEqual(['banp', 'np', 'cnp-admin', 'anp', 'cnp-baseline']);
    await page.getByRole('button', { name: 'Apply (If-Match: "3")' }).click();
    await expect.poll(async () => (await call(agent, '/v1/pipeline')).json.revision, { timeout: 10_000 }).toBe(4);
    expect(await stageOrder(agent)).toEqual(['banp', 'np', 'cnp-admin', 'anp', 'cnp-baseline']);
  });

  it('rolls back with one click, and the history shows every change', async () => {
    const button = page.getByRole('button', { name: 'Roll back to revision 3' });
    await button.click();
    await expect.poll(async () => (await call(agent, '/v1/pipeline')).json.revision, { timeout: 10_000 }).toBe(3);
    expect(await stageOrder(agent)).toEqual(['np', 'cnp-admin', 'anp', 'banp', 'cnp-baseline']);
    const history = (await call(agent, '/v1/pipeline/history')).json.history;
    expect(history.map((e: { action: string }) => e.action)).toEqual(['startup', 'set', 'set', 'set', 'rollback']);
    await expect.poll(() => page.locator('table.history tbody tr').count(), { timeout: 10_000 }).toBe(5);
    expect((await page.locator('table.history tbody tr').first().innerText()).split('\t').slice(1, 4)).toEqual(['rollback', '3', '4']);
    await page.getByRole('button', { name: 'Roll back to revision 4' }).waitFor();
    await shot(page, 'pipeline-history');
  });

  it('uploads a module chosen with the file picker and lists it with its signature status and users', async () => {
    await page.click('a[href="#/modules"]');
    await page.getByRole('heading', { name: 'Built-in modules in the active pipeline' }).waitFor();
    await page.setInputFiles('#upload-file', join(ROOT, 'dist', 'wasm', 'examples', 'deny-ports.wasm'));
    // The name and version come from the file's own kwp.meta.
    await expect.poll(() => page.inputValue('#upload-name')).toBe('deny-ports');
    expect(await page.inputValue('#upload-version')).toBe('1.0.0');
    await page.fill('#upload-config', '{"ports":[81]}');
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await page.locator('#upload-result .ok').waitFor({ timeout: 30_000 });
    const stored = (await call(agent, '/v1/modules')).json.modules;
    expect(stored.map((m: { name: string; version: string }) => `${m.name}@${m.version}`)).toEqual(['deny-ports@1.0.0']);
    expect(await page.textContent('#upload-result')).toBe(`Stored: deny-ports@1.0.0 sha256:${stored[0].sha256} (${stored[0].size} bytes, ABI ${stored[0].abi})`);
    const row = page.locator('tr[data-module="deny-ports@1.0.0"]');
    await row.waitFor({ timeout: 10_000 });
    expect(await row.innerText()).toContain('unsigned');
  });

  it('shows a refused upload dropped on the page with the code and message the agent sent', async () => {
    const junk = [...new TextEncoder().encode('MZ this is not wasm')];
    await page.evaluate((bytes) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([new Uint8Array(bytes)], 'junk.wasm', { type: 'application/wasm' }));
      document.getElementById('dropzone')!.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    }, junk);
    await expect.poll(() => page.textContent('#upload-chosen')).toMatch(/^junk\.wasm, 19 bytes — no readable kwp.meta/);
    await page.fill('#upload-name', 'junk');
    await page.fill('#upload-version', '0.1.0');
    await page.fill('#upload-config', '');
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    const error = page.locator('#upload-result .error');
    await error.waitFor();
    const direct = await call(agent, '/v1/modules?name=junk&version=0.1.0', { method: 'POST', bytes: new Uint8Array(junk) });
    expect(direct.status).toBe(400);
    expect(await error.innerText()).toBe(`${direct.json.code}: ${direct.json.message}`);
    expect(direct.json.code).toBe('KWP_ERR_MODULE_INVALID');
    await shot(page, 'modules');
  });

  it('explains a flow between pods chosen from the cluster in both directions, as the agent decides it', async () => {
    await page.click('a[href="#/explain"]');
    await expect.poll(() => page.locator('#src option').allTextContents()).toEqual(['x/a  (app=web)', 'x/b  (app=batch)', 'y/a  (app=db)', 'y/b  (app=cache)', 'another address…']);
    await page.selectOption('#src', 'x/a');
    await page.selectOption('#dst', 'y/a');
    await page.fill('#port', '80');
    await page.getByRole('button', { name: 'Explain' }).click();
    const forward = (await call(agent, '/v1/explain', { method: 'POST', body: { src: 'x/a', dst: 'y/a', protocol: 'TCP', port: 80 } })).json;
    const reverse = (await call(agent, '/v1/explain', { method: 'POST', body: { src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 } })).json;
    const walks = page.locator('#explain-result .walkthrough');
    await expect.poll(() => walks.allInnerTexts()).toEqual([forward.walkthrough, reverse.walkthrough]);
    expect(forward.walkthrough).toContain('ALLOW');
    expect(await page.locator('#explain-result h3').allInnerTexts()).toEqual(['Forward: x/a → y/a TCP/80 ALLOW', `Reverse: y/a → x/a TCP/80 ${reverse.verdict.toUpperCase()}`]);
    // The ingress walk of y/a ends at the stage that accepted.
    const ingress = page.locator('#explain-result .explanation').first().locator('.walk').nth(1).locator('li');
    expect(await ingress.count()).toBe(forward.ingress.length);
    expect(await ingress.last().innerText()).toBe(`[NP] Accept ${forward.ingress.at(-1).reason}`);
    await shot(page, 'explain');
  });

  it('draws the reachability of the chosen ports as a heatmap computed by the agent, and walks a cell through on click', async () => {
    await page.click('a[href="#/reachability"]');
    await page.fill('#matrix-ports', '80, 81');
    await page.getByRole('button', { name: 'Show matrix' }).click();
    const api = (await call(agent, '/v1/matrix', { method: 'POST', body: { ports: ['80', '81'] } })).json;
    await page.locator('#heatmap table').waitFor();
    const cells = await page.locator('#heatmap td.cell button').evaluateAll((els) => els.map((e) => {
      const b = e as HTMLElement;
      return [b.dataset.src, b.dataset.dst, b.dataset.allowed, b.textContent];
    }));
    const expected = api.pods.flatMap((src: string, i: number) => api.pods.map((dst: string, j: number) => {
      const allowed = api.matrices.filter((m: any) => m.rows[i][j] === '.').map((m: any) => `${m.protocol}/${m.port}`);
      return [src, dst, allowed.join(' '), allowed.length === 2 ? '✓' : allowed.length === 0 ? '✗' : '1/2'];
    }));
    expect(cells).toEqual(expected);
    expect(cells.find((c) => c[0] === 'x/a' && c[1] === 'y/a')).toEqual(['x/a', 'y/a', 'TCP/80', '1/2']);
    await page.click('button[data-src="x/a"][data-dst="y/a"]');
    const walks = page.locator('#cell-detail .walkthrough');
    await expect.poll(() => walks.count()).toBe(2);
    expect(await walks.allInnerTexts()).toEqual([
      (await call(agent, '/v1/explain', { method: 'POST', body: { src: 'x/a', dst: 'y/a', protocol: 'TCP', port: 80 } })).json.walkthrough,
      (await call(agent, '/v1/explain', { method: 'POST', body: { src: 'x/a', dst: 'y/a', protocol: 'TCP', port: 81 } })).json.walkthrough,
    ]);
    await shot(page, 'reachability');
  });

  it('the Flows view lists the flow ring the agent serves, with how it aggregates', async () => {
    await page.click('a[href="#/flows"]');
    // The list says "Loading…" (also a hint) until the ring arrives: wait for the ring's own note.
    const note = page.locator('#flows-list .hint', { hasText: 'records, aggregated every' });
    await note.waitFor();
    // This agent runs without a dataplane: no connection is decided, and the view says so rather than inventing rows.
    expect(await note.innerText()).toBe('0 records, aggregated every 10 s; the agent keeps the newest 10000.');
    expect(await page.locator('#flows-list').innerText()).toContain('No connection decided yet.');
    expect(await (await call(agent, '/v1/flows')).status).toBe(200);
    await shot(page, 'flows');
    expect(pageErrors).toEqual([]);
  });

  it('says which capability the Fleet view waits for instead of showing made-up data', async () => {
    for (const [view, missing] of [['fleet', 'GET /v1/fleet']]) {
      await page.click(`a[href="#/${view}"]`);
      const note = page.locator('.placeholder');
      await note.waitFor();
      expect(await note.innerText()).toContain('Not available on this agent');
      expect(await note.innerText()).toContain(missing);
      expect(await (await call(agent, missing.replace('GET ', ''))).status).toBe(404);
      await shot(page, view);
    }
    expect(pageErrors).toEqual([]);
  });

  it('with --admin-reads-open, renders the pipeline with its stage names without asking for a token', async () => {
    const open = await startAgent(['--admin-reads-open']);
    const fresh = await browser.newPage({ viewport: VIEWPORT });
    try {
      await fresh.goto(`${open.url}/ui/`);
      await fresh.locator('.stage').nth(4).waitFor();
      expect(await fresh.locator('.stage .stage-name').allTextContents()).toEqual(['cnp-admin', 'anp', 'np', 'banp', 'cnp-baseline']);
      expect(await fresh.locator('#token-dialog').isVisible()).toBe(false);
      // Changes still need the token: applying a draft asks for it.
      await fresh.focus('[data-stage="np"]');
      await fresh.keyboard.press('Alt+ArrowDown');
      await fresh.getByRole('button', { name: 'Apply (If-Match: "1")' }).click();
      await fresh.locator('#token-dialog').waitFor({ state: 'visible' });
      expect(await fresh.textContent('#token-why')).toMatch(/^PUT \/v1\/pipeline: send the admin token/);
      await fresh.click('#token-dialog button[value="cancel"]');
      await fresh.locator('[role="alert"].error', { hasText: 'KWP_ERR_UNAUTHORIZED' }).waitFor();
      expect((await call(open, '/v1/pipeline')).json.revision).toBe(1);
    } finally {
      await fresh.close();
      await stopAgent(open);
    }
  });
});

// Keeps the screenshots the docs show in step with the views they name.
describe('docs/console.md', () => {
  it('shows a screenshot of every view the test takes one of', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'console.md'), 'utf8');
    for (const name of ['pipeline', 'pipeline-draft', 'pipeline-history', 'modules', 'explain', 'reachability', 'flows', 'fleet']) {
      expect(doc).toContain(`](console/${name}.png)`);
      expect(existsSync(join(SHOT_DIR, `${name}.png`))).toBe(true);
    }
  });
});
