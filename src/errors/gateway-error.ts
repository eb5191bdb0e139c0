// Typed errors with stable codes (in the manner of jose's errors). Every
// rejection the gateway makes is one of these (`translate.ts` makes anything
// else one); `respond.ts` turns it into HTTP.

export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'invalid_client'
  | 'invalid_grant'
  | 'invalid_scope'
  | 'invalid_target'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'access_denied'
  | 'temporarily_unavailable'
  | 'server_error'
  // RFC 9449 §7.1 (resource) and §5 (token endpoint).
  | 'invalid_dpop_proof'
  | 'use_dpop_nonce';

export type GatewayErrorCode =
  | OAuthErrorCode
  | 'unauthorized'
  | 'not_found'
  | 'method_not_allowed'
  | 'forbidden_origin'
  | 'payload_too_large'
  | 'bad_gateway'
  | 'gateway_timeout'
  | 'request_header_fields_too_large'
  | 'http_version_not_supported'
  | 'unsupported_media_type'
  | 'too_many_requests';

export interface GatewayErrorOptions {
  /** Send the `WWW-Authenticate: Bearer` challenge (401/403 from a protected route). */
  challenge?: boolean;
  /** Challenge without `error` (RFC 6750 §3.1: the request had no token). */
  bareChallenge?: boolean;
  /** `scope` parameter of the challenge: what would allow this request. */
  scope?: readonly string[];
  /** The refusal concerns a `DPoP`-scheme request: its challenge is `DPoP`, not `Bearer` (RFC 9449 §7.1). */
  dpop?: boolean;
  /** Detail for logs only; never sent to the client. */
  cause?: unknown;
  headers?: Record<string, string>;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: GatewayErrorCode;
  readonly description: string;
  readonly challenge: boolean;
  readonly bareChallenge: boolean;
  readonly scope: readonly string[] | undefined;
  readonly dpop: boolean;
  readonly headers: Record<string, string> | undefined;

  constructor(status: number, code: GatewayErrorCode, description: string, options: GatewayErrorOptions = {}) {
    super(description, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.status = status;
    this.code = code;
    this.description = description;
    this.challenge = options.challenge ?? false;
    this.bareChallenge = options.bareChallenge ?? false;
    this.scope = options.scope;
    this.dpop = options.dpop ?? false;
    this.headers = options.headers;
  }

  /** The JSON body; an error of another protocol (a JSON-RPC error) overrides it. */
  body(): string {
    return JSON.stringify({ error: this.code, error_description: this.description });
  }
}

/**
 * No usable bearer token: 401 with a bare challenge (RFC 6750 §3.1: no
 * `error` when the request carried no authentication). The JSON body says
 * `unauthorized`, not `invalid_token`: no token was judged invalid.
 */
export const missingToken = (scope?: readonly string[], description = 'A bearer token is required') =>
  new GatewayError(401, 'unauthorized', description, { challenge: true, bareChallenge: true, scope });

export const invalidToken = (description: string, cause?: unknown) =>
  new GatewayError(401, 'invalid_token', description, { challenge: true, cause });

export const invalidRequest = (description: string, challenge = true) =>
  new GatewayError(400, 'invalid_request', description, { challenge });

export const insufficientScope = (description: string, scope?: readonly string[]) =>
  new GatewayError(403, 'insufficient_scope', description, { challenge: true, scope });

export const temporarilyUnavailable = (description: string, cause?: unknown) =>
  new GatewayError(503, 'temporarily_unavailable', description, { cause, headers: { 'retry-after': '1' } });

/** 429 with `Retry-After` in whole seconds (at least 1): when the request would fit again. */
export const tooManyRequests = (description: string, retryAfterMs: number) =>
  new GatewayError(429, 'too_many_requests', description, { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) } });

/** A DPoP proof refused at a protected route (RFC 9449 §7.1): 401 with the `DPoP` challenge. */
export const invalidDpopProof = (description: string, cause?: unknown) =>
  new GatewayError(401, 'invalid_dpop_proof', description, { challenge: true, dpop: true, cause });
