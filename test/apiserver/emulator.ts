// A small Kubernetes API server over real HTTP for tests: lists (paged with
// limit/continue, narrowed by label and field selectors), chunked watches,
// discovery, 404 for uninstalled CRDs and 410 after compaction, plus controls
// to break things (close watches, go down, fail requests). Each
// instance owns its own store and port, so a suite can run several at once
// (two clusters for multicluster tests).

import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { KindKey, KubeObject } from '../../host/contract.js';
import { knownResource, defaultWatchedKinds, parseKindKey, pluralOf } from '../../host/sources/kubernetes/resources.js';
import { Kinds } from '../../host/contract.js';
import { parseFieldSelector, parseLabelSelector, type ObjectPredicate } from './selectors.js';

export interface EmulatedResource {
  /** '' for the core group. */
  group: string;
  version: string;
  kindName: string;
  plural: string;
  namespaced: boolean;
  /** False for a CRD that is not installed yet: 404 on list/watch, absent from discovery. */
  installed: boolean;
  /**
   * A CRD with the status subresource: `metadata.generation` counts changes
   * outside metadata and status, writes to the object keep its status, and
   * only `PUT …/<name>/status` (or `updateStatus()`) changes the status.
   */
  statusSubresource?: boolean;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  watch: boolean;
}

export interface InjectedFailure {
  /** HTTP status to answer with, e.g. 500 or 403. */
  status: number;
  /** How many matching requests fail; Infinity until cleared. */
  times: number;
  /** Which requests fail; every request when absent. */
  match?: (req: RecordedRequest) => boolean;
}

export interface ApiServerEmulatorOptions {
  /** Resources to serve; defaults to `defaultEmulatedResources()`. */
  resources?: EmulatedResource[];
  /** Kinds among `resources` whose CRD starts uninstalled. */
  notInstalled?: KindKey[];
  /** Port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number;
  /** Reserve the port but refuse connections until `up()`. */
  down?: boolean;
  /** When set, requests must carry `Authorization: Bearer <token>`. */
  token?: string;
  /**
   * How a watch from a compacted resourceVersion fails. `error-event` (default)
   * is what kube-apiserver does: 200, one ERROR event holding a 410 Status, end
   * of stream. `http-status` answers the request itself with 410.
   */
  expiredWatch?: 'error-event' | 'http-status';
  /** Add a `managedFields` entry to every stored object, as a real server does. Default true. */
  managedFields?: boolean;
  /** Serve HTTPS with this certificate (e.g. `testTls()`); plain HTTP when absent. */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

interface HistoryEntry {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: KindKey;
  object: KubeObject;
  /** The object before this change, for selector transitions. */
  previous?: KubeObject;
}

interface OpenWatch {
  res: http.ServerResponse;
  kind: KindKey;
  namespace?: string;
  matches: ObjectPredicate;
  bookmarks: boolean;
  timer?: NodeJS.Timeout;
}

/** The rest of a paged list, frozen at the first page as a real server's snapshot would be. */
interface ListSnapshot {
  rv: number;
  items: unknown[];
  offset: number;
  apiVersion: string;
  kind: string;
}

/** Pods, Namespaces, Nodes, Services, NetworkPolicies and the three network-policy-api CRDs, all installed. */
export function defaultEmulatedResources(): EmulatedResource[] {
  const kinds = [...new Set<KindKey>([...defaultWatchedKinds, Kinds.Service])];
  return kinds.map((kind) => {
    const ref = knownResource(kind)!;
    return { group: ref.group, version: ref.version, kindName: ref.kindName, plural: ref.plural, namespaced: ref.namespaced, installed: true };
  });
}

/** A resource definition for a custom kind, e.g. `customResource('example.com/v1/Widget', true)`. */
export function customResource(kind: KindKey, namespaced: boolean, plural?: string, extra: Pick<EmulatedResource, 'statusSubresource'> = {}): EmulatedResource {
  const { group, version, kindName } = parseKindKey(kind);
  return { group, version, kindName, plural: plural ?? pluralOf(kindName), namespaced, installed: true, ...extra };
}

const keyOf = (r: Pick<EmulatedResource, 'group' | 'version' | 'kindName'>): KindKey =>
  r.group === '' ? `${r.version}/${r.kindName}` : `${r.group}/${r.version}/${r.kindName}`;

const clone = <T>(v: T): T => structuredClone(v);

/** Everything but metadata and status: what `metadata.generation` counts changes of. */
function specOf(o: KubeObject): string {
  const { metadata: _m, status: _s, ...rest } = o as KubeObject & { status?: unknown };
  return JSON.stringify(rest);
}

function status(code: number, reason: string, message: string): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

const reasonFor: Record<number, string> = {
  400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 405: 'MethodNotAllowed', 409: 'AlreadyExists',
  410: 'Expired', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable',
};

export class ApiServerEmulator {
  /** Every request received, in order. */
  readonly requests: RecordedRequest[] = [];
  /** What the server sent: watch events and the bytes of every answer and event, for load figures. */
  readonly sent = { watchEvents: 0, bytes: 0 };
  /** Called after every stored change (the fleet simulation times convergence with it). */
  onChange: ((type: 'ADDED' | 'MODIFIED' | 'DELETED', object: KubeObject) => void) | undefined;

  private readonly resources = new Map<KindKey, EmulatedResource>();
  private readonly store = new Map<KindKey, Map<string, KubeObject>>();
  private readonly history: HistoryEntry[] = [];
  private readonly watches = new Set<OpenWatch>();
  private readonly failures: InjectedFailure[] = [];
  private readonly snapshots = new Map<string, ListSnapshot>();
  private readonly opts: Required<Pick<ApiServerEmulatorOptions, 'expiredWatch' | 'managedFields'>> & ApiServerEmulatorOptions;
  private rv = 1;
  private compactedRv = 0;
  private server?: http.Server;
  private portNumber = 0;

  private constructor(opts: ApiServerEmulatorOptions) {
    this.opts = { expiredWatch: 'error-event', managedFields: true, ...opts };
    for (const r of opts.resources ?? defaultEmulatedResources()) {
      const kind = keyOf(r);
      this.resources.set(kind, { ...r, installed: r.installed && !(opts.notInstalled ?? []).includes(kind) });
      this.store.set(kind, new Map());
    }
  }

  /** Starts an emulator on 127.0.0.1 (or only reserves its port when `down: true`). */
  static async start(opts: ApiServerEmulatorOptions = {}): Promise<ApiServerEmulator> {
    const emulator = new ApiServerEmulator(opts);
    emulator.portNumber = opts.port ?? 0;
    await emulator.up();
    if (opts.down) await emulator.down();
    return emulator;
  }

  get port(): number {
    return this.portNumber;
  }

  get url(): string {
    return `${this.opts.tls ? 'https' : 'http'}://127.0.0.1:${this.portNumber}`;
  }

  get isUp(): boolean {
    return this.server !== undefined;
  }

  /** The store's current resourceVersion (what a list returns now). */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Watch streams currently open, optionally only those of one kind. */
  openWatchCount(kind?: KindKey): number {
    return [...this.watches].filter((w) => kind === undefined || w.kind === kind).length;
  }

  /** Starts listening again on the same port (the store and history survive, as etcd would). */
  async up(): Promise<void> {
    if (this.server) return;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    const server = this.opts.tls ? https.createServer({ cert: this.opts.tls.cert, key: this.opts.tls.key }, handler) : http.createServer(handler);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.portNumber, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.portNumber = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Drops every connection and stops listening: clients get connection refused until `up()`. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const w of this.watches) this.endWatch(w, true);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  /** A restart of the API server process on the same port. */
  async restart(): Promise<void> {
    await this.down();
    await this.up();
  }

  /** Shuts down for good; same as `down()`, named for `afterEach`. */
  async stop(): Promise<void> {
    await this.down();
  }

  /** Creates an object; fills uid, resourceVersion, creationTimestamp (and managedFields). */
  create(object: KubeObject): KubeObject {
    const kind = this.kindOf(object);
    const key = this.objectKey(kind, object);
    if (this.store.get(kind)!.has(key)) throw new Error(`emulator: ${kind} ${key} already exists; use update()`);
    const stored = clone(object);
    stored.metadata.uid ??= randomUUID();
    stored.metadata.creationTimestamp ??= new Date().toISOString();
    if (this.resources.get(kind)!.statusSubresource) stored.metadata.generation = 1;
    if (this.opts.managedFields) {
      stored.metadata.managedFields = [{ manager: 'kubectl', operation: 'Update', apiVersion: object.apiVersion, fieldsType: 'FieldsV1', fieldsV1: {} }];
    }
    return this.record('ADDED', kind, key, stored);
  }

  /** Replaces an existing object (same kind, namespace and name). */
  update(object: KubeObject): KubeObject {
    const kind = this.kindOf(object);
    const key = this.objectKey(kind, object);
    const old = this.store.get(kind)!.get(key);
    if (!old) throw new Error(`emulator: ${kind} ${key} does not exist; use create()`);
    const stored = clone(object);
    stored.metadata.uid = old.metadata.uid;
    stored.metadata.creationTimestamp = old.metadata.creationTimestamp;
    if (this.opts.managedFields) stored.metadata.managedFields = old.metadata.managedFields;
    if (this.resources.get(kind)!.statusSubresource) {
      // As kube-apiserver does for a CRD with the status subresource: the status is not the writer's to change here.
      if (old.status === undefined) delete stored.status;
      else stored.status = clone(old.status);
      const generation = Number(old.metadata.generation ?? 1);
      stored.metadata.generation = specOf(stored) === specOf(old) ? generation : generation + 1;
    }
    return this.record('MODIFIED', kind, key, stored);
  }

  /** Replaces only the status of an object of a kind with the status subresource (what `PUT …/status` does). */
  updateStatus(object: KubeObject): KubeObject {
    const kind = this.kindOf(object);
    const key = this.objectKey(kind, object);
    const old = this.store.get(kind)!.get(key);
    if (!old) throw new Error(`emulator: ${kind} ${key} does not exist`);
    const stored = clone(old);
    if (object.status === undefined) delete stored.status;
    else stored.status = clone(object.status);
    return this.record('MODIFIED', kind, key, stored);
  }

  /** Creates or updates. */
  apply(object: KubeObject): KubeObject {
    const kind = this.kindOf(object);
    return this.store.get(kind)!.has(this.objectKey(kind, object)) ? this.update(object) : this.create(object);
  }

  /** Deletes an object; returns false when there was none. */
  remove(kind: KindKey, name: string, namespace?: string): boolean {
    const objects = this.store.get(kind);
    const key = namespace ? `${namespace}/${name}` : name;
    const old = objects?.get(key);
    if (!objects || !old) return false;
    const gone = clone(old);
    this.record('DELETED', kind, key, gone);
    return true;
  }

  get(kind: KindKey, name: string, namespace?: string): KubeObject | undefined {
    const o = this.store.get(kind)?.get(namespace ? `${namespace}/${name}` : name);
    return o && clone(o);
  }

  list(kind: KindKey): KubeObject[] {
    return [...(this.store.get(kind)?.values() ?? [])].map(clone);
  }

  /** Installs a CRD that was registered as not installed (or registers and installs a new custom resource). */
  installCrd(kindOrResource: KindKey | EmulatedResource): void {
    const res = typeof kindOrResource === 'string' ? this.resources.get(kindOrResource) : { ...kindOrResource };
    if (!res) throw new Error(`emulator: ${kindOrResource as string} is not a registered resource; pass an EmulatedResource`);
    res.installed = true;
    const kind = keyOf(res);
    this.resources.set(kind, res);
    if (!this.store.has(kind)) this.store.set(kind, new Map());
  }

  /** Removes a CRD: its objects go (with DELETED events, as the garbage collector would) and its watches end. */
  uninstallCrd(kind: KindKey): void {
    const res = this.mustResource(kind);
    for (const o of this.list(kind)) this.remove(kind, o.metadata.name, o.metadata.namespace);
    res.installed = false;
    for (const w of this.watches) if (w.kind === kind) this.endWatch(w, false);
  }

  /** Forgets all history up to now: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history.length = 0;
    this.snapshots.clear();
  }

  /** Ends every open watch stream; `abrupt` resets the sockets instead of finishing the response. */
  closeWatches(opts: { abrupt?: boolean } = {}): number {
    const n = this.watches.size;
    for (const w of this.watches) this.endWatch(w, opts.abrupt ?? false);
    return n;
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that asked for bookmarks. */
  bookmark(): void {
    for (const w of this.watches) {
      if (!w.bookmarks) continue;
      const res = this.resources.get(w.kind)!;
      const apiVersion = res.group === '' ? res.version : `${res.group}/${res.version}`;
      this.send(w, 'BOOKMARK', { apiVersion, kind: res.kindName, metadata: { resourceVersion: String(this.rv) } });
    }
  }

  /** Makes matching requests fail with `status` until `times` of them have. */
  failRequests(failure: InjectedFailure): void {
    this.failures.push({ ...failure });
  }

  clearFailures(): void {
    this.failures.length = 0;
  }

  /** Requests to one kind's collection, e.g. to count lists and watches. */
  requestsFor(kind: KindKey, opts: { watch?: boolean } = {}): RecordedRequest[] {
    const res = this.mustResource(kind);
    return this.requests.filter((r) => r.path.endsWith(`/${res.plural}`) && this.pathMatchesGroup(r.path, res) && (opts.watch === undefined || r.watch === opts.watch));
  }

  // --- internals -------------------------------------------------------------

  private pathMatchesGroup(path: string, res: EmulatedResource): boolean {
    return res.group === '' ? path.startsWith(`/api/${res.version}/`) : path.startsWith(`/apis/${res.group}/${res.version}/`);
  }

  private mustResource(kind: KindKey): EmulatedResource {
    const res = this.resources.get(kind);
    if (!res) throw new Error(`emulator: ${kind} is not a registered resource`);
    return res;
  }

  private kindOf(object: KubeObject): KindKey {
    const kind = `${object.apiVersion}/${object.kind}`;
    const res = this.mustResource(kind);
    if (!res.installed) throw new Error(`emulator: the CRD for ${kind} is not installed; call installCrd() first`);
    if (!object.metadata?.name) throw new Error(`emulator: ${kind} object without metadata.name`);
    if (res.namespaced && !object.metadata.namespace) throw new Error(`emulator: namespaced ${kind} ${object.metadata.name} without metadata.namespace`);
    return kind;
  }

  private objectKey(kind: KindKey, object: KubeObject): string {
    return this.resources.get(kind)!.namespaced ? `${object.metadata.namespace}/${object.metadata.name}` : object.metadata.name;
  }

  private record(type: HistoryEntry['type'], kind: KindKey, key: string, object: KubeObject): KubeObject {
    this.rv += 1;
    object.metadata.resourceVersion = String(this.rv);
    const objects = this.store.get(kind)!;
    const previous = objects.get(key);
    if (type === 'DELETED') objects.delete(key);
    else objects.set(key, object);
    const entry: HistoryEntry = { rv: this.rv, type, kind, object: clone(object), ...(previous ? { previous: clone(previous) } : {}) };
    this.history.push(entry);
    for (const w of this.watches) this.deliver(w, entry);
    this.onChange?.(type, object);
    return clone(object);
  }

  private watchSees(w: OpenWatch, kind: KindKey, object: KubeObject): boolean {
    return w.kind === kind && (w.namespace === undefined || object.metadata.namespace === w.namespace) && w.matches(object);
  }

  /**
   * Sends a change as the watch sees it through its selectors: an object that
   * starts matching arrives as ADDED, one that stops matching as DELETED.
   */
  private deliver(w: OpenWatch, e: HistoryEntry): void {
    const before = e.previous !== undefined && this.watchSees(w, e.kind, e.previous);
    const after = e.type !== 'DELETED' && this.watchSees(w, e.kind, e.object);
    if (before && after) this.send(w, 'MODIFIED', e.object);
    else if (after) this.send(w, 'ADDED', e.object);
    else if (before) this.send(w, 'DELETED', e.object);
  }

  private send(w: OpenWatch, type: WatchEventType, object: unknown): void {
    if (w.res.writableEnded) return;
    const line = `${JSON.stringify({ type, object })}\n`;
    this.sent.watchEvents += 1;
    this.sent.bytes += Buffer.byteLength(line);
    w.res.write(line);
  }

  private endWatch(w: OpenWatch, abrupt: boolean): void {
    this.watches.delete(w);
    if (w.timer) clearTimeout(w.timer);
    if (abrupt) w.res.socket?.destroy();
    else if (!w.res.writableEnded) w.res.end();
  }

  private reply(res: http.ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    this.sent.bytes += Buffer.byteLength(text);
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private fail(res: http.ServerResponse, code: number, message: string): void {
    this.reply(res, code, status(code, reasonFor[code] ?? 'Unknown', message));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const query = Object.fromEntries(url.searchParams.entries());
    const watch = query.watch === 'true' || query.watch === '1';
    const recorded: RecordedRequest = { method: req.method ?? 'GET', path: url.pathname, query, watch };
    this.requests.push(recorded);

    if (this.opts.token !== undefined && req.headers.authorization !== `Bearer ${this.opts.token}`) {
      return this.fail(res, 401, 'Unauthorized');
    }
    const failure = this.failures.find((f) => f.times > 0 && (!f.match || f.match(recorded)));
    if (failure) {
      failure.times -= 1;
      return this.fail(res, failure.status, `injected failure for ${recorded.path}`);
    }
    const segments = url.pathname.split('/').filter(Boolean);
    if (recorded.method !== 'GET') return void this.handleWrite(req, res, recorded.method, segments);

    if (url.pathname === '/healthz' || url.pathname === '/readyz' || url.pathname === '/livez') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      return void res.end('ok');
    }
    if (url.pathname === '/version') return this.reply(res, 200, { major: '1', minor: '33', gitVersion: 'v1.33.0-kwp-emulator' });
    if (segments[0] === 'api') {
      if (segments.length === 1) return this.reply(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
      return this.serveGroupVersion(res, '', segments[1], segments.slice(2), query, watch);
    }
    if (segments[0] === 'apis') {
      if (segments.length === 1) return this.reply(res, 200, this.groupList());
      if (segments.length === 2) {
        const group = this.groupList().groups.find((g) => g.name === segments[1]);
        return group ? this.reply(res, 200, { kind: 'APIGroup', apiVersion: 'v1', ...group }) : this.fail(res, 404, `group ${segments[1]} not found`);
      }
      return this.serveGroupVersion(res, segments[1], segments[2], segments.slice(3), query, watch);
    }
    return this.fail(res, 404, `the server could not find the requested resource (${url.pathname})`);
  }

  /**
   * Writes, as a client such as kubectl or client-node sends them: POST to a
   * collection creates (409 AlreadyExists), PUT to an object replaces it (404
   * when missing, 409 Conflict when the body's resourceVersion is stale), PUT
   * to `…/status` replaces the status of a kind with the status subresource,
   * DELETE removes. Bodies are JSON.
   */
  private async handleWrite(req: http.IncomingMessage, res: http.ServerResponse, method: string, segments: string[]): Promise<void> {
    const chunks: Buffer[] = [];
    try {
      for await (const c of req) chunks.push(c as Buffer);
    } catch {
      return;
    }
    const target = this.writeTarget(segments);
    if (typeof target === 'string') return this.fail(res, 404, target);
    const { resource, namespace, name, subresource } = target;
    const kind = keyOf(resource);
    const key = namespace ? `${namespace}/${name}` : name;
    if (method === 'DELETE') {
      if (name === undefined || subresource) return this.fail(res, 405, 'DELETE needs an object path');
      const old = this.store.get(kind)!.get(key!);
      if (!old) return this.fail(res, 404, `${resource.plural} "${name}" not found`);
      this.remove(kind, name, namespace);
      return this.reply(res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: resource.plural } });
    }
    if (method !== 'POST' && method !== 'PUT') return this.fail(res, 405, `the emulator serves GET, POST, PUT and DELETE, not ${method}`);
    let body: KubeObject;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      return this.fail(res, 400, `the request body is not JSON: ${(err as Error).message}`);
    }
    const apiVersion = resource.group === '' ? resource.version : `${resource.group}/${resource.version}`;
    if (body?.apiVersion !== apiVersion || body?.kind !== resource.kindName || typeof body?.metadata?.name !== 'string') {
      return this.fail(res, 400, `the body must be a ${apiVersion} ${resource.kindName} with metadata.name`);
    }
    if (resource.namespaced) body.metadata.namespace = namespace;
    if (method === 'POST') {
      if (name !== undefined) return this.fail(res, 405, 'POST goes to the collection, not to an object');
      if (body.metadata.resourceVersion) return this.fail(res, 400, 'resourceVersion should not be set on objects to be created');
      const bodyKey = resource.namespaced ? `${namespace}/${body.metadata.name}` : body.metadata.name;
      if (this.store.get(kind)!.has(bodyKey)) return this.fail(res, 409, `${resource.plural} "${body.metadata.name}" already exists`);
      if (resource.statusSubresource) delete (body as { status?: unknown }).status;
      return this.reply(res, 201, this.create(body));
    }
    if (name === undefined) return this.fail(res, 405, 'PUT goes to an object, not to the collection');
    if (body.metadata.name !== name) return this.fail(res, 400, `metadata.name "${body.metadata.name}" does not match the path's "${name}"`);
    const old = this.store.get(kind)!.get(key!);
    if (!old) return this.fail(res, 404, `${resource.plural} "${name}" not found`);
    if (body.metadata.resourceVersion && body.metadata.resourceVersion !== old.metadata.resourceVersion) {
      return this.reply(res, 409, { ...status(409, 'Conflict', `Operation cannot be fulfilled on ${resource.plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`) });
    }
    if (subresource === 'status') {
      if (!resource.statusSubresource) return this.fail(res, 404, `${resource.plural} has no status subresource`);
      return this.reply(res, 200, this.updateStatus(body));
    }
    return this.reply(res, 200, this.update(body));
  }

  /** The resource, namespace, name and subresource a write path names, or why it names none. */
  private writeTarget(segments: string[]): { resource: EmulatedResource; namespace?: string; name?: string; subresource?: string } | string {
    let group: string;
    let version: string;
    let rest: string[];
    if (segments[0] === 'api') [group, version, rest] = ['', segments[1], segments.slice(2)];
    else if (segments[0] === 'apis') [group, version, rest] = [segments[1], segments[2], segments.slice(3)];
    else return `the server could not find the requested resource (/${segments.join('/')})`;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, subresource, ...more] = rest;
    const resource = this.installedResources().find((r) => r.group === group && r.version === version && r.plural === plural);
    if (!resource || more.length) return `the server could not find the requested resource (/${segments.join('/')})`;
    if (resource.namespaced !== (namespace !== undefined)) return `${plural} is ${resource.namespaced ? 'namespaced' : 'cluster-scoped'}`;
    return { resource, namespace, name, subresource };
  }

  private installedResources(): EmulatedResource[] {
    return [...this.resources.values()].filter((r) => r.installed);
  }

  private groupList() {
    const versions = new Map<string, string[]>();
    for (const r of this.installedResources()) {
      if (r.group === '') continue;
      const vs = versions.get(r.group) ?? [];
      if (!vs.includes(r.version)) vs.push(r.version);
      versions.set(r.group, vs);
    }
    const groups = [...versions.entries()].map(([name, vs]) => {
      const list = vs.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
      return { name, versions: list, preferredVersion: list[0] };
    });
    return { kind: 'APIGroupList', apiVersion: 'v1', groups };
  }

  private serveGroupVersion(res: http.ServerResponse, group: string, version: string, rest: string[], query: Record<string, string>, watch: boolean): void {
    const groupVersion = group === '' ? version : `${group}/${version}`;
    const served = this.installedResources().filter((r) => r.group === group && r.version === version);
    if (served.length === 0) return this.fail(res, 404, `the server could not find the requested resource (${groupVersion})`);
    if (rest.length === 0) {
      return this.reply(res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion,
        resources: served.map((r) => ({ name: r.plural, singularName: r.kindName.toLowerCase(), namespaced: r.namespaced, kind: r.kindName, verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] })),
      });
    }
    // [plural] | [plural, name] | [namespaces, ns, plural] | [namespaces, ns, plural, name]
    let namespace: string | undefined;
    let plural: string;
    let name: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      [, namespace, plural, name] = rest;
    } else {
      [plural, name] = rest;
    }
    const resource = served.find((r) => r.plural === plural);
    if (!resource || rest.length > 4) return this.fail(res, 404, `the server could not find the requested resource (${groupVersion}/${rest.join('/')})`);
    if (namespace !== undefined && !resource.namespaced) return this.fail(res, 404, `${plural} is cluster-scoped`);
    const kind = keyOf(resource);
    if (name !== undefined) {
      const o = this.store.get(kind)!.get(namespace ? `${namespace}/${name}` : name);
      return o ? this.reply(res, 200, o) : this.fail(res, 404, `${plural} "${name}" not found`);
    }
    let matches: ObjectPredicate;
    try {
      const byLabel = parseLabelSelector(query.labelSelector);
      const byField = parseFieldSelector(query.fieldSelector);
      matches = (o) => byLabel(o) && byField(o);
    } catch (err) {
      return this.fail(res, 400, (err as Error).message);
    }
    if (watch) return this.serveWatch(res, kind, namespace, matches, query);
    if (query.continue) return this.serveNextPage(res, query.continue, Number(query.limit));
    const items = [...this.store.get(kind)!.values()]
      .filter((o) => (namespace === undefined || o.metadata.namespace === namespace) && matches(o))
      .map((o) => {
        // Lists of built-in kinds come without apiVersion/kind on each item; the emulator does so for every kind.
        const { apiVersion: _a, kind: _k, ...rest } = clone(o);
        return rest;
      });
    const snapshot: ListSnapshot = { rv: this.rv, items, offset: 0, apiVersion: groupVersion, kind: `${resource.kindName}List` };
    this.replyPage(res, snapshot, Number(query.limit));
  }

  private serveNextPage(res: http.ServerResponse, token: string, limit: number): void {
    const snapshot = this.snapshots.get(token);
    if (!snapshot) return this.fail(res, 410, 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
    this.snapshots.delete(token);
    this.replyPage(res, snapshot, limit);
  }

  private replyPage(res: http.ServerResponse, snapshot: ListSnapshot, limit: number): void {
    const size = Number.isInteger(limit) && limit > 0 ? limit : Infinity;
    const page = snapshot.items.slice(snapshot.offset, snapshot.offset + size);
    const offset = snapshot.offset + page.length;
    const metadata: Record<string, unknown> = { resourceVersion: String(snapshot.rv) };
    if (offset < snapshot.items.length) {
      const token = randomUUID();
      this.snapshots.set(token, { ...snapshot, offset });
      metadata.continue = token;
      metadata.remainingItemCount = snapshot.items.length - offset;
    }
    this.reply(res, 200, { apiVersion: snapshot.apiVersion, kind: snapshot.kind, metadata, items: page });
  }

  private serveWatch(res: http.ServerResponse, kind: KindKey, namespace: string | undefined, matches: ObjectPredicate, query: Record<string, string>): void {
    const from = query.resourceVersion;
    const fromRv = from === undefined || from === '' || from === '0' ? undefined : Number(from);
    if (fromRv !== undefined && !Number.isFinite(fromRv)) return this.fail(res, 400, `resourceVersion "${from}" is not a number`);
    const expired = fromRv !== undefined && fromRv < this.compactedRv;
    if (expired && this.opts.expiredWatch === 'http-status') {
      return this.fail(res, 410, `too old resource version: ${fromRv} (${this.compactedRv})`);
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    if (expired) {
      res.write(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', `too old resource version: ${fromRv} (${this.compactedRv})`) })}\n`);
      return void res.end();
    }
    const w: OpenWatch = { res, kind, namespace, matches, bookmarks: query.allowWatchBookmarks === 'true' };
    this.watches.add(w);
    res.on('close', () => {
      this.watches.delete(w);
      if (w.timer) clearTimeout(w.timer);
    });
    if (fromRv === undefined) {
      for (const o of this.store.get(kind)!.values()) if (this.watchSees(w, kind, o)) this.send(w, 'ADDED', o);
    } else {
      for (const e of this.history) if (e.rv > fromRv) this.deliver(w, e);
    }
    const timeout = Number(query.timeoutSeconds);
    if (Number.isFinite(timeout) && timeout > 0) w.timer = setTimeout(() => this.endWatch(w, false), timeout * 1000);
  }
}
