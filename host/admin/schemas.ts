// JSON schemas shared by the admin routes; they validate requests, shape
// responses, and become the OpenAPI document.
export const errorSchema = {
  $id: 'KwpError',
  type: 'object',
  description: 'Every error: a stable code from docs/errors.md and a message saying what to fix.',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string', pattern: '^KWP_ERR_' },
    message: { type: 'string' },
    requestId: { type: 'string', description: '5xx only: the id the agent logged the error under (also the X-Request-Id header)' },
  },
} as const;

export const errorResponses = {
  '4xx': { $ref: 'KwpError#' },
  '5xx': { $ref: 'KwpError#' },
} as const;

export const moduleInfoSchema = {
  type: 'object',
  required: ['name', 'version', 'sha256', 'size', 'abi', 'kinds', 'failurePolicy', 'uploadedAt', 'usedBy'],
  properties: {
    name: { type: 'string' },
    version: { type: 'string' },
    sha256: { type: 'string' },
    size: { type: 'integer' },
    abi: { type: 'string', description: 'major.minor of the evaluator ABI' },
    kinds: { type: 'array', items: { type: 'string' } },
    failurePolicy: { type: 'string', enum: ['fail-open', 'fail-closed'] },
    description: { type: 'string' },
    uploadedAt: { type: 'string', format: 'date-time' },
    signedBy: { type: 'string', description: 'fingerprint of the trusted key that verified the upload' },
    usedBy: { type: 'array', items: { type: 'string' }, description: 'stages of the active pipeline running these bytes (the rollback pipeline\'s also keep them from removal)' },
  },
} as const;

export const stageSchema = {
  type: 'object',
  required: ['name', 'module'],
  properties: {
    name: { type: 'string' },
    label: { type: 'string' },
    module: { type: 'string', description: 'a module name (newest stored version or built-in) or name@version' },
    config: { type: 'object', additionalProperties: true },
    mode: { type: 'string', enum: ['enforce', 'audit'] },
    failurePolicy: { type: 'string', enum: ['fail-open', 'fail-closed'] },
  },
} as const;

export const pipelineViewSchema = {
  type: 'object',
  required: ['revision', 'stages'],
  properties: {
    revision: { type: 'integer' },
    previousRevision: { type: 'integer', description: 'the revision a rollback returns to, when there is one' },
    stages: { type: 'array', items: stageSchema },
    modules: {
      type: 'array',
      description: 'the bytes each stage runs: its module reference resolved to name, version and sha256',
      items: {
        type: 'object', required: ['stage', 'name', 'version', 'sha256'],
        properties: { stage: { type: 'string' }, name: { type: 'string' }, version: { type: 'string' }, sha256: { type: 'string' } },
      },
    },
  },
} as const;

export const historyEntrySchema = {
  type: 'object',
  required: ['revision', 'time', 'action'],
  properties: {
    revision: { type: 'integer' },
    time: { type: 'string', format: 'date-time' },
    action: { type: 'string', enum: ['startup', 'set', 'rollback', 'auto-rollback'] },
    from: { type: 'integer' },
    reason: { type: 'string' },
  },
} as const;

export const traceSchema = {
  type: 'object',
  required: ['stage', 'label', 'verdict', 'mode'],
  properties: {
    stage: { type: 'string' },
    label: { type: 'string' },
    verdict: { type: 'string', enum: ['Next', 'Accept', 'Deny', 'Pass'] },
    mode: { type: 'string', enum: ['enforce', 'audit'] },
    reason: { type: 'string' },
    failure: { type: 'string', enum: ['trap', 'fuel', 'deadline', 'unavailable'] },
  },
} as const;

export const ifMatchHeader = {
  type: 'object',
  properties: {
    'if-match': { type: 'string', description: 'the revision last read (the ETag of GET /v1/pipeline); a stale one gets 412' },
  },
} as const;
