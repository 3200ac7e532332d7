// `kwp eval` and `kwp matrix` as CI runs them: the compiled CLI in a child
// process, its exit status, stdout and stderr.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ApiServerEmulator } from '../../test/apiserver/emulator.js';
import { writeKubeconfig } from '../../test/apiserver/kubeconfig.js';
import { namespace, pod, networkPolicy } from '../../test/apiserver/fixtures.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BASIC = 'examples/basic/manifests';

interface Run { code: number; stdout: string; stderr: string }

function kwp(args: string[], stdin?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['bin/kwp.js', ...args], { cwd: root, env: { ...process.env, NO_COLOR: '1' } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    if (stdin !== undefined) child.stdin!.end(stdin);
  });
}

let dir: string;
beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'kwp-eval-cli-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const POLICY = readFileSync(join(root, BASIC, 'policies.yaml'), 'utf8');

describe('kwp eval refuses manifests a Kubernetes API server would refuse', () => {
  it.each([
    ['kind: NetworkPolcy', (p: string) => p.replace('kind: NetworkPolicy', 'kind: NetworkPolcy'), 'unknown kind "NetworkPolcy" in apiVersion "networking.k8s.io/v1"; did you mean "NetworkPolicy"'],
    ['apiVersion: networking.k8s.io/v2', (p: string) => p.replace('apiVersion: networking.k8s.io/v1', 'apiVersion: networking.k8s.io/v2'), 'apiVersion "networking.k8s.io/v2" has no kind NetworkPolicy'],
    ['podSelectr', (p: string) => p.replace('podSelector:', 'podSelectr:'), 'spec.podSelectr: unknown field "podSelectr"; did you mean "podSelector"?'],
    ['policyTypes: [Ingres]', (p: string) => p.replace('[Ingress]', '[Ingres]'), 'spec.policyTypes[0]: "Ingres" is not one of Ingress, Egress; did you mean "Ingress"?'],
    ['matchLabel', (p: string) => p.replace('matchLabels', 'matchLabel'), 'unknown field "matchLabel"; did you mean "matchLabels"?'],
    ['port 70000', (p: string) => p.replace('port: http', 'port: 70000'), '.port: 70000 is out of range; write a value 1-65535'],
    ['CIDR /99', (p: string) => `${p}---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: { name: cidr, namespace: y }\nspec:\n  podSelector: {}\n  ingress: [{ from: [{ ipBlock: { cidr: 10.0.0.0/99 } }] }]\n`, 'spec.ingress[0].from[0].ipBlock.cidr: "10.0.0.0/99" is not a valid cidr'],
    ['operator Frobnicate', (p: string) => `${p}---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: { name: op, namespace: y }\nspec:\n  podSelector: { matchExpressions: [{ key: app, operator: Frobnicate, values: [db] }] }\n`, 'spec.podSelector.matchExpressions[0].operator: "Frobnicate" is not one of In, NotIn, Exists, DoesNotExist'],
  ])('%s: exit 1 and a KWP_ERR_MANIFEST naming the file and field', async (_name, edit, message) => {
    const manifests = join(dir, `typo-${_name.replace(/\W+/g, '-')}`);
    const { mkdirSync } = await import('node:fs');
    mkdirSync(manifests);
    writeFileSync(join(manifests, 'cluster.yaml'), readFileSync(join(root, BASIC, 'cluster.yaml')));
    writeFileSync(join(manifests, 'policies.yaml'), edit(POLICY));
    const run = await kwp(['eval', '--manifests', manifests, '--src', 'x/a', '--dst', 'y/a', '--port', '80']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`KWP_ERR_MANIFEST: ${join(manifests, 'policies.yaml')}: document `);
    expect(run.stderr).toContain(message);
  });
});

describe('kwp eval checks what flows expect', () => {
  const flows = (expectations: string[]) => {
    const file = join(dir, `flows-${expectations.join('-')}.json`);
    writeFileSync(file, JSON.stringify([
      { src: 'x/a', dst: 'y/a', port: 80, expect: expectations[0] },
      { src: 'x/a', dst: 'y/a', port: 81, expect: expectations[1] },
      { src: 'x/b', dst: 'y/a', port: 80 },
    ]));
    return file;
  };

  it('exits 0 with "0 wrong" when every expectation holds', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--flows', flows(['allow', 'deny'])]);
    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('0 wrong, 2 correct, 1 without expect');
  });

  it('exits 1, marks the wrong flow and counts it when one does not', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--flows', flows(['allow', 'allow'])]);
    expect(run.code).toBe(1);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[1]).toMatch(/^x\/a -> y\/a TCP\/81  DENY .*  WRONG \(expected ALLOW\)$/);
    expect(lines[0]).not.toContain('WRONG');
    expect(lines.at(-1)).toBe('1 wrong, 1 correct, 1 without expect');
  });

  it('keeps JSON output parseable, with "correct" per flow and the summary on stderr', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--flows', flows(['allow', 'allow']), '-o', 'json']);
    expect(run.code).toBe(1);
    const results = JSON.parse(run.stdout);
    expect(results.map((r: { correct?: boolean }) => r.correct)).toEqual([true, false, undefined]);
    expect(run.stderr).toBe('1 wrong, 1 correct, 1 without expect\n');
  });

  it('prints YAML and an EXPECTED/RESULT table', async () => {
    const yaml = await kwp(['eval', '--manifests', BASIC, '--flows', flows(['allow', 'deny']), '-o', 'yaml']);
    expect(parse(yaml.stdout).map((r: { verdict: string }) => r.verdict)).toEqual(['allow', 'deny', 'deny']);
    const table = await kwp(['eval', '--manifests', BASIC, '--flows', flows(['allow', 'allow']), '--output', 'table']);
    expect(table.stdout.split('\n').slice(0, 3)).toEqual([
      'SOURCE  DESTINATION  PORT    VERDICT  EXPECTED  RESULT',
      'x/a     y/a          TCP/80  ALLOW    ALLOW     correct',
      'x/a     y/a          TCP/81  DENY     ALLOW     WRONG',
    ]);
  });

  it('refuses an output format it does not know, suggesting the closest', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--src', 'x/a', '--dst', 'y/a', '--port', '80', '-o', 'jsno']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('KWP_ERR_USAGE: kwp eval: --output must be walkthrough, table, json, yaml, got "jsno"; did you mean "json"?\n');
  });
});

describe('kwp eval without a flows file', () => {
  it('decides one-off flows from --src, --dst and each --port, with --expect', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--src', 'x/a', '--dst', 'y/a', '--port', '80', '--port', '81', '--expect', 'deny', '-o', 'table']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe([
      'SOURCE  DESTINATION  PORT    VERDICT  EXPECTED  RESULT',
      'x/a     y/a          TCP/80  ALLOW    DENY      WRONG',
      'x/a     y/a          TCP/81  DENY     DENY      correct',
      '1 wrong, 1 correct',
      '',
    ].join('\n'));
  });

  it('reads flows from stdin with --flows -', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--flows', '-'], '{"src": "x/a", "dst": "y/a", "port": 81, "expect": "deny"}\n');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^x\/a -> y\/a TCP\/81  DENY .*\n0 wrong, 1 correct\n$/);
  });

  it('names the command line in a bad one-off flow', async () => {
    const run = await kwp(['eval', '--manifests', BASIC, '--src', 'x/a', '--dst', 'y', '--port', '80']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^KWP_ERR_FLOWS: the command line: flow 1: field "dst" is "y"; write "namespace\/pod"/);
  });
});

describe('kwp eval --kubeconfig', () => {
  let api: ApiServerEmulator;
  beforeAll(async () => { api = await ApiServerEmulator.start(); });
  afterAll(async () => { await api.stop(); });

  it('decides flows against the objects a live API server lists', async () => {
    api.create(namespace('shop'));
    api.create(pod('shop', 'web', { app: 'web' }, '10.1.0.1'));
    api.create(pod('shop', 'db', { app: 'db' }, '10.1.0.2'));
    const kubeconfig = await writeKubeconfig({ server: api.url });
    const flows = ['--src', 'shop/web', '--dst', 'shop/db', '--port', '5432'];
    const before = await kwp(['eval', '--kubeconfig', kubeconfig, ...flows, '--expect', 'allow']);
    expect(before.stderr).toBe('');
    expect(before.stdout).toMatch(/^shop\/web -> shop\/db TCP\/5432  ALLOW /);
    api.create(networkPolicy('shop', 'isolate-db', { app: 'db' }));
    const after = await kwp(['eval', '--kubeconfig', kubeconfig, ...flows, '--expect', 'allow']);
    expect(after.code).toBe(1);
    expect(after.stdout).toMatch(/^shop\/web -> shop\/db TCP\/5432  DENY .*\[NP\] Deny \(no ingress rule of shop\/isolate-db matched\)/);
  });

  it('gives up with KWP_ERR_KUBECONFIG when the cluster cannot be listed', async () => {
    const kubeconfig = await writeKubeconfig({ server: 'http://127.0.0.1:1' });
    const run = await kwp(['eval', '--kubeconfig', kubeconfig, '--timeout', '1', '--src', 'a/b', '--dst', 'c/d', '--port', '80']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^KWP_ERR_KUBECONFIG: kubeconfig .*: the API server did not list .* within 1 s/);
  });
});

describe('kwp matrix', () => {
  it('prints one matrix per --port and JSON with -o json', async () => {
    const text = await kwp(['matrix', '--manifests', BASIC, '--port', '80', '--port', '81']);
    expect(text.code).toBe(0);
    expect(text.stdout.match(/^TCP\/\d+$/gm)).toEqual(['TCP/80', 'TCP/81']);
    const json = JSON.parse((await kwp(['matrix', '--manifests', BASIC, '--port', '80', '--port', '81', '-o', 'json'])).stdout);
    expect(Object.keys(json)).toEqual(['TCP/80', 'TCP/81']);
    expect(json['TCP/80']['x/a']['y/a']).toBe(true);
    expect(json['TCP/81']['x/a']['y/a']).toBe(false);
  });

  it('runs a plugin given with --module', async () => {
    const args = ['matrix', '--manifests', BASIC, '--port', '81', '-o', 'json', '--pipeline', 'test/fixtures/pipelines/deny-81-then-np.yaml'];
    expect((await kwp(args)).stderr).toMatch(/KWP_ERR_MODULE_NOT_FOUND/);
    const json = JSON.parse((await kwp([...args, '--module', 'dist/wasm/examples/deny-ports.wasm'])).stdout);
    expect(json['TCP/81']['x/a']['x/b']).toBe(false);
  });

  it('says there is nothing to print for a directory without pods instead of crashing', async () => {
    const run = await kwp(['matrix', '--manifests', 'examples/embed']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('KWP_ERR_MANIFEST: kwp matrix: no pod with an IP address among the objects');
    expect(run.stderr).not.toContain('RangeError');
  });

  it('skips the Pipeline and flows files of a directory instead of reading them as manifests', async () => {
    const run = await kwp(['matrix', '--manifests', 'examples/admin', '--manifests', 'examples/basic']);
    expect(run.stderr).toContain('warning: examples/admin/ports-first.yaml: document 1: Pipeline (kwp.io/v1) configures kwp and is not a cluster object; skipped (give a pipeline file with --pipeline)');
    expect(run.stderr).toContain('warning: examples/basic/flows.json: a list of flows, not Kubernetes objects; skipped (give it with --flows)');
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe('TCP/80');
  });
});
