import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { isKwpError } from '../errors.js';
import { KubernetesSource, defaultWatchedKinds } from '../sources/kubernetes.js';
import { knownResource } from '../sources/kubernetes/resources.js';
import { ApiServerEmulator } from '../../test/apiserver/emulator.js';
import { writeKubeconfig } from '../../test/apiserver/kubeconfig.js';
import { pollUntil } from '../../test/apiserver/poll.js';
import { RecordingSink } from '../../test/apiserver/recording-sink.js';
import { agentFlags } from './agent-flags.js';
import { parseAgentFlags } from './agent.js';
import { manifestOptions, renderManifests } from './install-yaml-command.js';
import { AGENT_MALLOC_ENV, AGENT_NODE_FLAGS } from '../agent-node-flags.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const installYamlPath = path.join(root, 'deploy', 'install.yaml');

function objects(argv: string[] = []): any[] {
  const docs = parseAllDocuments(renderManifests(argv));
  for (const d of docs) expect(d.errors).toEqual([]);
  return docs.map((d) => d.toJS()).filter(Boolean);
}

const byKind = (objs: any[], kind: string) => objs.find((o) => o.kind === kind);
const agentContainer = (objs: any[]) => byKind(objs, 'DaemonSet').spec.template.spec.containers[0];

function usageError(argv: string[]): string {
  try {
    renderManifests(argv);
  } catch (err) {
    return isKwpError(err) ? `${err.code}: ${err.message}` : `not a KwpError: ${String(err)}`;
  }
  return 'no error';
}

describe('kwp manifests', () => {
  it('matches the committed deploy/install.yaml (regenerate with KWP_UPDATE_INSTALL_YAML=1)', () => {
    const fresh = renderManifests([]);
    if (process.env.KWP_UPDATE_INSTALL_YAML === '1') writeFileSync(installYamlPath, fresh);
    expect(readFileSync(installYamlPath, 'utf8')).toBe(fresh);
  });

  it('prints the fleet CRDs, a ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding, ConfigMap and DaemonSet that parse as YAML', () => {
    expect(objects().map((o) => o.kind)).toEqual([
      'CustomResourceDefinition', 'CustomResourceDefinition', 'CustomResourceDefinition',
      'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ConfigMap', 'DaemonSet',
    ]);
  });

  it('installs EvaluatorModule and Pipeline (with the status subresource) and NodePipelineStatus, cluster-scoped in kwp.io/v1alpha1', () => {
    const crds = objects().filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => [c.metadata.name, c.spec.scope, c.spec.versions[0].name])).toEqual([
      ['evaluatormodules.kwp.io', 'Cluster', 'v1alpha1'],
      ['pipelines.kwp.io', 'Cluster', 'v1alpha1'],
      ['nodepipelinestatuses.kwp.io', 'Cluster', 'v1alpha1'],
    ]);
    expect(crds[0].spec.versions[0].schema.openAPIV3Schema.properties.spec.required).toEqual(['name', 'version', 'sha256', 'source']);
    expect(crds[1].spec.versions[0].subresources).toEqual({ status: {} });
    // The pipeline file's own shape: stages at the top, so the file `kwp pipeline set` takes is the object kubectl applies.
    expect(crds[1].spec.versions[0].schema.openAPIV3Schema.required).toEqual(['stages']);
  });

  it('lets the agent read modules and pipelines, write only node statuses, and read ConfigMaps and Secrets only in its namespace', () => {
    const objs = objects(['--namespace', 'kwp-system']);
    const fleetRules = byKind(objs, 'ClusterRole').rules.filter((r: any) => r.apiGroups.includes('kwp.io'));
    expect(fleetRules).toEqual([
      { apiGroups: ['kwp.io'], resources: ['evaluatormodules', 'pipelines'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['kwp.io'], resources: ['nodepipelinestatuses'], verbs: ['get', 'create', 'update'] },
    ]);
    expect(byKind(objs, 'Role')).toMatchObject({ metadata: { namespace: 'kwp-system' }, rules: [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['get'] }] });
  });

  it('grants list and watch on exactly the kinds the source watches, and nothing else', () => {
    const rules = byKind(objects(), 'ClusterRole').rules.filter((r: any) => !r.apiGroups.includes('kwp.io') && !(r.verbs.length === 1 && r.verbs[0] === 'get'));
    const granted = rules.flatMap((r: any) => {
      expect(r.verbs).toEqual(['list', 'watch']);
      return r.apiGroups.flatMap((g: string) => r.resources.map((res: string) => `${g}/${res}`));
    });
    const watched = new KubernetesSource().kinds.map((k) => {
      const ref = knownResource(k)!;
      return `${ref.group}/${ref.plural}`;
    });
    expect([...granted].sort()).toEqual([...watched].sort());
    expect(new KubernetesSource().kinds).toEqual(defaultWatchedKinds);
  });

  it('grants every collection path the source actually requests from an API server', async () => {
    const emulator = await ApiServerEmulator.start();
    const source = new KubernetesSource({ kubeconfig: await writeKubeconfig({ server: emulator.url }), backoff: { initialMs: 20, maxMs: 100 } });
    try {
      await source.start(new RecordingSink());
      await pollUntil(() => source.ready(), 'the source to sync');
      const rules = byKind(objects(), 'ClusterRole').rules;
      const collection = (group: string, resource: string) => new RegExp(group === '' ? `^/api/[^/]+/${resource}$` : `^/apis/${group.replace(/\./g, '\\.')}/[^/]+/${resource}$`);
      const allowed = (p: string) => rules.some((r: any) => r.apiGroups.some((g: string) => r.resources.some((res: string) => collection(g, res).test(p))));
      const paths = [...new Set(emulator.requests.map((r) => r.path))];
      expect(paths.length).toBe(defaultWatchedKinds.length);
      for (const p of paths) expect(allowed(p), p).toBe(true);
    } finally {
      await source.stop();
      await emulator.stop();
    }
  });

  it('passes the agent only flags it knows, with the node name from the downward API', () => {
    const c = agentContainer(objects());
    expect(c.args[0]).toBe('agent');
    const names = new Set(agentFlags.map((f) => f.name));
    for (const arg of c.args.slice(1)) {
      const m = /^--?([a-z-]+)=(.*)$/.exec(arg);
      expect(m, arg).not.toBeNull();
      expect(names.has(m![1]), `${m![1]} is an agent flag`).toBe(true);
      const flag = agentFlags.find((f) => f.name === m![1])!;
      if (flag.type === 'boolean') expect(['true', 'false']).toContain(m![2]);
    }
    expect(c.args).toContain('--node-name=$(NODE_NAME)');
    expect(c.env).toContainEqual({ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
  });

  it("passes arguments the agent's own parser accepts, with the values the flags asked for", () => {
    const c = agentContainer(objects(['--fail-open=false', '--admin-address', '0.0.0.0:9555']));
    const parsed = parseAgentFlags(c.args.slice(1).map((a: string) => a.replace('$(NODE_NAME)', 'node-a')));
    expect(parsed).toMatchObject({ 'node-name': 'node-a', 'fail-open': false, strict: true, 'admin-address': '0.0.0.0:9555', dataplane: 'on', pipeline: '/etc/kwp/pipeline.yaml', 'packet-thread-nice': -10 });
  });

  it('runs on the host network with NET_ADMIN, NET_RAW and SYS_NICE, tolerating every taint, with resource requests', () => {
    const ds = byKind(objects(), 'DaemonSet');
    const pod = ds.spec.template.spec;
    expect(pod.hostNetwork).toBe(true);
    expect(pod.tolerations).toEqual([{ operator: 'Exists' }]);
    expect(pod.serviceAccountName).toBe(byKind(objects(), 'ServiceAccount').metadata.name);
    expect(pod.containers[0].securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW', 'SYS_NICE']);
    expect(pod.containers[0].resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(ds.spec.template.metadata.labels).toMatchObject(ds.spec.selector.matchLabels);
  });

  it('raises the packet thread to nice -10 by default, and the agent parses that argument', () => {
    const c = agentContainer(objects());
    expect(c.args).toContain('--packet-thread-nice=-10');
    expect(parseAgentFlags(c.args.slice(1))['packet-thread-nice']).toBe(-10);
    expect(c.securityContext.capabilities.add).toContain('SYS_NICE');
  });

  it('takes another --packet-thread-nice, adding SYS_NICE only for a negative one', () => {
    const raised = agentContainer(objects(['--packet-thread-nice=-5']));
    expect(raised.args).toContain('--packet-thread-nice=-5');
    expect(raised.securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW', 'SYS_NICE']);
    const lowered = agentContainer(objects(['--packet-thread-nice', '5']));
    expect(lowered.args).toContain('--packet-thread-nice=5');
    expect(lowered.securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW']);
  });

  it('leaves the packet thread priority and SYS_NICE out with --packet-thread-nice=off', () => {
    const c = agentContainer(objects(['--packet-thread-nice=off']));
    expect(c.args.join(' ')).not.toContain('packet-thread-nice');
    expect(c.securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW']);
  });

  it.each([
    ['127.0.0.1:9443', '127.0.0.1', 9443],
    ['0.0.0.0:8080', '127.0.0.1', 8080],
    ['10.1.2.3:9000', '10.1.2.3', 9000],
    ['[::1]:9443', '::1', 9443],
  ])('probes /healthz and /readyz on the node for --admin-address=%s', (address, host, port) => {
    const c = agentContainer(objects([`--admin-address=${address}`]));
    expect(c.livenessProbe.httpGet).toEqual({ host, port, path: '/healthz', scheme: 'HTTP' });
    expect(c.readinessProbe.httpGet).toEqual({ host, port, path: '/readyz', scheme: 'HTTP' });
    expect(c.args).toContain(`--admin-address=${address}`);
  });

  it('puts every namespaced object and the binding subject in --namespace', () => {
    const objs = objects(['--namespace', 'kwp-system']);
    for (const o of objs.filter((o) => !o.kind.startsWith('Cluster') && o.kind !== 'CustomResourceDefinition')) expect(o.metadata.namespace, o.kind).toBe('kwp-system');
    expect(byKind(objs, 'ClusterRoleBinding').subjects[0].namespace).toBe('kwp-system');
  });

  it('uses --image, --fail-open and --strict', () => {
    const c = agentContainer(objects(['--image', 'registry.example/kwp:dev', '--fail-open=false', '--strict=false']));
    expect(c.image).toBe('registry.example/kwp:dev');
    expect(c.args).toContain('--fail-open=false');
    expect(c.args).toContain('--strict=false');
  });

  it('ships the --pipeline file in the ConfigMap the agent reads', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kwp-manifests-'));
    const file = path.join(dir, 'pipeline.yaml');
    const text = 'kind: Pipeline\nstages:\n  - name: np\n    module: network-policy\n';
    writeFileSync(file, text);
    const objs = objects(['--pipeline', file]);
    expect(byKind(objs, 'ConfigMap').data['pipeline.yaml']).toBe(text);
    const c = agentContainer(objs);
    const mount = c.volumeMounts.find((m: any) => m.name === 'pipeline');
    expect(c.args).toContain(`--pipeline=${mount.mountPath}/pipeline.yaml`);
  });

  it.each([
    [['--fail-open=maybe'], 'KWP_ERR_USAGE: kwp manifests: --fail-open must be true or false'],
    [['--admin-address', '9443'], 'KWP_ERR_USAGE: kwp manifests: --admin-address "9443" is not HOST:PORT'],
    [['--namespace', 'Kube_System'], 'KWP_ERR_USAGE: kwp manifests: --namespace "Kube_System"'],
    [['--replicas', '3'], 'KWP_ERR_USAGE: kwp manifests: '],
    [['--packet-thread-nice=-21'], 'KWP_ERR_USAGE: kwp manifests: --packet-thread-nice takes a whole number from -20 to 19 or off, got "-21"'],
    [['--packet-thread-nice=fast'], 'KWP_ERR_USAGE: kwp manifests: --packet-thread-nice takes a whole number from -20 to 19 or off, got "fast"'],
    [['--pipeline', '/nonexistent/pipeline.yaml'], 'KWP_ERR_USAGE: kwp manifests: --pipeline /nonexistent/pipeline.yaml could not be read'],
  ])('rejects %j with a usage error naming the flag', (argv, prefix) => {
    expect(usageError(argv)).toContain(prefix);
  });

  it('rejects a pipeline file that is not a pipeline, naming the file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kwp-manifests-'));
    const file = path.join(dir, 'bad.yaml');
    writeFileSync(file, 'stages: nope\n');
    expect(usageError(['--pipeline', file])).toMatch(new RegExp(`^KWP_ERR_PIPELINE_INVALID: ${file}`));
  });

  it('reports where the default pipeline came from in the header', () => {
    expect(manifestOptions([]).pipelineFrom).toMatch(/deploy\/pipeline.yaml|built-in default/);
    expect(renderManifests([]).split('\n')[1]).toContain(manifestOptions([]).pipelineFrom);
  });
});

describe('agentFlags', () => {
  it('names each flag once, describes it, and gives defaults of the declared type', () => {
    expect(new Set(agentFlags.map((f) => f.name)).size).toBe(agentFlags.length);
    for (const f of agentFlags) {
      expect(f.description.length, f.name).toBeGreaterThan(10);
      if (f.default !== undefined) expect(typeof f.default, f.name).toBe(f.type);
    }
    const names = agentFlags.map((f) => f.name);
    for (const required of ['kubeconfig', 'node-name', 'pipeline', 'fail-open', 'strict', 'admin-address', 'admin-token-file', 'state-dir', 'manifests', 'dataplane', 'v']) {
      expect(names).toContain(required);
    }
  });
});

describe('deploy/Dockerfile', () => {
  const dockerfile = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it('builds in a first stage and runs on Node 20 slim with the netfilter tools', () => {
    expect(stages).toHaveLength(2);
    expect(stages[0]).toMatch(/^node:20-\S*slim AS build/);
    expect(stages[0]).toContain('npm run build');
    const runtime = stages[1];
    expect(runtime).toMatch(/^node:20-\S*slim\n/);
    for (const pkg of ['libnetfilter-queue1', 'iptables', 'nftables', 'conntrack']) expect(runtime).toContain(` ${pkg}`);
  });

  it('runs the kwp CLI, so the DaemonSet args begin with the agent subcommand', () => {
    const entrypoint = /^ENTRYPOINT (.*)$/m.exec(stages[1]);
    // With the agent's Node flags (host/agent-node-flags.ts), which the memory bench measures.
    expect(JSON.parse(entrypoint![1])).toEqual(['node', ...AGENT_NODE_FLAGS, '/opt/kwp/bin/kwp.js']);
    expect(agentContainer(objects()).args[0]).toBe('agent');
  });

  it("sets the agent's allocator environment in the runtime stage, which the memory bench measures too", () => {
    const env: Record<string, string> = {};
    for (const [, line] of stages[1].matchAll(/^ENV (.*)$/gm)) {
      for (const pair of line.trim().split(/\s+/)) {
        const eq = pair.indexOf('=');
        env[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
    }
    expect(Object.keys(AGENT_MALLOC_ENV).length).toBeGreaterThan(0);
    for (const [name, value] of Object.entries(AGENT_MALLOC_ENV)) expect(env[name], name).toBe(value);
  });
});

describe('kwp manifests and its default image', () => {
  it('says on stderr that the default image is not published, and is quiet with --image', async () => {
    const { runManifestsCommand } = await import('./install-yaml-command.js');
    const err: string[] = [];
    const out: string[] = [];
    const { vi } = await import('vitest');
    const e = vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => { err.push(String(c)); return true; });
    const o = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => { out.push(String(c)); return true; });
    try {
      await runManifestsCommand([]);
      expect(err.join('')).toMatch(/^warning: no --image given, so the DaemonSet runs ghcr\.io\/kube-wasm-policies\/kwp:v[\d.]+, which this project does not publish; build deploy\/Dockerfile/);
      err.length = 0;
      await runManifestsCommand(['--image', 'registry.example/kwp:1']);
      expect(err).toEqual([]);
      expect(out.join('')).toContain('image: registry.example/kwp:1');
    } finally {
      e.mockRestore();
      o.mockRestore();
    }
  });
  it('adds the cluster-level admin API with --fleet-controller: one Recreate Deployment of kwp agent --fleet that the agent accepts, its RBAC and a Service', () => {
    expect(objects().some((o) => o.metadata?.name === 'kwp-fleet')).toBe(false);
    const objs = objects(['--fleet-controller', '--registry', 'registry.example.com/kwp', '--namespace', 'kwp']);
    const deployment = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'kwp-fleet');
    expect(deployment.metadata.namespace).toBe('kwp');
    expect(deployment.spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
    const c = deployment.spec.template.spec.containers[0];
    expect(c.args[0]).toBe('agent');
    expect(parseAgentFlags(c.args.slice(1))).toMatchObject({
      fleet: true, dataplane: 'off', 'admin-address': '0.0.0.0:9443', 'admin-token-file': '/etc/kwp-fleet/token', registry: 'registry.example.com/kwp', 'fleet-namespace': 'kwp',
    });
    expect(deployment.spec.template.spec.volumes).toContainEqual({ name: 'token', secret: { secretName: 'kwp-fleet-admin-token', items: [{ key: 'token', path: 'token' }] } });
    const role = objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'kwp-fleet');
    expect(role.rules).toContainEqual({ apiGroups: ['kwp.io'], resources: ['evaluatormodules'], verbs: ['delete'] });
    expect(role.rules).toContainEqual({ apiGroups: ['kwp.io'], resources: ['pipelines/status'], verbs: ['get', 'update'] });
    expect(objs.find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'kwp-fleet').subjects).toEqual([{ kind: 'ServiceAccount', name: 'kwp-fleet', namespace: 'kwp' }]);
    expect(objs.find((o) => o.kind === 'Role' && o.metadata.name === 'kwp-fleet-modules').rules[0].verbs).toEqual(['get', 'create', 'update', 'delete']);
    expect(objs.find((o) => o.kind === 'Service' && o.metadata.name === 'kwp-fleet').spec.ports[0].port).toBe(9443);
  });

  it('refuses --registry without --fleet-controller, and a registry that is not HOST/PREFIX', () => {
    expect(usageError(['--registry', 'registry.example.com/kwp'])).toMatch(/^KWP_ERR_USAGE: kwp manifests: --registry only applies with --fleet-controller/);
    expect(usageError(['--fleet-controller', '--registry', 'registry.example.com'])).toMatch(/^KWP_ERR_USAGE: kwp manifests: --registry must be HOST\[:PORT\]\/REPOSITORY-PREFIX/);
  });
});
