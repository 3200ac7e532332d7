// `kwp flows` against a running agent: the agent (manifests, admin API, no
// dataplane) decides connections through its packet-path judge, exactly the
// call the NFQUEUE dataplane makes for each new connection, and the CLI reads
// the aggregated records back over the admin API, filtered, as a table, as
// JSON lines and followed.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Agent } from '../agent.js';
import { createLogger } from '../log.js';
import type { Packet } from '../contract.js';
import type { FlowRecord } from '../flow-records/flow-record.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const KWP = join(REPO, 'bin', 'kwp.js');
const run = promisify(execFile);

const packet = (src: string, dst: string, dstPort: number): Packet => ({
  family: 4, protocol: 6, src: new Uint8Array(src.split('.').map(Number)), dst: new Uint8Array(dst.split('.').map(Number)), srcPort: 40000, dstPort, icmpType: 0, icmpCode: 0,
});
// examples/basic: x/a (web, frontend team), x/b (batch), y/a (db), y/b (cache).
const XA = '10.244.1.10';
const XB = '10.244.1.11';
const YA = '10.244.2.10';

let agent: Agent;
let dir: string;
let flowLog: string;

async function kwp(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [KWP, ...args, '--server', agent.adminUrl!, '--token-file', join(dir, 'token')]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Waits until the agent's recorder has emitted at least `n` records (one interval after the connections). */
async function emitted(n: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (agent.flows!.stats().emitted < n) {
    if (Date.now() > deadline) throw new Error(`the agent emitted ${agent.flows!.stats().emitted} flow records, not ${n}, within 20 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kwp-flows-cli-'));
  writeFileSync(join(dir, 'token'), 'flows-test-token-0123456789abcdef\n', { mode: 0o600 });
  flowLog = join(dir, 'flows.jsonl');
  agent = new Agent({
    manifests: [join(REPO, 'examples/basic/manifests')], dataplane: false, stateDir: join(dir, 'state'), nodeName: 'node-1',
    adminAddress: '127.0.0.1:0', adminTokenFile: join(dir, 'token'), logger: createLogger(0, { write: () => true } as unknown as NodeJS.WritableStream),
    flows: { intervalMs: 500, ringSize: 100, log: flowLog }, fleet: { mode: 'off' } as never,
  });
  await agent.start();
  // Allowed by y/allow-web's rule 0 (twice: one record), denied by y's isolation, and denied again from another pod.
  expect(agent.engine.allows(packet(XA, YA, 80))).toBe(true);
  expect(agent.engine.allows(packet(XA, YA, 80))).toBe(true);
  expect(agent.engine.allows(packet(XA, YA, 81))).toBe(false);
  expect(agent.engine.allows(packet(XB, YA, 80))).toBe(false);
  await emitted(3);
}, 60_000);

afterAll(async () => { await agent?.stop(); });

describe('kwp flows', () => {
  it('prints each decided flow with the policy and rule of each direction as a table', async () => {
    const r = await kwp('flows');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^LAST SEEN\s+SOURCE\s+DESTINATION\s+PORT\s+VERDICT\s+COUNT\s+EGRESS\s+INGRESS$/);
    expect(lines.slice(1).map((l) => l.replace(/^\S+\s+/, '').replace(/\s+/g, ' '))).toEqual([
      'x/a y/a TCP/80 (http) ALLOW 2 no policy Accept by np: y/allow-web, ingress rule 0: namespaceSelector team=frontend + podSelector app=web, port http',
      'x/a y/a TCP/81 DENY 1 no policy Deny by np: y/deny-all, default deny',
      'x/b y/a TCP/80 (http) DENY 1 no policy Deny by np: y/deny-all, default deny',
    ]);
  });

  it('prints JSON lines in the documented format, filtered by verdict, pod, namespace and policy', async () => {
    const denied = (await kwp('flows', '--verdict', 'deny', '--pod', 'x/b', '-o', 'json')).stdout.trim().split('\n').map((l) => JSON.parse(l) as FlowRecord);
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ src: 'x/b', dst: 'y/a', port: 80, protocol: 'TCP', verdict: 'deny', node: 'node-1', dstPortName: 'http', ingress: { stage: 'np', policy: 'y/deny-all', rule: 'default deny', action: 'Deny' } });
    const byPolicy = (await kwp('flows', '--policy', 'y/allow-web', '--namespace', 'x', '-o', 'json')).stdout.trim().split('\n').map((l) => JSON.parse(l) as FlowRecord);
    expect(byPolicy.map((f) => [f.src, f.port, f.count, f.ingress.rule, f.ingress.peer, f.ingress.rulePort])).toEqual([
      ['x/a', 80, 2, 'ingress rule 0', 'namespaceSelector team=frontend + podSelector app=web', 'http'],
    ]);
    expect((await kwp('flows', '--namespace', 'z')).stdout.trim().split('\n')).toHaveLength(1);
  });

  it('writes the same records to the flow log file', () => {
    const lines = readFileSync(flowLog, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as FlowRecord);
    expect(lines.map((f) => `${f.src} ${f.port} ${f.verdict} ${f.ingress.policy}`)).toEqual(['x/a 80 allow y/allow-web', 'x/a 81 deny y/deny-all', 'x/b 80 deny y/deny-all']);
  });

  it('follows: prints the records it has, then each new one as its interval ends', async () => {
    const child = spawn(process.execPath, [KWP, 'flows', '--follow', '-o', 'json', '--verdict', 'allow', '--server', agent.adminUrl!, '--token-file', join(dir, 'token')]);
    const lines: FlowRecord[] = [];
    let buffered = '';
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) { lines.push(JSON.parse(buffered.slice(0, nl))); buffered = buffered.slice(nl + 1); }
    });
    const waitFor = async (n: number) => {
      const deadline = Date.now() + 20_000;
      while (lines.length < n) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`kwp flows --follow printed ${lines.length} records, not ${n}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    try {
      await waitFor(1);
      expect(lines[0]).toMatchObject({ src: 'x/a', port: 80, verdict: 'allow' });
      // Namespace x is not isolated by anything: allowed by default; the deny on the way must not show.
      expect(agent.engine.allows(packet(XB, YA, 81))).toBe(false);
      expect(agent.engine.allows(packet(XB, XA, 8080))).toBe(true);
      await waitFor(2);
      expect(lines[1]).toMatchObject({ src: 'x/b', dst: 'x/a', port: 8080, verdict: 'allow', ingress: { action: 'Default' } });
    } finally {
      child.kill('SIGINT');
    }
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    expect(lines).toHaveLength(2);
  }, 60_000);

  it('refuses a bad filter as a usage error before asking the agent', async () => {
    const r = await kwp('flows', '--since', 'last-week');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('KWP_ERR_USAGE: kwp flows: --since: "last-week" is neither a duration (30s, 5m, 2h, 1d) nor an RFC 3339 time');
  });

  it('needs the token: GET /v1/flows answers 401 without it', async () => {
    const res = await fetch(`${agent.adminUrl}/v1/flows`);
    expect(res.status).toBe(401);
    expect((await res.json()).code).toBe('KWP_ERR_UNAUTHORIZED');
  });
});
