// Bearer token extraction (RFC 6750 §2), and DPoP's (RFC 9449 §7.1) on the
// routes that accept it. Parsed from Node's rawHeaders
// because `req.headers` silently keeps only one of duplicated Authorization
// headers, which would hide a request smuggling two credentials.
import { invalidRequest } from '../errors/gateway-error.js';

const MAX_HEADER_LENGTH = 8 * 1024;
/** Visible ASCII and SP: anything else in a credential is malformed (RFC 9110 §11.4). */
const PRINTABLE_ASCII = /^[\x20-\x7E]*$/;
/** RFC 9110 §5.6.2 token: the shape of an auth-scheme. */
const AUTH_SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 6750 §2.1: "Bearer" 1*SP b64token; RFC 9449 §7.1 spells "DPoP" credentials alike (token68). */
const TOKEN_CREDENTIALS = /^(?:Bearer|DPoP) +[A-Za-z0-9\-._~+/]+=*$/i;

/** A token and the scheme it came with. */
export interface Credentials {
  token: string;
  /** `DPoP` scheme: the request must carry a proof of the token's key. */
  dpop: boolean;
}

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
  return credentialsOf(value, false)?.token;
}

/**
 * The token and scheme of an Authorization header value: `Bearer`, or `DPoP`
 * when the route accepts it; undefined for another scheme. Throws
 * `invalid_request` when malformed.
 */
export function credentialsOf(value: string, acceptDpop: boolean): Credentials | undefined {
  // Length first, so no pattern ever runs on an attacker-sized string.
  if (value.length > MAX_HEADER_LENGTH) throw invalidRequest('Authorization header too large');
  if (!PRINTABLE_ASCII.test(value)) throw invalidRequest('Malformed Authorization header');
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  if (!AUTH_SCHEME.test(scheme)) throw invalidRequest('Malformed Authorization header');
  const lower = scheme.toLowerCase();
  const dpop = lower === 'dpop';
  if (lower !== 'bearer' && !(dpop && acceptDpop)) return undefined;
  if (!TOKEN_CREDENTIALS.test(value)) throw invalidRequest(dpop ? 'Malformed DPoP token' : 'Malformed bearer token');
  // The pattern holds: the token is what follows the spaces after the scheme (no match array per request).
  let start = space + 1;
  while (value.charCodeAt(start) === 0x20) start++;
  return { token: value.slice(start), dpop };
}

/** Whether an Authorization header value (one already parsed once) uses the `DPoP` scheme. */
export function isDpopScheme(value: string): boolean {
  return value.length > 5 && value.charCodeAt(4) === 0x20 && value.slice(0, 4).toLowerCase() === 'dpop';
}

/** The request's one DPoP header (RFC 9449 §4.3 check 1), or undefined; two are 400. */
export function dpopHeader(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length !== 4 || name.toLowerCase() !== 'dpop') continue;
    if (value !== undefined) throw invalidRequest('More than one DPoP header');
    value = rawHeaders[i + 1] ?? '';
  }
  return value;
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
