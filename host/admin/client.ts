// The admin API from the other side: what the kwp CLI (and scripts) use.
// Error answers come back as the same KwpError the server threw.
import { ErrorCatalogue, KwpError, type ErrorCode } from '../errors.js';
import type { ModuleInfo, UploadResult } from '../control/module-store.js';
import type { HistoryEntry } from '../control/pipeline-history.js';
import type { PipelineSpec, StageSpec } from '../pipeline/spec.js';
import type { StageTrace } from '../contract.js';
import type { FleetStatus } from '../fleet/fleet-status.js';
import { SIGNATURE_HEADER } from './options.js';
import type { DiffAnswer, DiffRequest } from '../impact/live-diff.js';

export const DEFAULT_SERVER = 'http://127.0.0.1:9443';

export interface PipelineAnswer {
  revision: number;
  previousRevision?: number;
  stages: StageSpec[];
}

export interface ExplainAnswer {
  revision: number;
  verdict: 'allow' | 'deny';
  walkthrough: string;
  egress: StageTrace[];
  ingress: StageTrace[];
  notes: string[];
  /** For a flow to a Service: the decision for each endpoint explained. */
  endpoints?: Array<{ service: string; endpoint: string; address: string; port: number; verdict: 'allow' | 'deny'; walkthrough: string }>;
}

export interface FlowRequest {
  src: string;
  dst: string;
  port: number;
  protocol?: string;
  srcPort?: number;
  /** The flow reached the destination pod through a Service. */
  viaService?: boolean;
}

export class AdminClient {
  private readonly base: string;

  constructor(server: string, private readonly token?: string) {
    this.base = server.replace(/\/+$/, '');
  }

  private async call<T>(method: string, path: string, init: { body?: BodyInit; headers?: Record<string, string> } = {}): Promise<{ body: T; headers: Headers }> {
    const url = `${this.base}${path}`;
    const headers: Record<string, string> = { ...init.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body: init.body });
    } catch (err) {
      const cause = (err as { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new KwpError('KWP_ERR_ADMIN_UNREACHABLE', `${method} ${url}: cannot reach the admin API (${cause}); is the agent running, and is --server right?`);
    }
    const text = await res.text();
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      throw new KwpError('KWP_ERR_ADMIN_UNREACHABLE', `${method} ${url}: answered ${res.status} with a body that is not JSON; is --server the kwp admin API?`);
    }
    if (!res.ok) {
      if (typeof body?.code === 'string' && body.code in ErrorCatalogue) throw new KwpError(body.code as ErrorCode, String(body.message));
      throw new KwpError('KWP_ERR_ADMIN_UNREACHABLE', `${method} ${url}: answered ${res.status} without a KWP error code`);
    }
    return { body: body as T, headers: res.headers };
  }

  private json(body: unknown): { body: string; headers: Record<string, string> } {
    return { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
  }

  async pushModule(bytes: Uint8Array, request: { name: string; version: string; signature?: string; selfTestConfig?: Record<string, unknown> }): Promise<UploadResult> {
    const q = new URLSearchParams({ name: request.name, version: request.version });
    if (request.selfTestConfig) q.set('config', JSON.stringify(request.selfTestConfig));
    const headers: Record<string, string> = { 'content-type': 'application/wasm' };
    if (request.signature) headers[SIGNATURE_HEADER] = request.signature;
    return (await this.call<UploadResult>('POST', `/v1/modules?${q}`, { body: bytes as unknown as BodyInit, headers })).body;
  }

  async listModules(): Promise<ModuleInfo[]> {
    return (await this.call<{ modules: ModuleInfo[] }>('GET', '/v1/modules')).body.modules;
  }

  async getModule(name: string): Promise<ModuleInfo[]> {
    return (await this.call<{ versions: ModuleInfo[] }>('GET', `/v1/modules/${encodeURIComponent(name)}`)).body.versions;
  }

  async removeModule(name: string, version?: string): Promise<Array<{ name: string; version: string; sha256: string }>> {
    const ref = version === undefined ? name : `${name}@${version}`;
    return (await this.call<{ removed: Array<{ name: string; version: string; sha256: string }> }>('DELETE', `/v1/modules/${encodeURIComponent(ref)}`)).body.removed;
  }

  /** The cluster-level admin API's view of the fleet (kwp agent --fleet); other agents answer 404. */
  async fleetStatus(): Promise<FleetStatus> {
    return (await this.call<FleetStatus>('GET', '/v1/fleet/status')).body;
  }

  async getPipeline(): Promise<PipelineAnswer> {
    return (await this.call<PipelineAnswer>('GET', '/v1/pipeline')).body;
  }

  /** `ifMatch` is the revision the change is based on; undefined applies it to whatever is active. */
  async setPipeline(spec: PipelineSpec, ifMatch?: number): Promise<PipelineAnswer> {
    const { body, headers } = this.json(spec);
    if (ifMatch !== undefined) headers['if-match'] = `"${ifMatch}"`;
    return (await this.call<PipelineAnswer>('PUT', '/v1/pipeline', { body, headers })).body;
  }

  async rollback(ifMatch?: number): Promise<PipelineAnswer> {
    const headers: Record<string, string> = {};
    if (ifMatch !== undefined) headers['if-match'] = `"${ifMatch}"`;
    return (await this.call<PipelineAnswer>('POST', '/v1/pipeline/rollback', { headers })).body;
  }

  async history(): Promise<HistoryEntry[]> {
    return (await this.call<{ history: HistoryEntry[] }>('GET', '/v1/pipeline/history')).body.history;
  }

  /** POST /v1/diff: what a proposal would flip among the node's recorded flows; applies nothing. */
  async diff(request: DiffRequest): Promise<DiffAnswer> {
    return (await this.call<DiffAnswer>('POST', '/v1/diff', this.json(request))).body;
  }

  async explain(flow: FlowRequest): Promise<ExplainAnswer> {
    return (await this.call<ExplainAnswer>('POST', '/v1/explain', this.json(flow))).body;
  }
}
