// POST /v1/diff and `kwp pipeline set --dry-run` against a real `kwp agent`
// (compiled CLI, own state directory and token, dataplane off): the proposal
// is decided beside the live pipeline, and nothing is applied.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { AgentProcess } from '../../../test/fixtures/agent-process.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const EXAMPLE = join(root, 'examples', 'flows');
const FLOWS = readFileSync(join(EXAMPLE, 'recorded.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const LOCKDOWN = parseAllDocuments(readFileSync(join(EXAMPLE, 'proposed', 'shop-lockdown.yaml'), 'utf8')).map((d) => d.toJSON());

let agent: AgentProcess;
let server: string;
let token: string;
let dir: string;

beforeAll(async () => {
  // The agent runs the shop with its lockdown applied.
  // Without a flow recorder (--flow-ring 0): every request brings its flows, and one without them is refused.
  agent = await AgentProcess.start(['--manifests', join(EXAMPLE, 'manifests'), '--manifests', join(EXAMPLE, 'proposed'), '--flow-ring', '0']);
  ({ url: server, token } = agent);
  dir = mkdtempSync(join(tmpdir(), 'kwp-diff-route-'));
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function post(body: unknown, auth = true): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server}/v1/diff`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function pipelineRevision(): Promise<number> {
  const res = await fetch(`${server}/v1/pipeline`, { headers: { authorization: `Bearer ${token}` } });
  return (await res.json()).revision;
}

const auditPipeline = () => {
  const text = readFileSync(join(EXAMPLE, 'np-audit.yaml'), 'utf8');
  return { stages: parseAllDocuments(text)[0].toJSON().stages };
};

describe('POST /v1/diff', () => {
  it('lists the flows a proposed pipeline flips, and applies nothing', async () => {
    const before = await pipelineRevision();
    const r = await post({ pipeline: auditPipeline(), flows: FLOWS });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ revision: before, flowsFrom: 'request', decided: 5 });
    expect(r.body.changes.map((c: any) => `${c.src} -> ${c.dst} ${c.port} ${c.before.verdict}->${c.after.verdict} x${c.count}`)).toEqual([
      'shop/api-5c4b9d7f8-fghij -> shop/db-0 5432 deny->allow x17',
      'web/debug -> shop/api-5c4b9d7f8-abcde 9090 deny->allow x2',
    ]);
    expect(r.body.changes[0].after.walkthrough).toContain('[NP] audit Deny');
    expect(await pipelineRevision()).toBe(before);
    // Another diff still compares with the same live pipeline: the trial took no revision.
    expect((await post({ pipeline: auditPipeline(), flows: FLOWS })).body.revision).toBe(before);
  });

  it('lists the flows that removing objects from the live state would flip', async () => {
    const r = await post({ remove: [{ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace: 'shop', name: 'default-deny' }], flows: FLOWS });
    expect(r.status).toBe(200);
    expect(r.body.changes.map((c: any) => `${c.port} ${c.before.verdict}->${c.after.verdict}`)).toEqual(['5432 deny->allow']);
  });

  it('lists nothing for neutral proposed objects', async () => {
    const neutral = { ...LOCKDOWN[1], metadata: { name: 'api-from-frontend', namespace: 'shop' } };
    const r = await post({ objects: [neutral], flows: FLOWS });
    expect(r.body).toMatchObject({ decided: 5, changes: [] });
  });

  it('skips a flow whose pod the agent does not know, saying so', async () => {
    const r = await post({ pipeline: auditPipeline(), flows: [{ src: 'web/gone', dst: 'shop/db-0', port: 5432, protocol: 'TCP' }, FLOWS[1]] });
    expect(r.body.decided).toBe(1);
    expect(r.body.skipped).toEqual([expect.stringContaining('POST /v1/diff body: flows: flow 1: field "src": there is no pod web/gone')]);
  });

  it('refuses proposed objects a strict manifest check refuses, naming the object and field', async () => {
    const typo = { ...LOCKDOWN[0], spec: { podSelector: {}, policyType: ['Ingress'] } };
    const r = await post({ objects: [typo], flows: FLOWS });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('KWP_ERR_REQUEST_INVALID');
    expect(r.body.message).toContain('POST /v1/diff body: objects[0] (NetworkPolicy shop/default-deny)');
    expect(r.body.message).toContain('did you mean "policyTypes"?');
  });

  it('refuses a request that proposes nothing, and one without flows when the agent records none', async () => {
    expect((await post({ flows: FLOWS })).body.message).toContain('nothing is proposed');
    expect((await post({ pipeline: auditPipeline() })).body.message).toContain('give the flows to decide in "flows"');
  });

  it('needs the admin token', async () => {
    expect((await post({ pipeline: auditPipeline(), flows: FLOWS }, false)).status).toBe(401);
  });
});

interface Run { code: number; stdout: string; stderr: string }
function kwp(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kwp.js', ...args, '--server', server], { cwd: root, env: { ...process.env, KWP_ADMIN_TOKEN: token } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('kwp pipeline set --dry-run', () => {
  it('shows what the pipeline would flip, exits 1, and leaves the pipeline as it was', async () => {
    const before = await pipelineRevision();
    const r = await kwp(['pipeline', 'set', '--dry-run', 'examples/flows/np-audit.yaml', '--flows', 'examples/flows/recorded.jsonl']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`# dry run against revision ${before}: nothing applied\n`);
    expect(r.stdout).toContain('shop/api-5c4b9d7f8-fghij -> shop/db-0 TCP/5432  DENY -> ALLOW  (17 connections; examples/flows/recorded.jsonl: line 2)');
    expect(r.stdout.endsWith('2 of 5 flows change verdict\n')).toBe(true);
    expect(await pipelineRevision()).toBe(before);
    const history = await kwp(['pipeline', 'history', '-o', 'json']);
    expect(JSON.parse(history.stdout).map((h: { action: string }) => h.action)).toEqual(['startup']);
  });

  it('exits 0 when the pipeline flips nothing', async () => {
    const r = await kwp(['pipeline', 'set', '--dry-run', 'deploy/pipeline.yaml', '--flows', 'examples/flows/recorded.jsonl']);
    expect(r.code).toBe(0);
    expect(r.stdout.endsWith('0 of 5 flows change verdict\n')).toBe(true);
  });

  it('names the file and line of a bad flows file before asking the agent', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"src":"web/debug","dst":"shop/db-0","port":0}\n');
    const r = await kwp(['pipeline', 'set', '--dry-run', 'deploy/pipeline.yaml', '--flows', bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`KWP_ERR_FLOWS: ${bad}: flow 1 (line 1): field "port" must be a port number from 1 to 65535`);
  });
});
