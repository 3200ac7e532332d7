// `kwp diff --server` against a running agent (manifests, admin API, no
// dataplane): the same question as the offline `kwp diff`, put to the agent's
// live state and its recorded flows (POST /v1/diff), with the same output and
// exit status.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent } from '../agent.js';
import { createLogger } from '../log.js';
import type { Packet } from '../contract.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const KWP = join(REPO, 'bin', 'kwp.js');
const EXAMPLE = join(REPO, 'examples', 'flows');

interface Run { code: number; stdout: string; stderr: string }
function kwp(args: string[], server?: string): Promise<Run> {
  const withServer = server ? [...args, '--server', server, '--token-file', join(dir, 'token')] : args;
  return new Promise((resolve) => {
    execFile(process.execPath, [KWP, ...withServer], { cwd: REPO }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

const packet = (src: string, dst: string, dstPort: number): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array(src.split('.').map(Number)), dst: new Uint8Array(dst.split('.').map(Number)), srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0,
});
// examples/flows: web/frontend, shop/api (two replicas), shop/db-0, web/debug.
const FRONTEND = '10.244.1.10';
const API_A = '10.244.2.10';
const API_B = '10.244.2.11';
const DB = '10.244.2.20';
const DEBUG = '10.244.1.30';

let agent: Agent;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-diff-server-'));
  writeFileSync(join(dir, 'token'), 'diff-server-test-token-0123456789\n', { mode: 0o600 });
  agent = new Agent({
    manifests: [join(EXAMPLE, 'manifests')], dataplane: false, stateDir: join(dir, 'state'), nodeName: 'node-1',
    adminAddress: '127.0.0.1:0', adminTokenFile: join(dir, 'token'), logger: createLogger(0, { write: () => true } as unknown as NodeJS.WritableStream),
    flows: { intervalMs: 500, ringSize: 100 }, fleet: { mode: 'off' } as never,
  });
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('kwp diff --server', () => {
  it('prints what the offline kwp diff prints for the same flows file, with the same exit status', async () => {
    const offline = await kwp(['diff', '--manifests', 'examples/flows/manifests', '--proposed', 'examples/flows/manifests', '--proposed', 'examples/flows/proposed', '--flows', 'examples/flows/recorded.jsonl']);
    expect(offline.code).toBe(1);
    const live = await kwp(['diff', '--proposed', 'examples/flows/proposed', '--flows', 'examples/flows/recorded.jsonl'], agent.adminUrl!);
    expect(live.stderr).toBe('');
    expect(live.stdout).toBe(offline.stdout);
    expect(live.code).toBe(1);
    const json = await kwp(['diff', '--proposed', 'examples/flows/proposed', '--flows', 'examples/flows/recorded.jsonl', '-o', 'json'], agent.adminUrl!);
    const offlineJson = await kwp(['diff', '--manifests', 'examples/flows/manifests', '--proposed', 'examples/flows/manifests', '--proposed', 'examples/flows/proposed', '--flows', 'examples/flows/recorded.jsonl', '-o', 'json']);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(offlineJson.stdout));
  });

  it('decides the node\'s recorded flows when no flows file is given, and exits 0 when nothing flips', async () => {
    expect(agent.engine.allows(packet(API_B, DB, 5432))).toBe(true);
    expect(agent.engine.allows(packet(DEBUG, API_A, 9090))).toBe(true);
    expect(agent.engine.allows(packet(FRONTEND, API_A, 8080))).toBe(true);
    const deadline = Date.now() + 20_000;
    while (agent.flows!.stats().emitted < 3) {
      if (Date.now() > deadline) throw new Error(`the agent emitted ${agent.flows!.stats().emitted} flow records, not 3, within 20 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await kwp(['diff', '--proposed', 'examples/flows/proposed', '-o', 'json'], agent.adminUrl!);
    expect(r.code).toBe(1);
    const diff = JSON.parse(r.stdout);
    expect(diff.decided).toBe(3);
    expect(diff.changes.map((c: { src: string; dst: string; port: number; before: { verdict: string }; after: { verdict: string } }) => `${c.src} -> ${c.dst} ${c.port} ${c.before.verdict}->${c.after.verdict}`)).toEqual([
      'shop/api-5c4b9d7f8-fghij -> shop/db-0 5432 allow->deny',
      'web/debug -> shop/api-5c4b9d7f8-abcde 9090 allow->deny',
    ]);
    const same = await kwp(['diff', '--proposed-pipeline', 'deploy/pipeline.yaml'], agent.adminUrl!);
    expect(same.stdout).toContain('0 of 3 flows change verdict');
    expect(same.code).toBe(0);
  });

  it('refuses the offline-only flags and a diff that proposes nothing, exit 2, naming what to give', async () => {
    const withManifests = await kwp(['diff', '--manifests', 'examples/flows/manifests', '--proposed', 'examples/flows/proposed'], agent.adminUrl!);
    expect(withManifests.code).toBe(2);
    expect(withManifests.stderr).toContain('KWP_ERR_USAGE: kwp diff --server: --manifests has no meaning');
    const nothing = await kwp(['diff'], agent.adminUrl!);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('nothing is proposed');
    const tokenOffline = await kwp(['diff', '--manifests', 'examples/flows/manifests', '--proposed', 'examples/flows/proposed', '--flows', 'examples/flows/recorded.jsonl', '--token-file', join(dir, 'token')]);
    expect(tokenOffline.code).toBe(2);
    expect(tokenOffline.stderr).toContain('--token-file goes with --server');
  });
});
