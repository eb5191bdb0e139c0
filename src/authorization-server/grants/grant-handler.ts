// The contract of a grant at /token (one file per grant, as node-oidc-provider's
// lib/actions/grants/): given the client /token authenticated and the request's
// parameters, a grant answers with tokens or throws a GatewayError. Which
// grants a client may use is decided in client-grants; each grant asks it.
import { GatewayError } from '../../errors/gateway-error.js';
import { mintAccessToken } from '../tokens/access-token.js';
import type { ClientRecord, GrantType } from '../clients/client-record.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import type { AuthorizationCodes } from '../tokens/codes.js';
import type { EnterpriseIdps } from '../idp/enterprise-idps.js';
import type { AsContext } from '../context.js';
import type { GrantInfo, Grants } from '../tokens/grants.js';
import type { Params } from '../helpers/request-body.js';
import type { Resolved } from '../clients/resource-scope.js';
import type { TokenProof } from '../tokens/token-dpop.js';
import type { SignInShare } from '../tokens/sign-in-share.js';

export interface TokenDeps {
  clients: ClientRegistry;
  codes: AuthorizationCodes;
  grants: Grants;
  /** The IdPs whose ID-JAGs the jwt-bearer grant accepts. */
  enterpriseIdps: EnterpriseIdps;
  /** Each user's share of sign-ins: an ID-JAG redeemed is one too (its grant may leave a `grant:` marker). */
  signInShare?: SignInShare;
}

export interface TokenResponse {
  access_token: string;
  /** `DPoP` when the access token is bound to the key of the request's proof (RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  scope: string;
  refresh_token?: string;
}

/**
 * `proof`: the request's DPoP proof, checked by endpoints/token.ts (its key,
 * `jkt`, undefined without one) but not spent: each grant calls `spend` once
 * the request is known valid and before it changes anything (a code taken, a
 * token rotated), so only a valid request writes a replay marker.
 */
export type GrantHandler = (client: ClientRecord, params: Params, proof: TokenProof) => Promise<TokenResponse>;

/** Built once per /token app, with what every grant may need. */
export type GrantHandlerFactory = (ctx: AsContext, deps: TokenDeps) => GrantHandler;

export interface Issuance {
  grantType: GrantType;
  client: ClientRecord;
  grant: GrantInfo;
  /** What this access token carries: the grant's scopes, or fewer (a narrowed refresh). */
  scopes: readonly string[];
  refreshToken?: string;
  /** Bind the access token to this DPoP key (`cnf.jkt`, RFC 9449 §6.1). */
  jkt?: string;
  /** The enterprise IdP whose assertion (ID-JAG) the token was issued on: named in the audit line. */
  enterpriseIdp?: string;
}

/** How every grant ends: the access token minted, the client's registration kept alive, the issue audited and counted. */
export async function issueTokens(ctx: AsContext, clients: ClientRegistry, issuance: Issuance): Promise<TokenResponse> {
  const { grantType, client, grant, scopes, refreshToken, jkt, enterpriseIdp } = issuance;
  const { token, expiresIn } = await mintAccessToken(ctx.keys, {
    issuer: ctx.issuer,
    subject: grant.subject,
    clientId: client.clientId,
    resource: grant.resource,
    scopes,
    ttlMs: ctx.config.accessTokenTtlMs,
    grantId: grant.grantId,
    jkt,
  });
  await clients.touch(client);
  ctx.audit.record({
    event: 'token_issued',
    grant_type: grantType,
    sub: grant.subject,
    client_id: client.clientId,
    resource: grant.resource,
    scope: scopes.join(' '),
    refresh: refreshToken !== undefined,
    ...(enterpriseIdp !== undefined && { idp: enterpriseIdp }),
  });
  ctx.metrics.tokensIssued.labels(grantType).inc();
  return { access_token: token, token_type: jkt === undefined ? 'Bearer' : 'DPoP', expires_in: expiresIn, scope: scopes.join(' '), ...(refreshToken && { refresh_token: refreshToken }) };
}

/** The resolved value, or the 400 it was refused with (invalid_target, invalid_scope, invalid_grant). */
export function resolvedOrThrow<T>(resolved: Resolved<T>): T {
  if (!resolved.ok) throw new GatewayError(400, resolved.error, resolved.description);
  return resolved.value;
}

export const invalidGrant = (description: string): GatewayError => new GatewayError(400, 'invalid_grant', description);
