// Bearer token extraction (RFC 6750 §2). Parsed from Node's rawHeaders
// because `req.headers` silently keeps only one of duplicated Authorization
// headers, which would hide a request smuggling two credentials.
import { invalidRequest } from '../errors/gateway-error.js';

const MAX_HEADER_LENGTH = 8 * 1024;
/** Visible ASCII and SP: anything else in a credential is malformed (RFC 9110 §11.4). */
const PRINTABLE_ASCII = /^[\x20-\x7E]*$/;
/** RFC 9110 §5.6.2 token: the shape of an auth-scheme. */
const AUTH_SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 6750 §2.1: "Bearer" 1*SP b64token. */
const BEARER_CREDENTIALS = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * The request's one Authorization header value, unchecked, or undefined.
 * Throws `invalid_request` for two headers or a token in the query string.
 */
export function authorizationHeader(rawHeaders: readonly string[], search: string): string | undefined {
  if (search !== '' && hasAccessTokenParam(search.startsWith('?') ? search.slice(1) : search)) {
    throw invalidRequest('Access tokens are accepted only in the Authorization header');
  }
  let value: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length !== 13 || name.toLowerCase() !== 'authorization') continue;
    if (value !== undefined) throw invalidRequest('More than one Authorization header');
    value = rawHeaders[i + 1] ?? '';
  }
  return value;
}

/** The token of an Authorization header value; undefined for another scheme. Throws `invalid_request` when malformed. */
export function bearerTokenOf(value: string): string | undefined {
  // Length first, so no pattern ever runs on an attacker-sized string.
  if (value.length > MAX_HEADER_LENGTH) throw invalidRequest('Authorization header too large');
  if (!PRINTABLE_ASCII.test(value)) throw invalidRequest('Malformed Authorization header');
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  if (!AUTH_SCHEME.test(scheme)) throw invalidRequest('Malformed Authorization header');
  if (scheme.toLowerCase() !== 'bearer') return undefined;
  const token = BEARER_CREDENTIALS.exec(value)?.[1];
  if (token === undefined) throw invalidRequest('Malformed bearer token');
  return token;
}

/**
 * Whether a form-encoded body carries `access_token` (RFC 6750 §2.2), which
 * the gateway refuses: a token there would be forwarded to the upstream.
 */
export function hasBodyAccessToken(contentType: string | undefined, body: Buffer): boolean {
  const mediaType = contentType?.split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/x-www-form-urlencoded') return false;
  return hasAccessTokenParam(body.toString('utf8'));
}

/**
 * URLSearchParams decodes spelling variants (`access%5Ftoken`); the name is
 * compared without case because a lenient upstream might read it either way.
 */
function hasAccessTokenParam(query: string): boolean {
  if (query === '') return false;
  for (const name of new URLSearchParams(query).keys()) {
    if (name.toLowerCase() === 'access_token') return true;
  }
  return false;
}
