// kwp diff's core: recorded flows decided by the real WASM pipeline as things
// are and as proposed. The examples/flows manifests and flows are the ones
// docs/flows.md walks through.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadManifests } from '../sources/manifest-files.js';
import { OfflineEvaluator } from '../eval.js';
import { defaultPipeline } from '../pipeline/spec.js';
import type { KubeObject } from '../contract.js';
import { parseRecordedFlows } from './recorded-flows.js';
import { diffVerdicts } from './verdict-diff.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const EXAMPLE = join(root, 'examples', 'flows');
const flows = parseRecordedFlows(readFileSync(join(EXAMPLE, 'recorded.jsonl'), 'utf8'), 'recorded.jsonl').flows;

let current: KubeObject[];
let lockdown: KubeObject[];
beforeAll(async () => {
  current = (await loadManifests([join(EXAMPLE, 'manifests')])).objects;
  lockdown = (await loadManifests([join(EXAMPLE, 'manifests'), join(EXAMPLE, 'proposed')])).objects;
});

function diff(before: ConstructorParameters<typeof OfflineEvaluator>[0], after: ConstructorParameters<typeof OfflineEvaluator>[0]) {
  const a = new OfflineEvaluator(before);
  const b = new OfflineEvaluator(after);
  try {
    return diffVerdicts(flows, (f) => a.evaluateAll(f), (f) => b.evaluateAll(f));
  } finally {
    a.dispose();
    b.dispose();
  }
}

describe('a diff of recorded flows', () => {
  it('lists exactly the flows a proposed default deny flips, with both walkthroughs', () => {
    const d = diff({ objects: current }, { objects: lockdown });
    expect(d.decided).toBe(5);
    expect(d.changes.map((c) => `${c.src} -> ${c.dst} ${c.protocol}/${c.port} ${c.before.verdict}->${c.after.verdict} x${c.count}`)).toEqual([
      'shop/api-5c4b9d7f8-fghij -> shop/db-0 TCP/5432 allow->deny x17',
      'web/debug -> shop/api-5c4b9d7f8-abcde TCP/9090 allow->deny x2',
    ]);
    expect(d.changes[0].after.walkthrough).toContain('[NP] Deny (no ingress rule of shop/default-deny matched)');
    expect(d.changes[0].before.walkthrough).toContain('ALLOW');
  });

  it('lists the same flows the other way round when the change is undone', () => {
    const d = diff({ objects: lockdown }, { objects: current });
    expect(d.changes.map((c) => `${c.port} ${c.before.verdict}->${c.after.verdict}`)).toEqual(['5432 deny->allow', '9090 deny->allow']);
  });

  it('lists nothing for a neutral change', () => {
    const neutral: KubeObject = {
      apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'nobody', namespace: 'shop' },
      spec: { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'no-such-app' } }, policyTypes: ['Ingress'] },
    };
    expect(diff({ objects: current }, { objects: [...current, neutral] }).changes).toEqual([]);
  });

  it('lists the flows a pipeline change flips: the NetworkPolicy stage in audit mode lets the denied ones through', () => {
    const audit = defaultPipeline();
    audit.stages = audit.stages.map((s) => (s.module === 'network-policy' ? { ...s, mode: 'audit' as const } : s));
    const d = diff({ objects: lockdown }, { objects: lockdown, pipeline: audit });
    expect(d.changes.map((c) => `${c.port} ${c.before.verdict}->${c.after.verdict}`)).toEqual(['5432 deny->allow', '9090 deny->allow']);
    expect(d.changes[0].after.walkthrough).toContain('audit Deny');
  });
});

interface Run { code: number; stdout: string; stderr: string }
function kwp(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kwp.js', ...args], { cwd: root }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('kwp diff', () => {
  let dir: string;
  beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'kwp-diff-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const M = 'examples/flows/manifests';
  const F = 'examples/flows/recorded.jsonl';

  it('exits 1 and lists the flips when the proposed manifests flip flows', async () => {
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--proposed', 'examples/flows/proposed', '--flows', F]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('shop/api-5c4b9d7f8-fghij -> shop/db-0 TCP/5432  ALLOW -> DENY  (17 connections; examples/flows/recorded.jsonl: line 2)');
    expect(r.stdout).toMatch(/\n {2}proposed: shop\/api-5c4b9d7f8-fghij -> shop\/db-0 TCP\/5432 {2}DENY/);
    expect(r.stdout.endsWith('2 of 5 flows change verdict\n')).toBe(true);
  });

  it('exits 0 when nothing flips', async () => {
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--flows', F]);
    expect(r).toMatchObject({ code: 0, stdout: '0 of 5 flows change verdict\n' });
  });

  it('prints JSON with both decisions of each flip', async () => {
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--proposed', 'examples/flows/proposed', '--flows', F, '-o', 'json']);
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ decided: 5, changed: 2 });
    expect(doc.changes[1]).toMatchObject({ src: 'web/debug', port: 9090, count: 2, before: { verdict: 'allow' }, after: { verdict: 'deny' } });
    expect(doc.changes[1].after.ingress.some((t: { verdict: string }) => t.verdict === 'Deny')).toBe(true);
  });

  it('exits 2 for a bad flows line, naming the file, line and field', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"src":"web/debug","dst":"shop/db-0","port":5432}\n{"src":"web/debug","dst":"shop/db-0","port":"postgres"}\n');
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--flows', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`KWP_ERR_FLOWS: ${bad}: flow 2 (line 2): field "port" must be a port number from 1 to 65535, not "postgres"`);
  });

  it('exits 2 for a flow naming a pod the manifests do not have', async () => {
    const bad = join(dir, 'ghost.jsonl');
    writeFileSync(bad, '{"src":"web/ghost","dst":"shop/db-0","port":5432,"protocol":"TCP"}\n');
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--flows', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('flow 1 (line 1): field "src": there is no pod web/ghost');
  });

  it('exits 2 for invalid proposed manifests, validated as strictly as kwp eval validates', async () => {
    const proposed = join(dir, 'typo.yaml');
    writeFileSync(proposed, readFileSync(join(EXAMPLE, 'proposed', 'shop-lockdown.yaml'), 'utf8').replace('policyTypes', 'policyType'));
    const r = await kwp(['diff', '--manifests', M, '--proposed', M, '--proposed', proposed, '--flows', F]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('KWP_ERR_MANIFEST');
    expect(r.stderr).toContain('unknown field "policyType"; did you mean "policyTypes"?');
  });

  it('exits 2 when nothing is proposed', async () => {
    const r = await kwp(['diff', '--manifests', M, '--flows', F]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('kwp diff: nothing is proposed');
  });
});
