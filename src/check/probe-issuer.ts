// `check --online` for a token issuer: its metadata (RFC 8414, then OpenID
// Discovery, in the order the gateway reads them) must name exactly the
// configured issuer, and its key set must hold a key for an allowed algorithm.
import { metadataUrls } from '../auth/jwks.js';
import type { JwtTokenConfig } from '../config/types.js';
import { redactUrl } from '../config/urls.js';
import { error, ok, warn, type Finding } from './findings.js';
import { describeStatus, probe } from './http-probe.js';

export interface MetadataFound {
  url: string;
  metadata: Record<string, unknown>;
}

/** The first metadata document the gateway would use (at `urls`, in order), or why each place failed. */
export async function findMetadata(issuer: string, urls = metadataUrls(issuer)): Promise<MetadataFound | { failures: string[] }> {
  const failures: string[] = [];
  for (const url of urls) {
    try {
      const answer = await probe(url);
      if (answer.status === 200 && isRecord(answer.json)) return { url, metadata: answer.json };
      failures.push(`${redactUrl(url)}: ${answer.status === 200 ? 'not a JSON object' : describeStatus(answer)}`);
    } catch (err) {
      failures.push(`${redactUrl(url)}: ${(err as Error).message}`);
    }
  }
  return { failures };
}

/** The metadata's `issuer` must equal the configured one character for character (RFC 8414 §3.3). */
export function issuerFinding(subject: string, issuer: string, found: MetadataFound): Finding {
  const named = found.metadata.issuer;
  if (named === issuer) return ok(subject, `${redactUrl(found.url)} names issuer ${redactUrl(issuer)}`);
  const slash = typeof named === 'string' && named.replace(/\/$/, '') === issuer.replace(/\/$/, '') ? ' (only a trailing slash differs)' : '';
  return error(subject, `${redactUrl(found.url)} names issuer ${String(JSON.stringify(named)).slice(0, 200)}, the configuration ${redactUrl(issuer)}: the gateway needs them equal exactly${slash}`);
}

/** Metadata and key set of a `token.jwt` issuer. */
export async function probeJwtIssuer(config: JwtTokenConfig): Promise<Finding[]> {
  const found = await findMetadata(config.issuer);
  const findings: Finding[] = [];
  let jwksUri = config.jwksUri;
  if ('failures' in found) {
    // With jwks_uri configured the gateway never reads the metadata.
    if (jwksUri === undefined) return [error('issuer metadata', `none found, so the JWKS cannot be discovered (set token.jwt.jwks_uri, or fix the issuer): ${found.failures.join('; ')}`)];
    findings.push(ok('issuer metadata', 'none found; not needed, jwks_uri is configured'));
  } else {
    // Discovery checks the issuer too; with jwks_uri a mismatch still means tokens carry another `iss`.
    findings.push(issuerFinding('issuer metadata', config.issuer, found));
    const discovered = found.metadata.jwks_uri;
    if (jwksUri === undefined && typeof discovered !== 'string') return [...findings, error('jwks', `${redactUrl(found.url)} has no jwks_uri`)];
    if (jwksUri !== undefined && typeof discovered === 'string' && discovered !== jwksUri) {
      findings.push(warn('jwks', `the metadata's jwks_uri is ${redactUrl(discovered)}; the configured ${redactUrl(jwksUri)} is used`));
    }
    jwksUri ??= discovered as string;
  }
  return [...findings, await probeJwks(jwksUri, config.algorithms)];
}

/** A key set and whether it holds a key for one of `algorithms`. */
export async function probeJwks(url: string, algorithms: readonly string[]): Promise<Finding> {
  let answer;
  try {
    answer = await probe(url);
  } catch (err) {
    return error('jwks', `${redactUrl(url)}: ${(err as Error).message}`);
  }
  const keys = isRecord(answer.json) && Array.isArray(answer.json.keys) ? answer.json.keys.filter(isRecord) : undefined;
  if (answer.status !== 200 || keys === undefined) return error('jwks', `${redactUrl(url)}: ${answer.status === 200 ? 'not a JWKS (no keys array)' : describeStatus(answer)}`);
  const usable = keys.filter((key) => algorithms.some((alg) => keyFits(key, alg)));
  const summary = `${redactUrl(url)} has ${keys.length} key${keys.length === 1 ? '' : 's'}, ${usable.length} for ${algorithms.join(', ')}`;
  return usable.length > 0 ? ok('jwks', summary) : error('jwks', `${summary}: no token can be verified (token.jwt.algorithms?)`);
}

/** Whether a JWK can verify signatures of `alg` (RFC 7518 §6, RFC 8037). */
export function keyFits(key: Record<string, unknown>, alg: string): boolean {
  if (key.use !== undefined && key.use !== 'sig') return false;
  const eddsa = alg === 'EdDSA' || alg === 'Ed25519';
  if (typeof key.alg === 'string' && key.alg !== alg && !(eddsa && (key.alg === 'EdDSA' || key.alg === 'Ed25519'))) return false;
  if (/^(RS|PS)/.test(alg)) return key.kty === 'RSA';
  if (eddsa) return key.kty === 'OKP' && key.crv === 'Ed25519';
  const curve = { ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' }[alg];
  return curve !== undefined && key.kty === 'EC' && key.crv === curve;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
