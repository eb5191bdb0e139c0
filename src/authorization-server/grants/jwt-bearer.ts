// grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer (RFC 7523 §2.1)
// with an Identity Assertion JWT Authorization Grant (ID-JAG): enterprise-
// managed authorization, where the enterprise IdP, not a consent page,
// decides which client may act for which user at which MCP server.
// idp/id-jag.ts checks the assertion itself; here it meets this request: the
// authenticated client must be the one it names (draft-04 §4.4.1), a
// configured confidential client (§8.1, client-grants), its resource one of
// this gateway's routes, its scopes cut to what the request, the route and
// the client allow, its DPoP key (if bound) the one proved, and its `jti`
// unused on every replica. No refresh token: the client asks its IdP for a
// new assertion instead (§4.4.3).
import { GatewayError } from '../../errors/gateway-error.js';
import { JWT_BEARER_GRANT_TYPE } from '../../config/schema.js';
import type { RouteConfig } from '../../config/types.js';
import { idJagKey } from '../../store/key-names.js';
import { mayUseGrant } from '../clients/client-grants.js';
import type { ClientRecord } from '../clients/client-record.js';
import { grantableScopes } from '../clients/resource-scope.js';
import type { AsContext } from '../context.js';
import { requiredParam } from '../helpers/request-body.js';
import { randomToken } from '../helpers/secrets.js';
import { ASSERTION_CLOCK_SKEW_SECONDS, invalidAssertion, verifyIdJag, type IdJag } from '../idp/id-jag.js';
import type { GrantInfo } from '../tokens/grants.js';
import { issueTokens, type GrantHandlerFactory } from './grant-handler.js';

export const jwtBearerGrant: GrantHandlerFactory = (ctx, deps) => async (client, params, { jkt, spend }) => {
  const assertion = requiredParam(params, 'assertion');
  if (!mayUseGrant(client, JWT_BEARER_GRANT_TYPE)) throw new GatewayError(400, 'unauthorized_client', 'This client may not present ID-JAG assertions (only configured confidential clients that list the jwt-bearer grant)');
  const idJag = await refusalsLogged(ctx, verifyIdJag(assertion, deps.enterpriseIdps, { audience: ctx.issuer }));
  if (idJag.clientId !== client.clientId) throw invalidAssertion('The assertion was issued to another client (client_id)');
  const route = assertedRoute(ctx, idJag, params.get('resource'));
  const scopes = grantedScopes(route, client, idJag, params.get('scope'));
  if (idJag.jkt !== undefined && idJag.jkt !== jkt) {
    throw invalidAssertion(jkt === undefined ? 'This assertion is bound to a DPoP key (cnf): send a DPoP proof' : 'The DPoP proof is not of the key this assertion is bound to');
  }
  const grant: GrantInfo = { grantId: randomToken(16), clientId: client.clientId, subject: tokenSubject(ctx, idJag), scopes, resource: route.resource };
  // Counted like a sign-in, before its proof or assertion is spent: past the user's share, 429 for them alone.
  await deps.signInShare?.admit(grant.subject);
  await spend(grant.subject);
  await spendOnce(ctx, idJag);
  return issueTokens(ctx, deps.clients, { grantType: JWT_BEARER_GRANT_TYPE, client, grant, scopes, jkt, enterpriseIdp: idJag.issuer });
};

/** An assertion refused is logged with the reason (never the assertion), for the operator wiring an IdP up. */
async function refusalsLogged(ctx: AsContext, verifying: Promise<IdJag>): Promise<IdJag> {
  try {
    return await verifying;
  } catch (err) {
    if (err instanceof GatewayError && err.code === 'invalid_grant') ctx.logger.info({ reason: err.description }, 'jwt-bearer grant: refused an ID-JAG');
    throw err;
  }
}

/**
 * The route the token is for: the assertion's `resource` (required here, so
 * a token is never for an MCP server the IdP did not name; MCP
 * enterprise-managed authorization §7.6), and the request's `resource`, if
 * sent, must be one of them (RFC 8707 §2).
 */
function assertedRoute(ctx: AsContext, idJag: IdJag, requested: string | undefined): RouteConfig {
  if (idJag.resources.length === 0) throw invalidAssertion('The assertion names no resource');
  let resource: string;
  if (requested !== undefined && requested !== '') {
    if (!idJag.resources.includes(requested)) throw new GatewayError(400, 'invalid_target', 'resource is not one the assertion names');
    resource = requested;
  } else if (idJag.resources.length === 1) {
    resource = idJag.resources[0] as string;
  } else {
    throw new GatewayError(400, 'invalid_target', 'resource is required: the assertion names several');
  }
  const route = ctx.resources.get(resource);
  if (!route) throw invalidAssertion('The assertion\'s resource is not an MCP server of this gateway');
  return route;
}

/** What the IdP asserted, narrowed by the request's `scope` if any, of what the route knows and the client may have (RFC 6749 §3.3). */
function grantedScopes(route: RouteConfig, client: ClientRecord, idJag: IdJag, requested: string | undefined): string[] {
  const asked = requested?.split(' ').filter((s) => s !== '') ?? [];
  const wanted = asked.length === 0 ? idJag.scopes : idJag.scopes.filter((scope) => asked.includes(scope));
  const scopes = grantableScopes(route, client, wanted);
  if (scopes.length === 0) throw new GatewayError(400, 'invalid_scope', 'No scope is left: the assertion, the request and what this client may have at this MCP server share none');
  return scopes;
}

/** The `jti` claimed in the store until the assertion expires (with the skew): a second redemption, on any replica, is refused. */
async function spendOnce(ctx: AsContext, idJag: IdJag): Promise<void> {
  const ttlMs = Math.max(1, idJag.expiresAt + ASSERTION_CLOCK_SKEW_SECONDS - Math.floor(Date.now() / 1000)) * 1000;
  if (!(await ctx.store.setIfAbsent(idJagKey(idJag.issuer, idJag.jti), '1', ttlMs))) throw invalidAssertion('The assertion was already used');
}

/**
 * The access token's `sub`. The IdP the users sign in with (`login.kind:
 * oidc`, same issuer, users named by `sub`) names the same users (draft
 * §3.1: the subject of SSO), so its subjects stay as they are; any other
 * IdP's are `<issuer>#<sub>`, so an enterprise subject never names a user of
 * another IdP (in `allow_subjects`, sessions, rate limits). An issuer has no
 * `#`. A login whose `subject_claim` is another claim (Entra's `oid`) names
 * its users by that claim, which the assertion's `sub` is not: namespaced too.
 */
export function tokenSubject(ctx: Pick<AsContext, 'config'>, idJag: Pick<IdJag, 'issuer' | 'subject'>): string {
  const login = ctx.config.login;
  const sameUsers = login.kind === 'oidc' && login.issuer === idJag.issuer && login.subjectClaim === 'sub';
  return sameUsers ? idJag.subject : `${idJag.issuer}#${idJag.subject}`;
}
