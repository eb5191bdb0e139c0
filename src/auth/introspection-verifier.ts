// Opaque tokens: RFC 7662 introspection with oauth4webapi. Fails closed: if
// the endpoint cannot answer, the request gets 503, never a pass. Positive
// results are cached by the caller (token-cache.ts), never past `exp`.
import * as oauth from 'oauth4webapi';
import type { IntrospectionTokenConfig } from '../config/types.js';
import { invalidToken, temporarilyUnavailable } from '../errors/gateway-error.js';
import type { OnClaimMismatch } from './claim-mismatch.js';
import { clientIdFrom, scopesFrom } from './claims.js';
import { sha256Base64Url } from './hash.js';
import { MAX_TOKEN_LENGTH } from './jwt-verifier.js';
import type { AuthContext } from './principal.js';
import type { TokenVerifier } from './verifier.js';

export interface IntrospectionOptions {
  timeoutMs?: number;
  /** Told when an active token's `aud` or `iss` is not the expected one (for the operator's log). */
  onClaimMismatch?: OnClaimMismatch;
}

export function createIntrospectionVerifier(resource: string, config: IntrospectionTokenConfig, options: IntrospectionOptions = {}): TokenVerifier {
  const endpoint = new URL(config.endpoint);
  // oauth4webapi needs an issuer; it only checks it on JWT introspection responses, which are not requested.
  const as: oauth.AuthorizationServer = { issuer: config.issuer ?? endpoint.origin, introspection_endpoint: endpoint.href };
  const client: oauth.Client = { client_id: config.clientId };
  const clientAuth = oauth.ClientSecretBasic(config.clientSecret);
  const timeoutMs = options.timeoutMs ?? 5_000;
  // Operators may point at a plain-http endpoint (a sidecar, a cluster service); config warns about it.
  const insecure = endpoint.protocol === 'http:';

  async function introspect(token: string): Promise<oauth.IntrospectionResponse> {
    try {
      const response = await oauth.introspectionRequest(as, client, clientAuth, token, {
        signal: AbortSignal.timeout(timeoutMs),
        additionalParameters: { token_type_hint: 'access_token' },
        [oauth.allowInsecureRequests]: insecure,
      });
      return await oauth.processIntrospectionResponse(as, client, response);
    } catch (err) {
      throw temporarilyUnavailable('Token introspection is unavailable', err);
    }
  }

  return {
    async verify(token, _seenOn, tokenHash) {
      if (token.length > MAX_TOKEN_LENGTH) throw invalidToken('Token too large');
      const result = await introspect(token);
      const expiresAt = activeUntil(result);
      checkAudienceAndIssuer(result, resource, config.issuer, options.onClaimMismatch);
      return toAuthContext({ token, tokenHash: tokenHash ?? sha256Base64Url(token) }, result, expiresAt, config.issuer, endpoint.href);
    },
  };
}

/** The expiry of an active token; else 401 invalid_token. */
function activeUntil(result: oauth.IntrospectionResponse): number {
  if (result.active !== true) throw invalidToken('Token is not active');
  // Without exp a cached or replayed answer could live forever.
  if (typeof result.exp !== 'number' || !Number.isFinite(result.exp)) throw invalidToken('Token has no expiry');
  if (result.exp * 1000 <= Date.now()) throw invalidToken('Token expired');
  return result.exp;
}

function checkAudienceAndIssuer(result: oauth.IntrospectionResponse, resource: string, expectedIssuer: string | undefined, onMismatch?: OnClaimMismatch): void {
  const audiences = typeof result.aud === 'string' ? [result.aud] : Array.isArray(result.aud) ? result.aud : [];
  if (!audiences.includes(resource)) {
    onMismatch?.({ claim: 'aud', expected: resource, received: result.aud });
    throw invalidToken('Token audience does not match this resource');
  }
  // `iss` is optional in RFC 7662; when the endpoint names one, it must be the configured issuer.
  if (expectedIssuer !== undefined && result.iss !== undefined && result.iss !== expectedIssuer) {
    onMismatch?.({ claim: 'iss', expected: expectedIssuer, received: result.iss });
    throw invalidToken('Unexpected token issuer');
  }
}

function toAuthContext({ token, tokenHash }: Pick<AuthContext, 'token' | 'tokenHash'>, result: oauth.IntrospectionResponse, expiresAt: number, expectedIssuer: string | undefined, endpoint: string): AuthContext {
  // The principal is (issuer, sub, client_id): without sub, users of one client would share sessions.
  if (typeof result.sub !== 'string' || result.sub === '') throw invalidToken('Token has no subject');
  return {
    // The principal's issuer: configured, else as answered, else the endpoint that vouched for the token.
    issuer: expectedIssuer ?? result.iss ?? endpoint,
    subject: result.sub,
    clientId: clientIdFrom(result),
    scopes: scopesFrom(result),
    expiresAt,
    claims: result,
    token,
    tokenHash,
  };
}
