// Every failure leaves the admin API as `{"code": "KWP_ERR_...", "message"}`
// with the catalogue's status: KwpErrors as they are, Fastify's own errors
// (schema validation, body size, content type, bad JSON) mapped to the codes
// docs/errors.md lists, anything else as KWP_ERR_INTERNAL with the details in
// the log only.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { KwpError, type ErrorCode } from '../errors.js';

/** Routes can say which code a too-large body gets (module uploads: KWP_ERR_MODULE_TOO_LARGE). */
export interface RouteErrorConfig {
  bodyTooLargeCode?: ErrorCode;
}

export function toKwpError(err: FastifyError, request: FastifyRequest): KwpError {
  if (err instanceof KwpError) return err;
  const what = `${request.method} ${request.url}`;
  if (err.validation) {
    return new KwpError('KWP_ERR_REQUEST_INVALID', `${what}: ${err.validationContext ?? 'request'} ${err.message.replace(/^(body|querystring|params|headers)\s*/, '')}`);
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': {
      const code = (request.routeOptions.config as RouteErrorConfig | undefined)?.bodyTooLargeCode ?? 'KWP_ERR_BODY_TOO_LARGE';
      return new KwpError(code, `${what}: the body is larger than the ${request.routeOptions.bodyLimit ?? ''} bytes this route accepts`);
    }
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new KwpError('KWP_ERR_MEDIA_TYPE', `${what}: content type ${JSON.stringify(request.headers['content-type'] ?? '')} is not accepted here; send modules as application/wasm and everything else as application/json`);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new KwpError('KWP_ERR_REQUEST_INVALID', `${what}: ${err.message}`);
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) {
    return new KwpError('KWP_ERR_REQUEST_INVALID', `${what}: the body is not valid JSON: ${err.message}`);
  }
  if (err.statusCode === 415) return new KwpError('KWP_ERR_MEDIA_TYPE', `${what}: ${err.message}`);
  if (err.statusCode === 413) return new KwpError('KWP_ERR_BODY_TOO_LARGE', `${what}: ${err.message}`);
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return new KwpError('KWP_ERR_REQUEST_INVALID', `${what}: ${err.message}`);
  }
  return new KwpError('KWP_ERR_INTERNAL', `${what}: an unexpected error; the agent's log has the details under request id ${request.id}`, { cause: err });
}

export const REQUEST_ID_HEADER = 'x-request-id';

/**
 * Every 5xx is logged at error level with the request id, and the answer
 * carries that id (header and body), so "the agent's log has the details"
 * leads to the line that has them.
 */
export function kwpErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const kerr = toKwpError(err, request);
  if (kerr.status >= 500) {
    request.log.error({ err, code: kerr.code, requestId: request.id }, `${kerr.message} (request id ${request.id})`);
    reply.header(REQUEST_ID_HEADER, request.id);
    reply.status(kerr.status).type('application/json; charset=utf-8').send({ ...kerr.toJSON(), requestId: request.id });
    return;
  }
  request.log.info({ code: kerr.code }, kerr.message);
  reply.status(kerr.status).type('application/json; charset=utf-8').send(kerr.toJSON());
}
