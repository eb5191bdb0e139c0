// An Identity Assertion JWT Authorization Grant (ID-JAG,
// draft-ietf-oauth-identity-assertion-authz-grant-04 §3, §4.4.1) as /token
// receives it: what it must be before the jwt-bearer grant (RFC 7523 §3)
// looks at the client, the routes or the store. Cheap structure first, then
// the issuer (listed, or nothing is fetched), then the signature by that
// issuer's keys, then the claims. Header and payload are read once, strictly:
// a duplicate member (two `sub`, two `aud`) is refused, since another reader
// could take the other one. Every refusal is 400 invalid_grant (RFC 6749
// §5.2); keys that cannot be fetched are 503.
import { base64url, compactVerify, errors, type JWTVerifyGetKey } from 'jose';
import { ASYMMETRIC_JWS_ALGORITHMS } from '../../config/jws-algorithms.js';
import { GatewayError, temporarilyUnavailable } from '../../errors/gateway-error.js';
import { JwksUnavailable } from '../../auth/jwks.js';
import { JsonReadingError, parseStrictJson } from '../../policy/strict-json.js';
import type { EnterpriseIdps } from './enterprise-idps.js';

/** §3.1: the JWT `typ` header, compared exactly (RFC 8725 §3.11). */
export const ID_JAG_TYPE = 'oauth-id-jag+jwt';

/** draft §7.2: what `authorization_grant_profiles_supported` names for this grant. */
export const ID_JAG_GRANT_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';

/** An assertion is one signed JWT: a few KiB at most, even with an RSA-4096 signature and many scopes. */
export const MAX_ASSERTION_LENGTH = 16 * 1024;

/** ID-JAGs are short-lived (MCP enterprise-managed authorization §7.4.2): `exp` at most this far after `iat`, and after now. */
export const MAX_ASSERTION_LIFETIME_SECONDS = 300;

/** How far the IdP's clock may be from ours, either way. */
export const ASSERTION_CLOCK_SKEW_SECONDS = 30;

/** Header members that point at, or carry, key material or extensions: the key comes from our configuration only. */
const REFUSED_HEADERS = ['jku', 'jwk', 'x5u', 'x5c', 'crit'] as const;

const MAX_SUBJECT_LENGTH = 255;
const MAX_JTI_LENGTH = 255;
const MAX_RESOURCES = 20;
const PRINTABLE_ASCII = /^[\x20-\x7E]+$/;
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

export interface IdJag {
  /** The enterprise IdP that signed it (`iss`, as configured). */
  issuer: string;
  subject: string;
  /** The client it was issued for (`client_id`): the caller compares it with the authenticated client. */
  clientId: string;
  /** `resource` as one or more URIs; empty when the claim is absent. */
  resources: string[];
  /** `scope`, split; empty when the claim is absent. */
  scopes: string[];
  jti: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** `cnf.jkt` (draft §8.6.1.2): the DPoP key the assertion is bound to. */
  jkt?: string;
}

export interface IdJagExpectations {
  /** This authorization server's issuer identifier: the only acceptable `aud`. */
  audience: string;
  /** Seconds since the epoch; default: now. */
  nowSeconds?: number;
}

export const invalidAssertion = (description: string, cause?: unknown) => new GatewayError(400, 'invalid_grant', description, { cause });

export async function verifyIdJag(assertion: string, idps: EnterpriseIdps, expected: IdJagExpectations): Promise<IdJag> {
  const [headerPart, payloadPart] = compactParts(assertion);
  checkHeader(readJsonObject(headerPart, 'header'));
  const claims = readJsonObject(payloadPart, 'payload');
  if (typeof claims.iss !== 'string') throw invalidAssertion('The assertion has no issuer');
  const keys = idps.keysOf(claims.iss);
  if (!keys) throw invalidAssertion('The assertion\'s issuer is not a trusted enterprise IdP');
  await checkSignature(assertion, keys);
  return checkClaims(claims.iss, claims, expected.audience, expected.nowSeconds ?? Math.floor(Date.now() / 1000));
}

/** A compact JWS of three parts: an encrypted (JWE, five parts) or unsigned assertion is not one. */
function compactParts(assertion: string): [string, string] {
  if (assertion.length > MAX_ASSERTION_LENGTH) throw invalidAssertion('The assertion is too large');
  const parts = assertion.split('.');
  if (parts.length !== 3 || parts.some((part) => part === '')) throw invalidAssertion('The assertion is not a signed JWT');
  return [parts[0] as string, parts[1] as string];
}

function readJsonObject(part: string, what: 'header' | 'payload'): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseStrictJson(UTF8.decode(base64url.decode(part)), { maxDepth: 16 });
  } catch (err) {
    const ambiguous = err instanceof JsonReadingError && err.fault === 'ambiguous';
    throw invalidAssertion(ambiguous ? `The assertion ${what} has a duplicate member or another ambiguity` : `The assertion ${what} is not JSON`, err);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidAssertion(`The assertion ${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

function checkHeader(header: Record<string, unknown>): void {
  if (header.typ !== ID_JAG_TYPE) throw invalidAssertion(`The assertion's typ must be ${ID_JAG_TYPE}`);
  if (typeof header.alg !== 'string' || !(ASYMMETRIC_JWS_ALGORITHMS as readonly string[]).includes(header.alg)) {
    throw invalidAssertion('The assertion\'s algorithm is not allowed (asymmetric signatures only)');
  }
  for (const name of REFUSED_HEADERS) {
    if (name in header) throw invalidAssertion(`The assertion header must not carry ${name}`);
  }
}

async function checkSignature(assertion: string, keys: JWTVerifyGetKey): Promise<void> {
  try {
    await compactVerify(assertion, keys, { algorithms: [...ASYMMETRIC_JWS_ALGORITHMS] });
  } catch (err) {
    if (err instanceof JwksUnavailable) throw temporarilyUnavailable('The enterprise IdP\'s keys cannot be fetched; try again', err);
    if (err instanceof errors.JWKSNoMatchingKey) throw invalidAssertion('No key of the issuer matches the assertion', err);
    throw invalidAssertion('The assertion\'s signature is not valid', err);
  }
}

function checkClaims(issuer: string, claims: Record<string, unknown>, audience: string, now: number): IdJag {
  if (!audienceIs(claims.aud, audience)) throw invalidAssertion('The assertion is not for this authorization server (aud)');
  const { expiresAt } = checkTimes(claims, now);
  const subject = boundedString(claims.sub, MAX_SUBJECT_LENGTH);
  if (subject === undefined) throw invalidAssertion('The assertion has no valid subject (sub)');
  const jti = boundedString(claims.jti, MAX_JTI_LENGTH);
  if (jti === undefined) throw invalidAssertion('The assertion has no valid jti');
  if (typeof claims.client_id !== 'string' || claims.client_id === '') throw invalidAssertion('The assertion names no client_id');
  return {
    issuer,
    subject,
    clientId: claims.client_id,
    resources: resourcesOf(claims.resource),
    scopes: scopesOf(claims.scope),
    jti,
    expiresAt,
    ...keyBinding(claims.cnf),
  };
}

/** draft §4.4.1: `aud` is this issuer, as a string or an array of exactly that one element. */
function audienceIs(aud: unknown, audience: string): boolean {
  if (Array.isArray(aud)) return aud.length === 1 && aud[0] === audience;
  return aud === audience;
}

/** RFC 7523 §3 items 4–7: unexpired, not too long-lived, issued in the past, already valid. */
function checkTimes(claims: Record<string, unknown>, now: number): { expiresAt: number } {
  const { exp, iat, nbf } = claims;
  if (!isTime(exp)) throw invalidAssertion('The assertion has no valid exp');
  if (!isTime(iat)) throw invalidAssertion('The assertion has no valid iat');
  if (exp <= now - ASSERTION_CLOCK_SKEW_SECONDS) throw invalidAssertion('The assertion has expired');
  if (iat > now + ASSERTION_CLOCK_SKEW_SECONDS) throw invalidAssertion('The assertion is issued in the future (iat)');
  if (exp - iat > MAX_ASSERTION_LIFETIME_SECONDS || exp > now + MAX_ASSERTION_LIFETIME_SECONDS + ASSERTION_CLOCK_SKEW_SECONDS) {
    throw invalidAssertion(`The assertion lives too long: at most ${MAX_ASSERTION_LIFETIME_SECONDS} s are accepted`);
  }
  if (nbf !== undefined && (!isTime(nbf) || nbf > now + ASSERTION_CLOCK_SKEW_SECONDS)) throw invalidAssertion('The assertion is not valid yet (nbf)');
  return { expiresAt: exp };
}

const isTime = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

function boundedString(value: unknown, max: number): string | undefined {
  return typeof value === 'string' && value.length <= max && PRINTABLE_ASCII.test(value) ? value : undefined;
}

/** §3.1: one URI or an array of them. */
function resourcesOf(value: unknown): string[] {
  if (value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0 || list.length > MAX_RESOURCES || !list.every((r) => typeof r === 'string' && r !== '')) {
    throw invalidAssertion('The assertion\'s resource is not a URI or a list of them');
  }
  return list as string[];
}

/** §3.1: a space-separated list of scope tokens (RFC 6749 §3.3). */
function scopesOf(value: unknown): string[] {
  if (value === undefined) return [];
  if (typeof value !== 'string') throw invalidAssertion('The assertion\'s scope is not a string');
  const scopes = value.split(' ').filter((s) => s !== '');
  if (!scopes.every((s) => SCOPE_TOKEN.test(s))) throw invalidAssertion('The assertion\'s scope is not a list of scope tokens');
  return scopes;
}

function keyBinding(cnf: unknown): { jkt?: string } {
  if (cnf === undefined) return {};
  const jkt = typeof cnf === 'object' && cnf !== null ? (cnf as Record<string, unknown>).jkt : undefined;
  if (typeof jkt !== 'string' || jkt === '') throw invalidAssertion('The assertion\'s cnf names no jkt');
  return { jkt };
}
