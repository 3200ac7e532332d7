// Every error a user can see has a stable code from this catalogue. The admin
// API returns `{code, message}` with the catalogue's HTTP status, the CLI
// prints `code: message`, and docs/errors.md lists the same codes (a test keeps
// the two in step). Messages say what is wrong and what to do about it.

export const ErrorCatalogue = {
  // Loading a module
  KWP_ERR_MODULE_TOO_LARGE: { status: 413, summary: 'The module is larger than the configured size cap.' },
  KWP_ERR_MODULE_INVALID: { status: 400, summary: 'The bytes are not a valid WebAssembly module.' },
  KWP_ERR_ABI_VERSION: { status: 422, summary: 'The module exports no kwp_abi_version, or a major version this host does not implement.' },
  KWP_ERR_METADATA: { status: 422, summary: 'The kwp.meta custom section is missing or malformed.' },
  KWP_ERR_IMPORT_NOT_ALLOWED: { status: 422, summary: 'The module imports something outside the ABI allowlist.' },
  KWP_ERR_IMPORT_SIGNATURE: { status: 422, summary: 'An allow-listed function import does not have exactly the type the ABI defines.' },
  KWP_ERR_EXPORT_MISSING: { status: 422, summary: 'The module lacks an export the ABI requires.' },
  KWP_ERR_EXPORT_SIGNATURE: { status: 422, summary: 'A function export the host calls does not have exactly the type the ABI defines.' },
  KWP_ERR_MEMORY_UNBOUNDED: { status: 422, summary: 'The module defines a memory without a maximum.' },
  KWP_ERR_MEMORY_TOO_LARGE: { status: 422, summary: 'The module declares more memory than the host allows.' },
  KWP_ERR_TABLE_TOO_LARGE: { status: 422, summary: 'The module defines more tables, or larger tables, than the host allows, or a table without a maximum.' },
  KWP_ERR_MODULE_TOO_COMPLEX: { status: 422, summary: 'The module has more functions, globals, data or element segments than the host allows.' },
  KWP_ERR_VALIDATION_LIMIT: { status: 422, summary: 'Validating the upload needed more heap than the validation process may use.' },
  KWP_ERR_INSTRUMENTATION: { status: 422, summary: 'Fuel instrumentation could not rewrite the module.' },
  KWP_ERR_INSTANTIATE: { status: 422, summary: 'The module failed to instantiate.' },
  KWP_ERR_CONFIG_REJECTED: { status: 422, summary: "The module refused the stage's configuration." },
  KWP_ERR_SELF_TEST: { status: 422, summary: 'The module trapped or ran out of time in its self-test.' },
  KWP_ERR_TRAP: { status: 500, summary: 'The module trapped during a call.' },
  KWP_ERR_FUEL_EXHAUSTED: { status: 500, summary: 'The module ran out of fuel during a call.' },
  KWP_ERR_DEADLINE_EXCEEDED: { status: 500, summary: 'A call into the module did not return within its wall-clock deadline; the thread running it was stopped.' },
  KWP_ERR_STATE_TOO_LARGE: { status: 507, summary: "A stage's module cannot hold the cluster state within its memory cap, even at the per-stage ceiling." },
  // Pipelines
  KWP_ERR_PIPELINE_INVALID: { status: 400, summary: 'The pipeline file or body does not have the expected shape.' },
  KWP_ERR_PIPELINE_TOO_LARGE: { status: 422, summary: 'The pipeline has more stages than the host allows.' },
  KWP_ERR_MEMORY_BUDGET: { status: 422, summary: 'A stage would take the memory all kept pipelines reserve past the memory budget.' },
  KWP_ERR_MODULE_NOT_FOUND: { status: 404, summary: 'A stage names a module that is neither built in nor in the module store.' },
  // Admin API and control plane
  KWP_ERR_NAME_MISMATCH: { status: 422, summary: "The name or version in the upload request differs from the module's kwp.meta." },
  KWP_ERR_MODULE_CONFLICT: { status: 409, summary: 'Different bytes are already stored under this module name and version.' },
  KWP_ERR_MODULE_IN_USE: { status: 409, summary: 'The module is used by the active pipeline, the one kept for rollback, or one being built, and cannot be removed.' },
  KWP_ERR_MODULE_NAME_RESERVED: { status: 409, summary: 'The upload is named like a built-in module.' },
  KWP_ERR_SIGNATURE_REQUIRED: { status: 401, summary: 'Trusted signing keys are configured and the upload carries no signature.' },
  KWP_ERR_SIGNATURE_INVALID: { status: 422, summary: 'The upload signature does not verify against any trusted key for this module, name and version.' },
  KWP_ERR_PRECONDITION_FAILED: { status: 412, summary: 'If-Match names a pipeline revision that is no longer the active one.' },
  KWP_ERR_NO_PREVIOUS_PIPELINE: { status: 409, summary: 'There is no previous pipeline to roll back to.' },
  KWP_ERR_STOPPING: { status: 503, summary: 'The agent is stopping: a pipeline change that had not been activated yet was abandoned.' },
  KWP_ERR_STATE_CORRUPT: { status: 500, summary: 'A state file under the state directory could not be read or parsed.' },
  KWP_ERR_UNAUTHORIZED: { status: 401, summary: 'The request carries no bearer token, or the server has no admin token configured.' },
  KWP_ERR_FORBIDDEN: { status: 403, summary: 'The bearer token is not the admin token.' },
  KWP_ERR_RATE_LIMITED: { status: 429, summary: 'Too many uploads from one client in a short time, or too many waiting for validation.' },
  KWP_ERR_REQUEST_INVALID: { status: 400, summary: 'The request does not match the route schema (query, headers, parameters or body).' },
  KWP_ERR_BODY_TOO_LARGE: { status: 413, summary: 'The request body is larger than the route allows.' },
  KWP_ERR_MEDIA_TYPE: { status: 415, summary: 'The request body has a content type the route does not accept.' },
  KWP_ERR_ROUTE_NOT_FOUND: { status: 404, summary: 'No admin API route matches the method and path.' },
  KWP_ERR_NOT_READY: { status: 503, summary: 'The agent has not finished the first sync of every source.' },
  KWP_ERR_SOURCE_REFUSED: { status: 503, summary: 'A source refuses its current input (a manifest file that does not validate) and keeps delivering the last good state.' },
  KWP_ERR_STAGE_STATE_STALE: { status: 503, summary: "A stage answers with another state than the cluster's: it is growing its memory cap, rebuilding its module, or cannot hold the current state." },
  KWP_ERR_ADMIN_UNREACHABLE: { status: 502, summary: 'The CLI could not reach the admin API or got an answer it does not understand.' },
  KWP_ERR_INTERNAL: { status: 500, summary: 'An unexpected error inside the agent.' },
  // Inputs
  KWP_ERR_MANIFEST: { status: 400, summary: 'A manifest file could not be read or parsed, or an object in it is not valid for its API.' },
  KWP_ERR_FLOWS: { status: 400, summary: 'The flows file could not be read or parsed.' },
  KWP_ERR_FLOW_FILTER: { status: 400, summary: 'A flow filter (GET /v1/flows query or kwp flows flag) is unknown or has a value it cannot use.' },
  KWP_ERR_FLOW_LOG: { status: 500, summary: 'The flow log file (--flow-log) cannot be written.' },
  KWP_ERR_FLOWS_OFF: { status: 404, summary: 'The agent does not record flows, so it has none to list.' },
  KWP_ERR_USAGE: { status: 400, summary: 'A command-line flag or argument is missing or wrong.' },
  KWP_ERR_KUBECONFIG: { status: 400, summary: 'The kubeconfig could not be loaded, or the in-cluster configuration is missing.' },
  KWP_ERR_STATE_DIR: { status: 500, summary: 'The state directory cannot be created or written.' },
  // Fleet (docs/fleet.md)
  KWP_ERR_FLEET_OBJECT_INVALID: { status: 400, summary: 'An EvaluatorModule or Pipeline object (or a rollout/target in a pipeline file) does not have the expected shape.' },
  KWP_ERR_FLEET_FETCH: { status: 502, summary: "A node could not fetch a module's bytes from the OCI registry, ConfigMap or Secret its EvaluatorModule names." },
  KWP_ERR_FLEET_DIGEST_MISMATCH: { status: 422, summary: "The fetched bytes do not hash to the EvaluatorModule's sha256 (or the registry's digest)." },
  KWP_ERR_FLEET_READ: { status: 502, summary: "The fleet's Pipeline or NodePipelineStatus objects could not be listed from the API server." },
  KWP_ERR_FLEET_PUBLISH: { status: 502, summary: 'The cluster-level admin API could not push the module to the registry or write the object to the API server.' },
  // Dataplane
  KWP_ERR_NFQUEUE_UNAVAILABLE: { status: 500, summary: 'The optional nfqueue native binding is not installed or did not load.' },
  KWP_ERR_DATAPLANE: { status: 500, summary: 'The kernel refused the rules or queues the dataplane needs.' },
} as const;

export type ErrorCode = keyof typeof ErrorCatalogue;

export class KwpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KwpError';
    this.code = code;
    this.status = ErrorCatalogue[code].status;
  }
  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

export function isKwpError(err: unknown): err is KwpError {
  return err instanceof KwpError;
}
