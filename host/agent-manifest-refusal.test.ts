// `kwp agent --manifests DIR` when someone saves a broken file: the agent
// refuses it, keeps deciding with the last good state, and says so in its
// log, in /metrics and in /readyz until the file is fixed. A real agent
// child process (npm run build first) watching a real directory.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, AgentProcess } from '../test/fixtures/agent-process.js';

let dir: string;
let policies: string;
let agent: AgentProcess;
const good = readFileSync(join(REPO, 'examples', 'basic', 'manifests', 'policies.yaml'), 'utf8');

async function verdict(port: number): Promise<string> {
  const res = await agent.call('/v1/explain', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ src: 'x/a', dst: 'y/a', port }) });
  expect(res.status).toBe(200);
  return (await res.json()).verdict;
}

async function readyz(): Promise<{ status: number; body: { code?: string; message?: string; ready?: boolean } }> {
  const res = await fetch(`${agent.url}/readyz`);
  return { status: res.status, body: await res.json() };
}

async function metric(name: string): Promise<string[]> {
  const text = await (await agent.call('/metrics')).text();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-refusal-'));
  cpSync(join(REPO, 'examples', 'basic', 'manifests'), dir, { recursive: true });
  policies = join(dir, 'policies.yaml');
  agent = await AgentProcess.start(['--manifests', dir]);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('kwp agent --manifests with a file that stops validating', () => {
  it('refuses it, keeps the last good state, says so in the log, the metrics and /readyz, and recovers when it is fixed', async () => {
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });
    expect([await verdict(80), await verdict(81)]).toEqual(['allow', 'deny']);
    expect(await metric('kwp_source_refused')).toEqual([]);

    // Port 81 instead of http, and a typo that a real API server refuses.
    const edited = good.replace('ports: [{ port: http }]', 'ports: [{ port: 81 }]');
    expect(edited).not.toBe(good);
    let mark = agent.entries.length;
    writeFileSync(policies, edited.replace('namespaceSelector: { matchLabels', 'namespaceSelector: { matchLabel'));
    const refused = await agent.logLine((e) => agent.entries.indexOf(e) >= mark && e.code === 'KWP_ERR_MANIFEST' && e.source === 'manifests');
    expect(refused.level).toBe(50);
    expect(refused.files).toEqual([policies]);
    expect(refused.msg).toContain(`${policies}: document 2 (NetworkPolicy y/allow-web): `);
    expect(refused.msg).toContain('unknown field "matchLabel"; did you mean "matchLabels"?');
    expect(refused.msg).toMatch(/; keeping the last good state$/);

    const probe = await readyz();
    expect(probe.status).toBe(503);
    expect(probe.body.code).toBe('KWP_ERR_SOURCE_REFUSED');
    expect(probe.body.message).toContain(`the manifests source refuses ${policies} (KWP_ERR_MANIFEST: `);
    expect(await metric('kwp_source_refused')).toEqual([`kwp_source_refused{source="manifests",code="KWP_ERR_MANIFEST",file="${policies}"} 1`]);
    expect((await metric('kwp_source_rejected_total'))[0]).toMatch(/^kwp_source_rejected_total\{source="manifests",code="KWP_ERR_MANIFEST"\} [1-9]\d*$/);
    // The edit did not half-apply: the old policy still decides.
    expect([await verdict(80), await verdict(81)]).toEqual(['allow', 'deny']);

    mark = agent.entries.length;
    writeFileSync(policies, edited);
    await agent.logLine((e) => agent.entries.indexOf(e) >= mark && e.msg === 'manifests reloaded');
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });
    expect(await metric('kwp_source_refused')).toEqual([]);
    expect([await verdict(80), await verdict(81)]).toEqual(['deny', 'allow']);
  }, 120_000);
});
