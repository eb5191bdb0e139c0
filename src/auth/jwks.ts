// Signing keys of external issuers. One JWKS source per (issuer, jwks_uri),
// shared by every route and kept across reloads, so a key set is fetched
// once however many routes trust it. jose caches the keys and refetches on an
// unknown `kid` at most once per cooldown; this file adds discovery of the
// jwks_uri, bounded fetches without redirects, and a backoff after failures
// so an unreachable IdP is not hit by every request.
import { createRemoteJWKSet, customFetch, errors, type JWTVerifyGetKey, type RemoteJWKSet } from 'jose';
import { redactUrl } from '../config/urls.js';
import type { Diagnosed, Diagnosis } from '../errors/diagnosis.js';
import { fetchJson } from './fetch-json.js';

/** The key set (or its discovery) cannot be reached: the request gets 503, never 200. */
export class JwksUnavailable extends Error {
  override readonly name = 'JwksUnavailable';
}

export interface JwksOptions {
  /** Per HTTP request (discovery or key set). */
  timeoutMs?: number;
  /** Minimum time between refetches triggered by an unknown `kid`. */
  cooldownMs?: number;
  /** Keys are refetched when older than this. */
  cacheMaxAgeMs?: number;
  /** First wait after a failed fetch; doubles on each failure up to retryMaxMs. */
  retryBaseMs?: number;
  retryMaxMs?: number;
}

/** RFC 8414 §3.3: the metadata names another issuer than the configured one (often only a trailing slash). */
export class IssuerMismatch extends Error implements Diagnosed {
  override readonly name = 'IssuerMismatch';
  readonly diagnosis: Diagnosis;

  constructor(configured: string, seen: unknown, url: string) {
    super(`${url}: metadata issuer does not match ${configured}`);
    const named = typeof seen === 'string' ? seen : JSON.stringify(seen ?? null).slice(0, 200);
    const slash = named.replace(/\/$/, '') === configured.replace(/\/$/, '') ? ' (only a trailing slash differs)' : '';
    this.diagnosis = {
      cause: 'issuer_mismatch',
      key: `issuer_mismatch ${configured} ${named}`,
      message: `the issuer's metadata names another issuer${slash}: tokens cannot be verified until token.jwt.issuer equals it exactly (check --online says the same)`,
      // Exactly as written (a slash is the difference that matters), user info removed.
      fields: { configured: redactUrl(configured), seen: typeof seen === 'string' ? redactUrl(seen) : named, metadata: redactUrl(url) },
    };
  }
}

const MAX_METADATA_BYTES = 256 * 1024;
const MAX_JWKS_BYTES = 512 * 1024;

export class JwksRegistry {
  private readonly sources = new Map<string, JWTVerifyGetKey>();

  constructor(private readonly options: JwksOptions = {}) {}

  /** The key resolver for an issuer; jwksUri undefined: discovered from the issuer's metadata. */
  get(issuer: string, jwksUri?: string): JWTVerifyGetKey {
    const id = JSON.stringify([issuer, jwksUri ?? null]);
    let source = this.sources.get(id);
    if (!source) {
      source = createJwksSource(issuer, jwksUri, this.options);
      this.sources.set(id, source);
    }
    return source;
  }
}

/** Fail fast while a recent failure is still fresh, instead of one outbound call per request. */
class Backoff {
  private failures = 0;
  private retryAt = 0;

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {}

  check(what: string): void {
    if (Date.now() < this.retryAt) throw new JwksUnavailable(`${what} failed recently; retrying later`);
  }

  succeeded(): void {
    this.failures = 0;
    this.retryAt = 0;
  }

  failed(): void {
    this.retryAt = Date.now() + Math.min(this.maxMs, this.baseMs * 2 ** this.failures);
    this.failures += 1;
  }
}

function createJwksSource(issuer: string, jwksUri: string | undefined, options: JwksOptions): JWTVerifyGetKey {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const backoff = new Backoff(options.retryBaseMs ?? 500, options.retryMaxMs ?? 10_000);
  let keySet: RemoteJWKSet | undefined;
  let pending: Promise<RemoteJWKSet> | undefined;

  async function guarded<T>(what: string, run: () => Promise<T>): Promise<T> {
    backoff.check(what);
    try {
      const result = await run();
      backoff.succeeded();
      return result;
    } catch (cause) {
      backoff.failed();
      throw new JwksUnavailable(`${what} failed`, { cause });
    }
  }

  async function fetchKeys(url: string, init: { signal: AbortSignal }): Promise<Response> {
    const jwks = await guarded('JWKS fetch', async () => {
      const body = await fetchJson(url, { timeoutMs, maxBytes: MAX_JWKS_BYTES, signal: init.signal });
      if (!isObject(body) || !Array.isArray(body.keys) || !body.keys.every(isObject)) throw new Error(`${url} is not a JWKS`);
      return body;
    });
    return Response.json(jwks);
  }

  async function createKeySet(): Promise<RemoteJWKSet> {
    const uri = jwksUri ?? (await guarded('Issuer metadata discovery', () => discoverJwksUri(issuer, timeoutMs)));
    return createRemoteJWKSet(new URL(uri), {
      timeoutDuration: timeoutMs,
      cooldownDuration: options.cooldownMs ?? 30_000,
      cacheMaxAge: options.cacheMaxAgeMs ?? 600_000,
      [customFetch]: fetchKeys,
    });
  }

  function resolveKeySet(): Promise<RemoteJWKSet> {
    if (keySet) return Promise.resolve(keySet);
    // One discovery at a time; a failure clears it so a later request retries (after the backoff).
    pending ??= createKeySet().then(
      (created) => (keySet = created),
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  }

  return async (header, token) => {
    const set = await resolveKeySet();
    try {
      return await set(header, token);
    } catch (err) {
      if (err instanceof errors.JWKSTimeout) throw new JwksUnavailable('JWKS fetch timed out', { cause: err });
      throw err;
    }
  };
}

/** RFC 8414 §3.1 (path inserted after the host), then OpenID Connect Discovery 1.0 §4. */
export function metadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  return [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`];
}

async function discoverJwksUri(issuer: string, timeoutMs: number): Promise<string> {
  const failures: unknown[] = [];
  for (const url of metadataUrls(issuer)) {
    try {
      const metadata = await fetchJson(url, { timeoutMs, maxBytes: MAX_METADATA_BYTES });
      if (!isObject(metadata)) throw new Error(`${url}: metadata is not an object`);
      // RFC 8414 §3.3: metadata naming another issuer must not be used.
      if (metadata.issuer !== issuer) throw new IssuerMismatch(issuer, metadata.issuer, url);
      if (typeof metadata.jwks_uri !== 'string') throw new Error(`${url}: metadata has no jwks_uri`);
      const jwksUri = new URL(metadata.jwks_uri);
      if (jwksUri.protocol !== 'https:' && jwksUri.protocol !== 'http:') throw new Error(`${url}: jwks_uri is not http(s)`);
      return jwksUri.href;
    } catch (err) {
      failures.push(err);
    }
  }
  throw new AggregateError(failures, `No usable authorization server metadata for ${issuer}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
