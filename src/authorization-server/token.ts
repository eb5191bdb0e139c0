// /token: authorization_code (PKCE S256, single use, replay revokes the
// grant), refresh_token (rotation with reuse detection), client_credentials
// (configured confidential clients only). Which client may use which grant is
// decided in client-grants; what a code or refresh token still yields is
// judged against the configuration loaded now, not the one it was issued
// under. Every answer, success or error, is no-store.
import { createHash } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { GatewayError, temporarilyUnavailable } from '../errors/gateway-error.js';
import { errorResponse, toGatewayError } from '../errors/respond.js';
import { StoreUnavailableError } from '../store/store.js';
import type { AsContext } from './context.js';
import { mintAccessToken } from './access-token.js';
import { authenticateClient } from './client-auth.js';
import { mayUseGrant } from './client-grants.js';
import { SUPPORTED_GRANT_TYPES, type ClientRecord, type GrantType } from './client-record.js';
import type { ClientRegistry } from './clients.js';
import type { AuthorizationCodes } from './codes.js';
import { publicCors } from './cors.js';
import type { GrantInfo, Grants } from './grants.js';
import { readForm, type Params } from './request-body.js';
import { resolveMachineScopes, resolveResource, stillGrantable } from './resource-scope.js';
import { constantTimeEqual, randomToken } from './secrets.js';

const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;

export interface TokenDeps {
  clients: ClientRegistry;
  codes: AuthorizationCodes;
  grants: Grants;
}

interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

export function tokenRoutes(ctx: AsContext, deps: TokenDeps): Hono {
  const app = new Hono();
  const realm = ctx.issuer;

  async function issue(grantType: GrantType, client: ClientRecord, grant: GrantInfo, scopes: readonly string[], refreshToken?: string): Promise<TokenResponse> {
    const { token, expiresIn } = await mintAccessToken(ctx.keys, {
      issuer: ctx.issuer,
      subject: grant.subject,
      clientId: client.clientId,
      resource: grant.resource,
      scopes,
      ttlMs: ctx.config.accessTokenTtlMs,
      grantId: grant.grantId,
    });
    await deps.clients.touch(client);
    ctx.audit.record({ event: 'token_issued', grant_type: grantType, sub: grant.subject, client_id: client.clientId, resource: grant.resource, scope: scopes.join(' '), refresh: refreshToken !== undefined });
    ctx.metrics.tokensIssued.labels(grantType).inc();
    return { access_token: token, token_type: 'Bearer', expires_in: expiresIn, scope: scopes.join(' '), ...(refreshToken && { refresh_token: refreshToken }) };
  }

  async function authorizationCode(client: ClientRecord, params: Params): Promise<TokenResponse> {
    const code = params.get('code');
    if (!code) throw new GatewayError(400, 'invalid_request', 'code is required');
    if (!mayUseGrant(client, 'authorization_code')) throw new GatewayError(400, 'unauthorized_client', 'This client is not registered for the authorization_code grant');
    const record = await deps.codes.peek(code);
    if (!record) {
      // Unknown, expired — or redeemed already: then what it issued is revoked.
      const grantId = await deps.codes.redeemedGrant(code);
      if (grantId) await revokeForReplay(grantId, client.clientId);
      throw invalidGrant('The authorization code is invalid, expired or already used');
    }
    // Checked before the code is consumed, so a wrong guess cannot burn a legitimate client's code.
    if (record.clientId !== client.clientId) throw invalidGrant('The authorization code was issued to another client');
    const redirectUri = params.get('redirect_uri');
    if (record.redirectUriSent ? redirectUri !== record.redirectUri : redirectUri !== undefined && redirectUri !== record.redirectUri) {
      throw invalidGrant('redirect_uri does not match the authorization request');
    }
    const verifier = params.get('code_verifier');
    if (!verifier || !CODE_VERIFIER.test(verifier) || !constantTimeEqual(s256(verifier), record.codeChallenge)) {
      throw invalidGrant('The PKCE code_verifier does not match');
    }
    const resource = params.get('resource');
    if (resource !== undefined && resource !== record.resource) throw new GatewayError(400, 'invalid_target', 'resource does not match the authorization request');

    // Marked before the take: a concurrent redemption that finds the code already gone
    // (on this replica or another) still learns its grant, and revokes it.
    await deps.codes.markRedeemed(code, record.grantId);
    const taken = await deps.codes.take(code);
    if (!taken) {
      // Another redemption won the race: that is a replay too.
      await revokeForReplay(record.grantId, client.clientId);
      throw invalidGrant('The authorization code is invalid, expired or already used');
    }
    // A reload between /authorize and now may have withdrawn the resource or a scope.
    const allowed = stillGrantable(ctx, client, taken.resource, taken.scopes);
    if (!allowed.ok) throw new GatewayError(400, allowed.error, allowed.description);
    const grant: GrantInfo = { grantId: taken.grantId, clientId: client.clientId, subject: taken.subject, scopes: allowed.value, resource: taken.resource };
    const refreshToken = mayUseGrant(client, 'refresh_token') ? await deps.grants.startFamily(grant) : undefined;
    return issue('authorization_code', client, grant, grant.scopes, refreshToken);
  }

  async function revokeForReplay(grantId: string, clientId: string): Promise<void> {
    await deps.grants.revoke(grantId, 'code_replay');
    ctx.audit.record({ event: 'grant_revoked', reason: 'code_replay', client_id: clientId });
  }

  async function refreshToken(client: ClientRecord, params: Params): Promise<TokenResponse> {
    const presented = params.get('refresh_token');
    if (!presented) throw new GatewayError(400, 'invalid_request', 'refresh_token is required');
    if (!mayUseGrant(client, 'refresh_token')) throw new GatewayError(400, 'unauthorized_client', 'This client is not registered for the refresh_token grant');
    // resource and scope are checked before rotating, so a bad request does not cost the client its refresh token.
    const found = await deps.grants.lookup(presented);
    const known = found?.clientId === client.clientId ? found : undefined;
    const resource = params.get('resource');
    if (known && resource !== undefined && resource !== known.resource) throw new GatewayError(400, 'invalid_target', 'resource does not match the grant');
    // RFC 6749 §6: a narrower scope for this access token; the grant keeps its own.
    const requested = params.get('scope');
    const scopes = requested === undefined ? known?.scopes : requested.split(' ').filter((s) => s !== '');
    if (known && scopes && !scopes.every((s) => known.scopes.includes(s))) throw new GatewayError(400, 'invalid_scope', 'scope exceeds what was granted');
    // Only what the configuration loaded now still allows (a reload may have withdrawn a scope,
    // the route, or a static client's scope): judged before rotating, so nothing is minted from it.
    const allowed = known && stillGrantable(ctx, client, known.resource, scopes ?? known.scopes);
    if (allowed && !allowed.ok) throw new GatewayError(400, allowed.error, allowed.description);
    const { grant, refreshToken: next } = await deps.grants.rotate(presented, client.clientId, (reused) => {
      ctx.audit.record({ event: 'grant_revoked', reason: 'refresh_token_reuse', sub: reused.subject, client_id: reused.clientId });
    });
    // rotate succeeds only for the grant looked up above; judged again only if that lookup raced.
    const granted = allowed ?? stillGrantable(ctx, client, grant.resource, scopes ?? grant.scopes);
    if (!granted.ok) throw new GatewayError(400, granted.error, granted.description);
    return issue('refresh_token', client, grant, granted.value, next);
  }

  async function clientCredentials(client: ClientRecord, params: Params): Promise<TokenResponse> {
    if (!mayUseGrant(client, 'client_credentials')) throw new GatewayError(400, 'unauthorized_client', 'This client may not use the client_credentials grant');
    const route = resolveResource(ctx, params.get('resource'));
    if (!route.ok) throw new GatewayError(400, route.error, route.description);
    const scopes = resolveMachineScopes(route.value, client, params.get('scope'));
    if (!scopes.ok) throw new GatewayError(400, scopes.error, scopes.description);
    const grant: GrantInfo = { grantId: randomToken(16), clientId: client.clientId, subject: client.clientId, scopes: scopes.value, resource: route.value.resource };
    return issue('client_credentials', client, grant, grant.scopes);
  }

  app.use('/token', publicCors);
  app.post('/token', async (c) => {
    let grantType: string | undefined;
    try {
      const params = await readForm(c.req.raw);
      grantType = params.get('grant_type');
      const client = await authenticateClient(deps.clients, params, c.req.header('authorization'), realm);
      let response: TokenResponse;
      switch (grantType) {
        case 'authorization_code':
          response = await authorizationCode(client, params);
          break;
        case 'refresh_token':
          response = await refreshToken(client, params);
          break;
        case 'client_credentials':
          response = await clientCredentials(client, params);
          break;
        case undefined:
          throw new GatewayError(400, 'invalid_request', 'grant_type is required');
        default:
          throw new GatewayError(400, 'unsupported_grant_type', 'This grant type is not supported');
      }
      return c.json(response, 200, NO_STORE);
    } catch (err) {
      return tokenError(c, err, grantType);
    }
  });
  return app;

  function tokenError(_c: Context, err: unknown, grantType: string | undefined): Response {
    const error = err instanceof StoreUnavailableError ? temporarilyUnavailable('The token service is temporarily unavailable', err) : toGatewayError(err);
    // Bounded labels: the three grant types, else `other`.
    ctx.metrics.tokenErrors.labels((SUPPORTED_GRANT_TYPES as readonly string[]).includes(grantType ?? '') ? (grantType as string) : 'other', error.code).inc();
    if (error.status >= 500) ctx.logger.warn({ err: error.cause ?? err, status: error.status }, 'token request failed');
    const response = errorResponse(error);
    response.headers.set('pragma', 'no-cache');
    return response;
  }
}

const s256 = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');

const invalidGrant = (description: string) => new GatewayError(400, 'invalid_grant', description);
