import { describe, it, expect, beforeEach, afterEach, vi } from 'vitest';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kinds, type KindKey, type KubeObject, type ObjectEvent, type ObjectSink } from '../contract.js';
import { KwpError } from '../errors.js';
import { ClusterState } from '../state/cluster-state.js';
import { MANIFEST_KINDS, ManifestSource, documentSlices, loadManifests } from './manifest-files.js';

const FIXTURE = fileURLToPath(new URL('../../test/fixtures/manifests/cluster', import.meta.url));

class RecordingSink implements ObjectSink {
  calls: Array<{ kind: KindKey; names: string[] }> = [];
  latest = new Map<KindKey, KubeObject[]>();
  replace(kind: KindKey, objects: KubeObject[]): void {
    this.calls.push({ kind, names: objects.map((o) => o.metadata.name) });
    this.latest.set(kind, objects);
  }
  apply(_kind: KindKey, _event: ObjectEvent): void {
    throw new Error('a manifest source only delivers snapshots');
  }
  names(kind: KindKey): string[] | undefined {
    return this.latest.get(kind)?.map((o) => o.metadata.name);
  }
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kwp-manifests-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const podYaml = (name: string, ip?: string, namespace = 'default') => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  containers: [{name: c}]
status:
  phase: Running
${ip ? `  podIP: ${ip}\n` : ''}`;

async function loadError(paths: string[]): Promise<KwpError> {
  try {
    await loadManifests(paths);
  } catch (err) {
    return err as KwpError;
  }
  throw new Error('the load was expected to fail');
}

describe('loading manifests', () => {
  it('a directory is read recursively and every kind is delivered, Namespaces and Nodes first, known kinds even when empty', async () => {
    const sink = new RecordingSink();
    const source = new ManifestSource([FIXTURE]);
    expect(source.ready()).toBe(false);
    await source.start(sink);
    expect(source.ready()).toBe(true);
    expect(sink.calls.map((c) => c.kind)).toEqual([...MANIFEST_KINDS, 'example.com/v1/ServicePolicy']);
    expect(sink.names(Kinds.Namespace)).toEqual(['prod', 'dev', 'default']);
    expect(sink.names(Kinds.Node)).toEqual(['node-a', 'node-b']);
    expect(sink.names(Kinds.Pod)).toEqual(['web', 'db', 'client', 'dns', 'agent']);
    expect(sink.names(Kinds.Service)).toEqual([]);
    expect(sink.names(Kinds.NetworkPolicy)).toEqual(['db-from-web']);
    expect(sink.names(Kinds.ClusterNetworkPolicy)).toEqual(['isolate-prod']);
    expect(sink.names(Kinds.AdminNetworkPolicy)).toEqual([]);
    expect(sink.names('example.com/v1/ServicePolicy')).toEqual(['web-maintenance']);
    expect(source.warnings).toEqual([]);
    await source.stop();
  });

  it('the fixture cluster feeds a ClusterState whose pods carry namespace and node labels', async () => {
    const state = new ClusterState();
    await new ManifestSource(FIXTURE).start(state);
    const web = state.podByIP('10.0.1.10')!;
    expect(web.name).toBe('web');
    expect(web.namespaceLabels).toEqual({ env: 'prod', 'kubernetes.io/metadata.name': 'prod' });
    expect(web.nodeLabels).toEqual({ 'topology.kubernetes.io/zone': 'zone-1' });
    expect(state.podByIP('fd00:10::20')?.name).toBe('db');
    expect(state.podByIP('192.168.10.1')).toBeUndefined();
    expect(state.podByName('default', 'agent')?.hostNetwork).toBe(true);
  });

  it('a single JSON object, a typed list and documents with only comments are all understood', async () => {
    await writeFile(
      join(dir, 'one.json'),
      JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc' }, spec: { ports: [{ port: 80 }] } }),
    );
    await writeFile(
      join(dir, 'podlist.yaml'),
      `apiVersion: v1
kind: PodList
items:
  - metadata: {name: listed, namespace: x}
    status: {podIP: 10.9.9.9}
`,
    );
    await writeFile(join(dir, 'comments.yml'), '# nothing here yet\n---\n---\n# still nothing\n');
    const { objects, warnings } = await loadManifests([dir]);
    expect(objects.map((o) => `${o.apiVersion}/${o.kind} ${o.metadata.namespace}/${o.metadata.name}`)).toEqual([
      'v1/Service default/svc',
      'v1/Pod x/listed',
    ]);
    expect(warnings).toEqual([]);
  });

  it.each([
    ['v1', 'Pod'],
    ['v1', 'Service'],
    ['networking.k8s.io/v1', 'NetworkPolicy'],
  ])('a %s %s without a namespace lands in the default namespace', async (apiVersion, kind) => {
    const body = kind === 'NetworkPolicy' ? 'spec:\n  podSelector: {}\n' : kind === 'Pod' ? 'status:\n  podIP: 10.0.0.1\n' : '';
    await writeFile(join(dir, 'x.yaml'), `apiVersion: ${apiVersion}\nkind: ${kind}\nmetadata:\n  name: thing\n${body}`);
    const { objects } = await loadManifests([dir]);
    expect(objects[0].metadata.namespace).toBe('default');
  });

  it('a cluster-scoped or custom kind without a namespace keeps none', async () => {
    await writeFile(join(dir, 'x.yaml'), 'apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\n');
    const { objects } = await loadManifests([dir], { kinds: ['example.com/v1/Thing'] });
    expect(objects[0].metadata.namespace).toBeUndefined();
  });

  it('a pod without an IP is a warning naming its file and document, and the pod is still delivered', async () => {
    const file = join(dir, 'pods.yaml');
    await writeFile(file, `${podYaml('has-ip', '10.0.0.1')}---\n${podYaml('pending')}`);
    const heard: string[] = [];
    const sink = new RecordingSink();
    const source = new ManifestSource([file], { onWarning: (w) => heard.push(w) });
    await source.start(sink);
    expect(source.warnings).toHaveLength(1);
    expect(source.warnings[0]).toContain(`${file}: document 2`);
    expect(source.warnings[0]).toContain('default/pending');
    expect(source.warnings[0]).toContain('status.podIPs');
    expect(heard).toEqual(source.warnings);
    expect(sink.names(Kinds.Pod)).toEqual(['has-ip', 'pending']);
  });

  it('hidden entries (a mounted ConfigMap\'s ..data copy) and other file types are skipped', async () => {
    await mkdir(join(dir, '..2026_01_01'));
    await writeFile(join(dir, '..2026_01_01', 'pods.yaml'), podYaml('a', '10.0.0.1'));
    await symlink('..2026_01_01', join(dir, '..data'));
    await symlink(join('..data', 'pods.yaml'), join(dir, 'pods.yaml'));
    await writeFile(join(dir, 'README.md'), 'not a manifest: [');
    await writeFile(join(dir, '.pods.yaml.swp'), 'garbage: [');
    const { objects } = await loadManifests([dir]);
    expect(objects.map((o) => o.metadata.name)).toEqual(['a']);
  });

  it('the same file named twice is read once', async () => {
    const file = join(dir, 'p.yaml');
    await writeFile(file, podYaml('a', '10.0.0.1'));
    const { objects } = await loadManifests([file, dir]);
    expect(objects).toHaveLength(1);
  });

  it('an empty directory loads with a warning', async () => {
    const { objects, warnings } = await loadManifests([dir]);
    expect(objects).toEqual([]);
    expect(warnings).toEqual([`${dir}: the directory holds no .yaml, .yml or .json files`]);
  });

  it('metadata.managedFields survive the loader and are trimmed by the state', async () => {
    await writeFile(join(dir, 'p.yaml'), `${podYaml('a', '10.0.0.1')}`.replace('  namespace: default\n', '  namespace: default\n  managedFields: [{manager: kubectl}]\n'));
    const state = new ClusterState();
    await new ManifestSource(dir).start(state);
    expect(state.object(Kinds.Pod, 'default/a')!.metadata).not.toHaveProperty('managedFields');
  });
});

describe('manifest errors', () => {
  const cases: Array<{ name: string; file: string; content: string; where: string; hint: RegExp }> = [
    {
      name: 'unparsable YAML in the second document',
      file: 'bad.yaml',
      content: `${podYaml('a', '10.0.0.1')}---\nkind: Pod\nmetadata: {name: [\n`,
      where: 'document 2',
      hint: /not valid YAML at line \d+, column \d+.*fix the syntax/,
    },
    {
      name: 'a duplicated key',
      file: 'dup.yaml',
      content: 'apiVersion: v1\nkind: Pod\nkind: Service\nmetadata: {name: a}\n',
      where: 'document 1',
      hint: /not valid YAML at line 3/,
    },
    {
      name: 'unparsable JSON',
      file: 'bad.json',
      content: '{"apiVersion": "v1",\n "kind": "Pod",}',
      where: 'document 1',
      hint: /not valid JSON at line 2, column 16 .*fix the syntax/,
    },
    {
      name: 'a document that is a list',
      file: 'list.yaml',
      content: '- a\n- b\n',
      where: 'document 1',
      hint: /is a list, not a Kubernetes object/,
    },
    {
      name: 'a document that is a bare string',
      file: 'text.yaml',
      content: `${podYaml('a', '10.0.0.1')}---\njust some words\n`,
      where: 'document 2',
      hint: /is a string, not a Kubernetes object/,
    },
    {
      name: 'a missing apiVersion',
      file: 'noapi.yaml',
      content: 'kind: Pod\nmetadata: {name: a}\n',
      where: 'document 1',
      hint: /\(Pod\) has no apiVersion; add one/,
    },
    {
      name: 'a missing kind',
      file: 'nokind.yaml',
      content: 'apiVersion: v1\nmetadata: {name: a}\n',
      where: 'document 1',
      hint: /has no kind; add the object's kind/,
    },
    {
      name: 'a missing metadata.name',
      file: 'noname.yaml',
      content: 'apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n',
      where: 'document 1',
      hint: /\(Pod\) has no metadata.name/,
    },
    {
      name: 'a label whose value is a number',
      file: 'label.yaml',
      content: 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: {version: 2}\n',
      where: 'document 1',
      hint: /metadata.labels.version is a number; values must be strings, so quote it \("2"\)/,
    },
    {
      name: 'a List whose items are not a list',
      file: 'items.json',
      content: '{"apiVersion": "v1", "kind": "List", "items": {"a": 1}}',
      where: 'document 1',
      hint: /items must be a list/,
    },
    {
      name: 'a List item without a name',
      file: 'item.yaml',
      content: 'apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  - {apiVersion: v1, kind: Pod, metadata: {}}\n',
      where: 'document 1, item 2',
      hint: /has no metadata.name/,
    },
    {
      name: 'an alias to an anchor that does not exist',
      file: 'alias.yaml',
      content: 'apiVersion: v1\nkind: Pod\nmetadata: {name: *nowhere}\n',
      where: 'document 1',
      hint: /could not be read: Unresolved alias.*nowhere; fix the YAML there/,
    },
  ];

  it.each(cases)('$name is a KWP_ERR_MANIFEST naming the file and $where', async ({ file, content, where, hint }) => {
    const path = join(dir, file);
    await writeFile(path, content);
    const err = await loadError([dir]);
    expect(err).toBeInstanceOf(KwpError);
    expect(err.code).toBe('KWP_ERR_MANIFEST');
    expect(err.message.startsWith(`${path}: ${where}`)).toBe(true);
    expect(err.message).toMatch(hint);
    expect(err.message).not.toMatch(/\n\s+at /);
  });

  it('the same object in two files is an error naming both places', async () => {
    await writeFile(join(dir, 'a.yaml'), podYaml('twin', '10.0.0.1'));
    await writeFile(join(dir, 'b.yaml'), `${podYaml('other', '10.0.0.2')}---\n${podYaml('twin', '10.0.0.3')}`);
    const err = await loadError([dir]);
    expect(err.code).toBe('KWP_ERR_MANIFEST');
    expect(err.message).toBe(
      `${join(dir, 'b.yaml')}: document 2 defines v1/Pod default/twin again (first in ${join(dir, 'a.yaml')}: document 1); remove or rename one of the two`,
    );
  });

  it('a path that does not exist is an error saying so', async () => {
    const missing = join(dir, 'nope');
    const err = await loadError([missing]);
    expect(err.code).toBe('KWP_ERR_MANIFEST');
    expect(err.message).toBe(`manifest path ${missing} does not exist; give an existing file or directory`);
  });

  it('a source with no paths is a usage error', () => {
    expect(() => new ManifestSource([])).toThrow(KwpError);
  });

  it('a bad file makes start fail and leaves the sink untouched', async () => {
    await writeFile(join(dir, 'good.yaml'), podYaml('a', '10.0.0.1'));
    await writeFile(join(dir, 'zbad.yaml'), 'kind: [');
    const sink = new RecordingSink();
    const source = new ManifestSource(dir);
    await expect(source.start(sink)).rejects.toMatchObject({ code: 'KWP_ERR_MANIFEST' });
    expect(sink.calls).toEqual([]);
    expect(source.ready()).toBe(false);
  });
});

describe('watching manifests', () => {
  it('an edit is picked up, including a kind that became empty, and a broken edit keeps the last good state until fixed', async () => {
    await writeFile(join(dir, 'pods.yaml'), podYaml('a', '10.0.0.1'));
    await writeFile(join(dir, 'custom.yaml'), 'apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\n');
    const state = new ClusterState();
    const errors: KwpError[] = [];
    let reloads = 0;
    const source = new ManifestSource(dir, {
      kinds: ['example.com/v1/Thing'],
      watch: true,
      debounceMs: 30,
      onError: (e) => errors.push(e),
      onReload: () => reloads++,
    });
    await source.start(state);
    try {
      expect(state.podByIP('10.0.0.1')?.name).toBe('a');

      await writeFile(join(dir, 'pods.yaml'), `${podYaml('a', '10.0.0.1')}---\n${podYaml('b', '10.0.0.2')}`);
      await rm(join(dir, 'custom.yaml'));
      await vi.waitFor(() => {
        expect(state.podByIP('10.0.0.2')?.name).toBe('b');
        expect(state.objects('example.com/v1/Thing')).toEqual([]);
      }, { timeout: 5000, interval: 20 });

      await writeFile(join(dir, 'pods.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata: {name: [\n');
      await vi.waitFor(() => expect(errors).toHaveLength(1), { timeout: 5000, interval: 20 });
      expect(errors[0].code).toBe('KWP_ERR_MANIFEST');
      expect(errors[0].message).toContain(`${join(dir, 'pods.yaml')}: document 1`);
      expect(errors[0].message).toContain('previous manifests stay in force');
      expect(source.lastError).toBe(errors[0]);
      expect(state.podByIP('10.0.0.1')?.name).toBe('a');
      expect(state.podByIP('10.0.0.2')?.name).toBe('b');

      const reloadsBeforeFix = reloads;
      await writeFile(join(dir, 'pods.yaml'), podYaml('c', '10.0.0.3'));
      await vi.waitFor(() => expect(state.podByIP('10.0.0.3')?.name).toBe('c'), { timeout: 5000, interval: 20 });
      expect(state.podByIP('10.0.0.1')).toBeUndefined();
      expect(source.lastError).toBeUndefined();
      expect(reloads).toBeGreaterThan(reloadsBeforeFix);
    } finally {
      await source.stop();
    }
  });

  it('a file in a new subdirectory is picked up', async () => {
    const state = new ClusterState();
    const source = new ManifestSource(dir, { watch: true, debounceMs: 30 });
    await source.start(state);
    try {
      await mkdir(join(dir, 'team-a'));
      await writeFile(join(dir, 'team-a', 'p.yaml'), podYaml('deep', '10.0.0.7'));
      await vi.waitFor(() => expect(state.podByIP('10.0.0.7')?.name).toBe('deep'), { timeout: 5000, interval: 20 });
    } finally {
      await source.stop();
    }
  });

  it('a watched single file replaced the way editors save (write elsewhere, rename over) is picked up', async () => {
    const file = join(dir, 'pods.yaml');
    await writeFile(file, podYaml('a', '10.0.0.1'));
    const state = new ClusterState();
    const source = new ManifestSource(file, { watch: true, debounceMs: 30 });
    await source.start(state);
    try {
      await writeFile(join(dir, 'pods.yaml.tmp'), podYaml('a', '10.0.0.9'));
      await rename(join(dir, 'pods.yaml.tmp'), file);
      await vi.waitFor(() => expect(state.podByIP('10.0.0.9')?.name).toBe('a'), { timeout: 5000, interval: 20 });
    } finally {
      await source.stop();
    }
  });

  it('a watched directory keeps seeing edits after files are renamed over and rewritten in place', async () => {
    const file = join(dir, 'pods.yaml');
    await writeFile(file, podYaml('a', '10.0.0.1'));
    const state = new ClusterState();
    const source = new ManifestSource(dir, { watch: true, debounceMs: 30 });
    await source.start(state);
    try {
      // Editors save by renaming over the file; tools like sed -i do too. Each must be seen, and so must later in-place writes.
      for (const ip of ['10.0.0.11', '10.0.0.12', '10.0.0.13']) {
        await writeFile(`${file}.tmp`, podYaml('a', ip));
        await rename(`${file}.tmp`, file);
        await vi.waitFor(() => expect(state.podByIP(ip)?.name).toBe('a'), { timeout: 5000, interval: 20 });
      }
      for (const ip of ['10.0.0.14', '10.0.0.15']) {
        await writeFile(file, podYaml('a', ip));
        await vi.waitFor(() => expect(state.podByIP(ip)?.name).toBe('a'), { timeout: 5000, interval: 20 });
      }
    } finally {
      await source.stop();
    }
  });

  it('a burst of writes is read once after the debounce', async () => {
    await writeFile(join(dir, 'pods.yaml'), podYaml('a', '10.0.0.1'));
    let reloads = 0;
    const source = new ManifestSource(dir, { watch: true, debounceMs: 300, onReload: () => reloads++ });
    await source.start(new ClusterState());
    try {
      for (let i = 2; i < 8; i++) await writeFile(join(dir, 'pods.yaml'), podYaml('a', `10.0.0.${i}`));
      await vi.waitFor(() => expect(reloads).toBe(1), { timeout: 5000, interval: 20 });
      await new Promise((r) => setTimeout(r, 500));
      expect(reloads).toBe(1);
    } finally {
      await source.stop();
    }
  });

  it('after stop no change is delivered', async () => {
    await writeFile(join(dir, 'pods.yaml'), podYaml('a', '10.0.0.1'));
    const sink = new RecordingSink();
    const source = new ManifestSource(dir, { watch: true, debounceMs: 20 });
    await source.start(sink);
    const calls = sink.calls.length;
    await source.stop();
    await writeFile(join(dir, 'pods.yaml'), podYaml('b', '10.0.0.2'));
    await new Promise((r) => setTimeout(r, 200));
    expect(sink.calls.length).toBe(calls);
  });
});

describe('a large manifest file is parsed a slice of documents at a time', () => {
  const policy = (i: number) => `apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: { name: p${i}, namespace: x }\nspec:\n  podSelector: { matchLabels: { app: a${i} } }\n`;

  it('4,000 documents are cut at document markers into slices of about 16 KiB, and load whole and in order', async () => {
    const text = `# a comment before the first document\n${Array.from({ length: 4000 }, (_, i) => policy(i)).join('---\n')}`;
    const slices = documentSlices(text);
    expect(slices.length).toBeGreaterThan(4);
    expect(slices.map((s) => s.text).join('')).toBe(text);
    for (const s of slices.slice(1)) expect(s.text.startsWith('---\n')).toBe(true);
    for (const s of slices) expect(s.text.length).toBeLessThan(16 * 1024 + 200);
    expect(slices[1].startLine).toBe(slices[0].text.split('\n').length - 1);
    const dir = mkdtempSync(join(tmpdir(), 'kwp-manifest-slices-'));
    writeFileSync(join(dir, 'many.yaml'), text);
    const names = (await loadManifests([dir])).objects.filter((o) => o.kind === 'NetworkPolicy').map((o) => o.metadata.name);
    expect(names).toEqual(Array.from({ length: 4000 }, (_, i) => `p${i}`));
  });

  it('a directive stays with the document after it', () => {
    const text = `${'#'.repeat(20_000)}\n%YAML 1.2\n---\na: 1\n`;
    expect(documentSlices(text)).toHaveLength(1);
  });

  it('an error far into the file names its document and its line in the whole file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-manifest-slices-'));
    const docs = Array.from({ length: 3000 }, (_, i) => policy(i));
    docs[2500] = 'apiVersion: v1\nkind: [unclosed\n';
    const text = docs.join('---\n');
    writeFileSync(join(dir, 'many.yaml'), text);
    const line = text.slice(0, text.indexOf('kind: [unclosed')).split('\n').length;
    await expect(loadManifests([dir])).rejects.toThrow(new RegExp(`many\\.yaml: document 2501 is not valid YAML at line (${line}|${line + 1}),`));
  });
});
