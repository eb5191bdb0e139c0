// Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document,
// MCP 2025-11-25): a `client_id` that is an https URL names a JSON document
// describing the client. It is fetched through the SSRF guard without
// following any redirect (else an open redirector on a trusted host would let
// anyone serve that host's client), must be served as JSON, must name itself
// as `client_id`, and is cached per HTTP caching within fixed bounds.
// The cache is in process memory, not the store: a URL anyone can choose must
// not make the shared store grow.
import { LRUCache } from 'lru-cache';
import { ClientMetadataError, parseClientMetadata } from './client-metadata.js';
import type { ClientRecord } from './client-record.js';
import { SafeFetchError, type SafeFetcher } from '../helpers/safe-fetch.js';

const MIN_CACHE_MS = 5 * 60_000;
const MAX_CACHE_MS = 24 * 60 * 60_000;
/** A failed fetch is not retried for this long, so a bad URL cannot make us fetch on every request. */
const FAILURE_CACHE_MS = 30_000;

export class ClientMetadataDocumentError extends Error {
  override readonly name = 'ClientMetadataDocumentError';
}

/** Whether a client_id is meant as a metadata document URL: https with a path (the draft's §3). */
export function isClientIdUrl(clientId: string): boolean {
  return /^https:\/\/[^/?#]+\/[^#]*$/i.test(clientId) && URL.canParse(clientId);
}

type Cached = { record: ClientRecord } | { error: string };

export class ClientMetadataDocuments {
  private readonly cache: LRUCache<string, Cached>;
  private readonly inFlight = new Map<string, Promise<ClientRecord>>();

  constructor(
    private readonly fetcher: SafeFetcher,
    options: { maxEntries?: number } = {},
  ) {
    this.cache = new LRUCache({ max: options.maxEntries ?? 1000 });
  }

  /** The client the document at `clientId` describes; throws ClientMetadataDocumentError saying why not. */
  async resolve(clientId: string): Promise<ClientRecord> {
    const cached = this.cache.get(clientId);
    if (cached) {
      if ('error' in cached) throw new ClientMetadataDocumentError(cached.error);
      return cached.record;
    }
    let pending = this.inFlight.get(clientId);
    if (!pending) {
      pending = this.load(clientId).finally(() => this.inFlight.delete(clientId));
      this.inFlight.set(clientId, pending);
    }
    return pending;
  }

  private async load(clientId: string): Promise<ClientRecord> {
    try {
      const { record, ttlMs } = await this.fetchDocument(clientId);
      this.cache.set(clientId, { record }, { ttl: ttlMs });
      return record;
    } catch (err) {
      const message = err instanceof ClientMetadataDocumentError ? err.message : 'the client metadata document could not be fetched';
      this.cache.set(clientId, { error: message }, { ttl: FAILURE_CACHE_MS });
      throw new ClientMetadataDocumentError(message, { cause: err });
    }
  }

  private async fetchDocument(clientId: string): Promise<{ record: ClientRecord; ttlMs: number }> {
    checkClientIdUrl(clientId);
    let response;
    try {
      response = await this.fetcher.fetch(clientId, { redirects: 'refuse' });
    } catch (err) {
      if (err instanceof SafeFetchError) throw new ClientMetadataDocumentError(`the client metadata document could not be fetched (${err.reason})`, { cause: err });
      throw err;
    }
    if (response.status !== 200) throw new ClientMetadataDocumentError(`the client metadata document answered HTTP ${response.status}`);
    if (!isJsonContentType(response.headers['content-type'])) {
      throw new ClientMetadataDocumentError('the client metadata document is not served as application/json');
    }
    let document: unknown;
    try {
      document = JSON.parse(response.body.toString('utf8'));
    } catch {
      throw new ClientMetadataDocumentError('the client metadata document is not JSON');
    }
    if (typeof document !== 'object' || document === null || Array.isArray(document)) throw new ClientMetadataDocumentError('the client metadata document is not a JSON object');
    const doc = document as Record<string, unknown>;
    if (doc.client_id !== clientId) throw new ClientMetadataDocumentError('the client metadata document names another client_id');
    // A document anyone can read cannot hold a shared secret (draft §4.1).
    if (doc.client_secret !== undefined || doc.client_secret_expires_at !== undefined) {
      throw new ClientMetadataDocumentError('a client metadata document must not contain a client secret');
    }
    let metadata;
    try {
      metadata = parseClientMetadata(doc, { defaultAuthMethod: 'none' });
    } catch (err) {
      if (err instanceof ClientMetadataError) throw new ClientMetadataDocumentError(`the client metadata document is invalid: ${err.message}`);
      throw err;
    }
    if (metadata.tokenEndpointAuthMethod !== 'none') {
      throw new ClientMetadataDocumentError('metadata document clients must use token_endpoint_auth_method none (private_key_jwt is not supported)');
    }
    const record: ClientRecord = {
      clientId,
      kind: 'metadata_document',
      redirectUris: metadata.redirectUris,
      grantTypes: metadata.grantTypes,
      tokenEndpointAuthMethod: 'none',
      applicationType: metadata.applicationType,
      clientName: metadata.text.client_name,
      clientUri: metadata.text.client_uri,
      logoUri: metadata.text.logo_uri,
      scope: metadata.scope,
      issuedAt: Math.floor(Date.now() / 1000),
    };
    return { record, ttlMs: cacheLifetime(response.headers['cache-control']) };
  }
}

function checkClientIdUrl(clientId: string): void {
  const url = new URL(clientId);
  if (url.username || url.password) throw new ClientMetadataDocumentError('a client_id URL must not contain user information');
  if (url.hash || clientId.includes('#')) throw new ClientMetadataDocumentError('a client_id URL must not contain a fragment');
  if (url.pathname === '/') throw new ClientMetadataDocumentError('a client_id URL must have a path');
  const rawPath = /^https:\/\/[^/]+(\/[^?]*)/i.exec(clientId)?.[1] ?? '';
  if (rawPath.split('/').some((segment) => segment === '.' || segment === '..' || /^%2e%2e?$|^\.%2e$/i.test(segment))) {
    throw new ClientMetadataDocumentError('a client_id URL must not contain dot segments');
  }
}

/** A media type token (RFC 6838 restricted-name) and a parameter value (token or quoted-string, RFC 9110 §5.6.6). */
const JSON_MEDIA_TYPE = /^application\/(?:json|[a-z0-9][a-z0-9!#$&^_.+-]*\+json)$/;
const PARAMETER = /^([!#$%&'*+.^_`|~0-9a-z-]+)=("(?:[^"\\]|\\.)*"|[!#$%&'*+.^_`|~0-9a-z-]+)$/;

/**
 * Whether a Content-Type says JSON: exactly one header, `application/json` or
 * `application/<name>+json` (case-insensitive), with well-formed parameters of
 * which a charset, if any, is UTF-8 (RFC 8259 §8.1). Missing, text/*,
 * application/jsonp, application/json-seq and anything else are not JSON.
 */
export function isJsonContentType(header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const [type = '', ...parameters] = header.toLowerCase().split(';').map((part) => part.trim());
  if (!JSON_MEDIA_TYPE.test(type)) return false;
  return parameters.every((parameter) => {
    const match = PARAMETER.exec(parameter);
    if (!match) return false;
    return match[1] !== 'charset' || /^"?utf-8"?$/.test(match[2] as string);
  });
}

/** max-age, held within [5 min, 24 h]; no-store, no-cache or no header: the minimum. */
export function cacheLifetime(header: string | string[] | undefined): number {
  const value = Array.isArray(header) ? header.join(',') : (header ?? '');
  if (/(^|,)\s*(no-store|no-cache)\s*(,|$)/i.test(value)) return MIN_CACHE_MS;
  const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(value)?.[1];
  if (maxAge === undefined) return MIN_CACHE_MS;
  return Math.min(MAX_CACHE_MS, Math.max(MIN_CACHE_MS, Number(maxAge) * 1000));
}
