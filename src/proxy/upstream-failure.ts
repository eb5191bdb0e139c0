// What a failed upstream exchange means, from its error code (Node's errno or
// undici's): the upstream was too slow (504), could not be reached or cut the
// connection (502), or the gateway closed the pool itself while shutting
// down (503, not the upstream's fault, so not counted as an upstream error).
import { GatewayError } from '../errors/gateway-error.js';

/** `protocol`: the upstream answered, but not as its transport requires (a legacy SSE server's stream or endpoint). */
export type UpstreamErrorKind = 'unreachable' | 'timeout' | 'reset' | 'protocol';

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUT = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const SHUT_DOWN = new Set(['UND_ERR_CLOSED', 'UND_ERR_DESTROYED']);

/** The error's code, when it carries one; an error without one is the gateway's own bug. */
export const errorCode = (err: Error): unknown => (err as { code?: unknown }).code;

export function classifyUpstreamError(code: string): UpstreamErrorKind | 'shutdown' {
  if (SHUT_DOWN.has(code)) return 'shutdown';
  return TIMEOUT.has(code) ? 'timeout' : UNREACHABLE.has(code) ? 'unreachable' : 'reset';
}

/** The client's answer to an exchange that failed before any of the upstream's answer was sent. */
export function upstreamErrorResponse(kind: UpstreamErrorKind | 'shutdown'): GatewayError {
  switch (kind) {
    case 'shutdown':
      return new GatewayError(503, 'temporarily_unavailable', 'Gateway is shutting down');
    case 'timeout':
      return new GatewayError(504, 'gateway_timeout', 'Upstream did not answer in time');
    case 'unreachable':
      return new GatewayError(502, 'bad_gateway', 'Upstream unreachable');
    case 'reset':
      return new GatewayError(502, 'bad_gateway', 'Upstream connection failed');
    case 'protocol':
      return new GatewayError(502, 'bad_gateway', 'Upstream broke its transport protocol');
  }
}
