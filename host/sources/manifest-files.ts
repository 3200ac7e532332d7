// Kubernetes objects from files instead of an API server: what `kwp eval`
// evaluates against and what `kwp agent --manifests DIR` enforces. A directory
// is read recursively; each file holds YAML documents, one JSON object, or a
// `kind: List`. Every load is all-or-nothing: one bad document fails the load
// with its file and document named, and in watch mode the last good state
// stays in force until the files are fixed.

import { watch, type FSWatcher } from 'node:fs';
import { readFile, readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { CLUSTER_INPUT_KINDS, Kinds, kindKeyOf, type KindKey, type KubeObject, type ObjectSink, type ObjectSource, type SourceRefusal } from '../contract.js';
import { KwpError, isKwpError } from '../errors.js';
import { validateObject as validateSchema, validationContext } from '../validation/object-validator.js';
import { UNREAD_KINDS, unreadReason } from '../validation/unread-kinds.js';

/** Kinds a manifest source always delivers, found or not, so evaluators asking for them see a (maybe empty) snapshot. */
export const MANIFEST_KINDS: readonly KindKey[] = CLUSTER_INPUT_KINDS;

/** Namespaced built-in kinds that kubectl would put in `default` when a manifest leaves the namespace out. */
const DEFAULT_NAMESPACED_KINDS: ReadonlySet<KindKey> = new Set([Kinds.Pod, Kinds.Service, Kinds.EndpointSlice, Kinds.NetworkPolicy]);

const MANIFEST_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

export interface ManifestLoad {
  objects: KubeObject[];
  warnings: string[];
}

export interface LoadOptions {
  /** Kinds to accept without a schema: those the pipeline's modules ask for (`apiVersion/Kind`). */
  kinds?: Iterable<string>;
}

/** At most this many problems are listed in one error; the rest are counted. */
const MAX_LISTED_PROBLEMS = 20;

/** A refused load, with the files (or paths) its problems are in: what /readyz and the metrics name. */
export class ManifestRefusal extends KwpError {
  constructor(message: string, readonly files: string[], options?: { cause?: unknown }) {
    super('KWP_ERR_MANIFEST', message, options);
  }
}

/** `err` as a refusal of `files`; a refusal keeps the files it already names. */
function refusing(err: unknown, files: string[]): unknown {
  if (err instanceof ManifestRefusal || !isKwpError(err) || err.code !== 'KWP_ERR_MANIFEST') return err;
  return new ManifestRefusal(err.message, files, { cause: err });
}

/** kwp.io objects configure the agent (a Pipeline file, fleet resources): they are not cluster state. */
function isAgentConfiguration(object: Pick<KubeObject, 'apiVersion'>): boolean {
  return object.apiVersion.startsWith('kwp.io/');
}

function describeObject(object: KubeObject): string {
  const ns = object.metadata.namespace;
  return `${object.kind} ${ns ? `${ns}/` : ''}${object.metadata.name}`;
}

interface Located {
  object: KubeObject;
  where: string;
  file: string;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value}`;
}

function isPlainObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks the shape every document needs and returns it as a KubeObject; `where` is "file: document N[, item M]". */
function checkObject(value: unknown, where: string): KubeObject {
  if (!isPlainObject(value)) {
    throw new KwpError(
      'KWP_ERR_MANIFEST',
      `${where} is ${describeType(value)}, not a Kubernetes object; each document must be a mapping with apiVersion, kind and metadata.name`,
    );
  }
  const kind = value.kind;
  if (typeof kind !== 'string' || kind === '') {
    throw new KwpError('KWP_ERR_MANIFEST', `${where} has no kind; add the object's kind, for example "kind: Pod"`);
  }
  if (typeof value.apiVersion !== 'string' || value.apiVersion === '') {
    throw new KwpError('KWP_ERR_MANIFEST', `${where} (${kind}) has no apiVersion; add one, for example "apiVersion: v1" for a Pod`);
  }
  // A Pipeline file (or another kwp.io object) is skipped by loadManifests, with a warning, whatever its metadata.
  if (isAgentConfiguration(value as KubeObject)) return value as KubeObject;
  const metadata = value.metadata;
  if (!isPlainObject(metadata) || typeof metadata.name !== 'string' || metadata.name === '') {
    throw new KwpError('KWP_ERR_MANIFEST', `${where} (${kind}) has no metadata.name; every object needs a name`);
  }
  if (metadata.namespace !== undefined && (typeof metadata.namespace !== 'string' || metadata.namespace === '')) {
    throw new KwpError('KWP_ERR_MANIFEST', `${where} (${kind} ${metadata.name}): metadata.namespace must be a non-empty string`);
  }
  for (const field of ['labels', 'annotations'] as const) {
    const map = metadata[field];
    if (map === undefined || map === null) continue;
    if (!isPlainObject(map)) {
      throw new KwpError('KWP_ERR_MANIFEST', `${where} (${kind} ${metadata.name}): metadata.${field} must be a mapping of strings, not ${describeType(map)}`);
    }
    for (const [key, v] of Object.entries(map)) {
      if (typeof v !== 'string') {
        throw new KwpError(
          'KWP_ERR_MANIFEST',
          `${where} (${kind} ${metadata.name}): metadata.${field}.${key} is ${describeType(v)}; values must be strings, so quote it (${JSON.stringify(String(v))})`,
        );
      }
    }
  }
  const object = value as KubeObject;
  if (!metadata.namespace && DEFAULT_NAMESPACED_KINDS.has(kindKeyOf(object))) metadata.namespace = 'default';
  return object;
}

/** A `kind: List` (or a typed `PodList`-style list) expands to its items; anything else is one object. */
function expandDocument(value: unknown, where: string, into: Located[]): void {
  if (isPlainObject(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && 'items' in value) {
    if (!Array.isArray(value.items)) {
      throw new KwpError('KWP_ERR_MANIFEST', `${where} (${value.kind}): items must be a list of objects, not ${describeType(value.items)}`);
    }
    // Typed lists from the API (PodList) leave apiVersion and kind out of their items.
    const itemKind = value.kind === 'List' ? undefined : value.kind.slice(0, -'List'.length);
    value.items.forEach((item: unknown, i: number) => {
      if (itemKind && isPlainObject(item)) {
        item.kind ??= itemKind;
        item.apiVersion ??= value.apiVersion;
      }
      const itemWhere = `${where}, item ${i + 1}`;
      into.push({ object: checkObject(item, itemWhere), where: itemWhere, file: '' });
    });
    return;
  }
  into.push({ object: checkObject(value, where), where, file: '' });
}

function parseJsonFile(text: string, file: string, into: Located[], warnings: string[]): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const detail = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');
    const offset = /at position (\d+)/.exec(detail);
    let at = '';
    if (offset) {
      const before = text.slice(0, Number(offset[1]));
      const line = before.split('\n').length;
      at = ` at line ${line}, column ${before.length - before.lastIndexOf('\n')}`;
    }
    throw new KwpError(
      'KWP_ERR_MANIFEST',
      `${file}: document 1 is not valid JSON${at} (${detail}); fix the syntax, or rename the file to .yaml if it holds YAML`,
    );
  }
  if (isFlowsFile(value)) {
    warnings.push(`${file}: a list of flows, not Kubernetes objects; skipped (give it with --flows)`);
    return;
  }
  expandDocument(value, `${file}: document 1`, into);
}

/** A JSON array of {src, dst, ...}: the flows file that often sits next to the manifests. */
function isFlowsFile(value: unknown): boolean {
  return Array.isArray(value) && value.length > 0 && value.every((f) => isPlainObject(f) && 'src' in f && 'dst' in f && !('kind' in f));
}

/**
 * A file is parsed a slice of documents at a time (about SLICE_CHARS each),
 * with a turn of the event loop between slices, and the objects are validated
 * VALIDATE_SLICE at a time: a watched directory with tens of thousands of
 * policies must not hold the agent's main thread — and /healthz, the admin
 * API, every decision — for the whole load (4,000 policies took over a
 * second to parse in one piece, 0.4 s to validate). YAML 1.2 forbids a `---`
 * line inside content, so a document starts at such a line or at the start.
 */
const SLICE_CHARS = 16 * 1024;
/** Objects validated between two turns of the event loop, for the same reason. */
const VALIDATE_SLICE = 250;

async function parseYamlFile(text: string, file: string, into: Located[]): Promise<void> {
  let numbered = 0;
  for (const slice of documentSlices(text)) {
    if (slice.startLine > 0) await new Promise((r) => setImmediate(r));
    const documents = parseAllDocuments(slice.text);
    // parseAllDocuments returns an EmptyStream (not an array) for a text without documents.
    if (!Array.isArray(documents)) continue;
    for (const document of documents) {
      const where = `${file}: document ${++numbered}`;
      const error = document.errors[0];
      if (error) {
        const position = error.linePos?.[0];
        const at = position ? ` at line ${position.line + slice.startLine}, column ${position.col}` : '';
        const reason = error.message.split(' at line ')[0].split('\n')[0];
        throw new KwpError('KWP_ERR_MANIFEST', `${where} is not valid YAML${at}: ${reason}; fix the syntax there`);
      }
      let value: unknown;
      try {
        value = document.toJS({ maxAliasCount: 100 });
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        throw new KwpError('KWP_ERR_MANIFEST', `${where} could not be read: ${reason}; fix the YAML there`);
      }
      // `---` with nothing after it (a trailing separator, a comment-only document) is not an object.
      if (value === null || value === undefined) continue;
      expandDocument(value, where, into);
    }
  }
}

/** `text` cut at `---` lines into slices of about SLICE_CHARS, each with the number of lines before it. */
export function documentSlices(text: string): Array<{ text: string; startLine: number }> {
  if (text.length <= SLICE_CHARS) return [{ text, startLine: 0 }];
  const slices: Array<{ text: string; startLine: number }> = [];
  const marker = /^---(?=[ \t\r]|$)/gm;
  let start = 0;
  let startLine = 0;
  for (let m = marker.exec(text); m; m = marker.exec(text)) {
    // A directive (%YAML, %TAG) belongs to the document after it: never cut between them.
    if (m.index - start < SLICE_CHARS || /(^|\n)%/.test(text.slice(start, m.index))) continue;
    const piece = text.slice(start, m.index);
    slices.push({ text: piece, startLine });
    startLine += piece.split('\n').length - 1;
    start = m.index;
  }
  slices.push({ text: text.slice(start), startLine });
  return slices;
}

async function collectFiles(path: string, files: string[], warnings: string[]): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? String(err)})`;
    throw new KwpError('KWP_ERR_MANIFEST', `manifest path ${path} ${reason}; give an existing file or directory`);
  }
  if (!info.isDirectory()) {
    files.push(path);
    return;
  }
  const before = files.length;
  await walkDirectory(path, files);
  if (files.length === before) warnings.push(`${path}: the directory holds no .yaml, .yml or .json files`);
}

async function walkDirectory(directory: string, files: string[]): Promise<void> {
  let entries;
  try {
    entries = await readdir(directory, { withFileTypes: true });
  } catch (err) {
    throw new KwpError('KWP_ERR_MANIFEST', `directory ${directory} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    // Hidden entries are skipped: a mounted ConfigMap keeps a second copy of every file under ..data.
    if (entry.name.startsWith('.')) continue;
    const path = join(directory, entry.name);
    let isDirectory = entry.isDirectory();
    let isFile = entry.isFile();
    if (entry.isSymbolicLink()) {
      try {
        const target = await stat(path);
        isDirectory = target.isDirectory();
        isFile = target.isFile();
      } catch {
        continue; // a dangling link, typical mid-way through a ConfigMap update
      }
    }
    if (isDirectory) await walkDirectory(path, files);
    else if (isFile && MANIFEST_EXTENSIONS.has(extname(entry.name).toLowerCase())) files.push(path);
  }
}

function podHasIP(pod: KubeObject): boolean {
  const status = pod.status;
  if (Array.isArray(status?.podIPs) && status.podIPs.some((entry: any) => typeof entry?.ip === 'string' && entry.ip !== '')) return true;
  return typeof status?.podIP === 'string' && status.podIP !== '';
}

/**
 * Reads every manifest under `paths` and validates each object strictly
 * against its API schema; throws KwpError(KWP_ERR_MANIFEST) naming the file,
 * document and field of every problem.
 */
export async function loadManifests(paths: string[], options: LoadOptions = {}): Promise<ManifestLoad> {
  const warnings: string[] = [];
  const files: string[] = [];
  for (const path of paths) {
    try {
      await collectFiles(path, files, warnings);
    } catch (err) {
      throw refusing(err, [path]);
    }
  }

  const located: Located[] = [];
  const seenFiles = new Set<string>();
  for (const file of files) {
    const real = await realpath(file).catch(() => resolve(file));
    if (seenFiles.has(real)) continue;
    seenFiles.add(real);
    const before = located.length;
    try {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        throw new KwpError('KWP_ERR_MANIFEST', `${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      }
      if (extname(file).toLowerCase() === '.json') parseJsonFile(text, file, located, warnings);
      else await parseYamlFile(text, file, located);
    } catch (err) {
      throw refusing(err, [file]);
    }
    for (let i = before; i < located.length; i++) located[i].file = file;
  }

  const kept: Located[] = [];
  for (const entry of located) {
    if (!isAgentConfiguration(entry.object)) kept.push(entry);
    else warnings.push(`${entry.where}: ${entry.object.kind} (${entry.object.apiVersion}) configures kwp and is not a cluster object; skipped${entry.object.kind === 'Pipeline' ? ' (give a pipeline file with --pipeline)' : ''}`);
  }
  const context = validationContext(kept.map((l) => l.object), options.kinds);
  const problems: string[] = [];
  const problemFiles = new Set<string>();
  for (const [i, { object, where, file }] of kept.entries()) {
    if (i > 0 && i % VALIDATE_SLICE === 0) await new Promise((r) => setImmediate(r));
    for (const line of validateSchema(object, context)) {
      problems.push(`${where} (${describeObject(object)}): ${line}`);
      problemFiles.add(file);
    }
  }
  for (let i = kept.length - 1; i >= 0; i--) {
    const { object, where } = kept[i];
    const key = kindKeyOf(object);
    if (!UNREAD_KINDS.has(key) || context.accepted.has(key)) continue;
    // A CRD is read (it makes its kind known) but is no cluster state either.
    if (key !== 'apiextensions.k8s.io/v1/CustomResourceDefinition') warnings.unshift(`${where}: ${describeObject(object)} skipped: ${unreadReason(object.kind)}`);
    kept.splice(i, 1);
  }
  if (problems.length) {
    const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
    const more = problems.length > listed.length ? `\n(and ${problems.length - listed.length} more problems)` : '';
    throw new ManifestRefusal(`${listed.join('\n')}${more}`, [...problemFiles]);
  }

  const firstSeen = new Map<string, string>();
  for (const { object, where, file } of kept) {
    const namespace = object.metadata.namespace;
    const id = `${kindKeyOf(object)} ${namespace ? `${namespace}/` : ''}${object.metadata.name}`;
    const earlier = firstSeen.get(id);
    if (earlier) {
      throw new ManifestRefusal(`${where} defines ${id} again (first in ${earlier}); remove or rename one of the two`, [file]);
    }
    firstSeen.set(id, where);
    if (kindKeyOf(object) === Kinds.Pod && !podHasIP(object)) {
      warnings.push(
        `${where}: Pod ${namespace}/${object.metadata.name} has no status.podIP or status.podIPs, so no traffic can match it; add status.podIPs to use it in evaluations`,
      );
    }
  }
  return { objects: kept.map((l) => l.object), warnings };
}

/** Groups objects by kind, Namespaces and Nodes first so pods are derived with their labels in one pass. */
function groupByKind(objects: KubeObject[], alsoKinds: Iterable<KindKey>): Map<KindKey, KubeObject[]> {
  const groups = new Map<KindKey, KubeObject[]>();
  for (const kind of MANIFEST_KINDS) groups.set(kind, []);
  for (const kind of alsoKinds) if (!groups.has(kind)) groups.set(kind, []);
  for (const object of objects) {
    const kind = kindKeyOf(object);
    let group = groups.get(kind);
    if (!group) groups.set(kind, (group = []));
    group.push(object);
  }
  return groups;
}

export interface ManifestSourceOptions {
  /** Kinds to accept without a schema, as in loadManifests. */
  kinds?: Iterable<string>;
  /** Re-read and re-deliver when the files change (`kwp agent --manifests DIR`). */
  watch?: boolean;
  /** Quiet time after the last file event before re-reading, in ms. */
  debounceMs?: number;
  onWarning?: (message: string) => void;
  /** A re-read in watch mode failed; the last good state stays delivered. */
  onError?: (error: KwpError) => void;
  /** A re-read in watch mode succeeded and was delivered. */
  onReload?: (load: ManifestLoad) => void;
}

export class ManifestSource implements ObjectSource {
  readonly name = 'manifests';
  private readonly paths: string[];
  private readonly options: ManifestSourceOptions;
  private sink?: ObjectSink;
  private delivered = new Set<KindKey>();
  private loaded = false;
  private stopped = false;
  private watchers: FSWatcher[] = [];
  /** One non-recursive watcher per directory of each watched tree, by path. */
  private treeWatchers = new Map<string, FSWatcher>();
  private debounceTimer?: NodeJS.Timeout;
  private reloading?: Promise<void>;
  private reloadAgain = false;
  /** Warnings of the last successful load. */
  warnings: string[] = [];
  /** The error of the last failed re-read, cleared by a successful one. */
  lastError?: KwpError;
  /** Re-reads refused since the start, by error code (the `kwp_source_rejected_total` counter). */
  readonly refusedLoads = new Map<string, number>();

  constructor(paths: string | string[], options: ManifestSourceOptions = {}) {
    this.paths = Array.isArray(paths) ? [...paths] : [paths];
    this.options = options;
    if (this.paths.length === 0) {
      throw new KwpError('KWP_ERR_USAGE', 'no manifest paths given; name at least one file or directory');
    }
  }

  async start(sink: ObjectSink): Promise<void> {
    this.sink = sink;
    this.stopped = false;
    this.deliver(await loadManifests(this.paths, { kinds: this.options.kinds }));
    this.loaded = true;
    if (this.options.watch) await this.startWatching();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.debounceTimer);
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
    for (const watcher of this.treeWatchers.values()) watcher.close();
    this.treeWatchers.clear();
    await this.reloading;
  }

  ready(): boolean {
    return this.loaded;
  }

  /** While a re-read is refused: its code, the files it names and the message; the last good state is what is delivered. */
  refusal(): SourceRefusal | undefined {
    const err = this.lastError;
    if (!err) return undefined;
    return { source: this.name, code: err.code, files: err instanceof ManifestRefusal ? err.files : [], message: err.message };
  }

  private deliver(load: ManifestLoad): void {
    const groups = groupByKind(load.objects, this.delivered);
    this.warnings = load.warnings;
    for (const warning of load.warnings) this.options.onWarning?.(warning);
    for (const [kind, objects] of groups) {
      this.sink!.replace(kind, objects);
      this.delivered.add(kind);
    }
  }

  private async startWatching(): Promise<void> {
    for (const path of this.paths) {
      const info = await stat(path);
      if (info.isDirectory()) {
        await this.watchTree(path);
      } else {
        // Editors save by writing a new file and renaming it over the old one,
        // which a watch on the file itself would miss; watch its directory.
        const name = basename(path);
        this.watchers.push(this.watchPath(dirname(path), {}, (changed) => changed === null || changed === name));
      }
    }
  }

  /**
   * Node 20's recursive watch on Linux stops reporting a file once something
   * was renamed over it (how editors and `sed -i` save), so every directory of
   * the tree gets a plain watcher of its own; after each reload the tree is
   * walked again to follow directories that came or went.
   */
  private async watchTree(root: string): Promise<void> {
    const dirs = new Set(await directoriesUnder(root));
    for (const dir of dirs) {
      if (!this.treeWatchers.has(dir)) this.treeWatchers.set(dir, this.watchPath(dir, {}, () => true));
    }
    for (const [dir, watcher] of this.treeWatchers) {
      if ((dir === root || dir.startsWith(root + '/')) && !dirs.has(dir)) {
        watcher.close();
        this.treeWatchers.delete(dir);
      }
    }
  }

  private watchPath(path: string, options: { recursive?: boolean }, relevant: (file: string | null) => boolean): FSWatcher {
    const watcher = watch(path, options, (_event, file) => {
      if (relevant(file === null ? null : String(file))) this.scheduleReload();
    });
    watcher.on('error', (err) => {
      this.report(new KwpError('KWP_ERR_MANIFEST', `watching ${path} failed (${err.message}); changes there are no longer picked up`));
    });
    return watcher;
  }

  private async refreshTreeWatchers(): Promise<void> {
    for (const path of this.paths) {
      try {
        if ((await stat(path)).isDirectory()) await this.watchTree(path);
      } catch {
        // The path is gone; the reload itself reports that.
      }
    }
  }

  private scheduleReload(): void {
    if (this.stopped) return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => this.reload(), this.options.debounceMs ?? 100);
  }

  private reload(): void {
    if (this.reloading) {
      this.reloadAgain = true;
      return;
    }
    this.reloading = (async () => {
      do {
        this.reloadAgain = false;
        try {
          const load = await loadManifests(this.paths, { kinds: this.options.kinds });
          if (this.stopped) return;
          await this.refreshTreeWatchers();
          this.deliver(load);
          this.lastError = undefined;
          this.options.onReload?.(load);
        } catch (err) {
          if (this.stopped) return;
          const kept = '(the previous manifests stay in force until this is fixed)';
          this.report(
            err instanceof ManifestRefusal ? new ManifestRefusal(`${err.message} ${kept}`, err.files)
              : isKwpError(err) ? new KwpError(err.code, `${err.message} ${kept}`)
              : new KwpError('KWP_ERR_MANIFEST', `re-reading the manifests failed: ${String(err)}`),
          );
        }
      } while (this.reloadAgain && !this.stopped);
    })().finally(() => {
      this.reloading = undefined;
    });
  }

  private report(error: KwpError): void {
    this.lastError = error;
    this.refusedLoads.set(error.code, (this.refusedLoads.get(error.code) ?? 0) + 1);
    // Without a handler a broken edit would go unnoticed while the old state stays in force.
    if (this.options.onError) this.options.onError(error);
    else process.emitWarning(`${error.code}: ${error.message}`);
  }
}

/** `root` and every directory below it (symbolic links are not followed). */
async function directoriesUnder(root: string): Promise<string[]> {
  const out = [root];
  for (let i = 0; i < out.length; i++) {
    let entries;
    try {
      entries = await readdir(out[i], { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) if (e.isDirectory()) out.push(join(out[i], e.name));
  }
  return out;
}
