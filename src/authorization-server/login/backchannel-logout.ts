// OpenID Connect Back-Channel Logout 1.0 receiver: the IdP POSTs a
// `logout_token` here when a user's session there ends, and every gateway
// grant that came through that session (or, for a token naming only `sub`,
// through that user) is revoked — refresh tokens at once, access tokens on
// every replica within 5 s (RevokedGrants). Operators register this URL at
// the IdP as the client's `backchannel_logout_uri` (with
// `backchannel_logout_session_required`, so ID tokens carry `sid`).
//
// Answers (§2.8): 200 when the token was valid (whether or not a grant was
// bound to it), 400 invalid_request for an invalid or replayed token, 503
// when the IdP's keys or the store cannot be reached (the IdP may retry).
// Always no-store; nothing is revoked unless the token verified.
import { Hono } from 'hono';
import { GatewayError, temporarilyUnavailable } from '../../errors/gateway-error.js';
import { errorResponse } from '../../errors/respond.js';
import { toGatewayError } from '../../errors/translate.js';
import type { Audit } from '../../observability/audit.js';
import type { Logger } from '../../observability/logger.js';
import { logoutTokenKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { Grants } from '../tokens/grants.js';
import { readForm } from '../helpers/request-body.js';
import type { IdpSessions } from './idp-sessions.js';
import { IdpRequestError, InvalidLogoutTokenError, LOGOUT_TOKEN_MAX_AGE_SECONDS, type OidcClient } from '../idp/oidc-client.js';

/** A jti is remembered as long as its token could still be accepted (max age plus skew). */
const JTI_TTL_MS = (LOGOUT_TOKEN_MAX_AGE_SECONDS + 60) * 1000;

export interface BackchannelLogoutDeps {
  client: OidcClient;
  sessions: IdpSessions;
  grants: Grants;
  store: Store;
  audit: Audit;
  logger: Logger;
}

export function backchannelLogoutRoutes(path: `/${string}`, deps: BackchannelLogoutDeps): Hono {
  const app = new Hono();
  app.post(path, async (c) => {
    try {
      const token = (await readForm(c.req.raw)).get('logout_token');
      if (!token) throw new GatewayError(400, 'invalid_request', 'logout_token is required');
      const logout = await verified(deps, token);
      const jtiKey = logoutTokenKey(logout.issuer, logout.jti);
      if ((await deps.store.get(jtiKey)) !== undefined) throw new GatewayError(400, 'invalid_request', 'The logout token was already used');
      const grantIds = await deps.sessions.grantsEndedBy(logout);
      let revoked = 0;
      for (const grantId of grantIds) {
        if (await deps.grants.isRevoked(grantId)) continue;
        await deps.grants.revoke(grantId, 'idp_session_ended');
        revoked++;
      }
      // Recorded only once every grant is revoked: a store failing above leaves the jti
      // free, so the IdP's retry of the same token finishes the job. Revoking is idempotent,
      // so two deliveries racing each other do no harm.
      await deps.store.set(jtiKey, '1', JTI_TTL_MS);
      deps.audit.record({ event: 'idp_logout', by: logout.sid !== undefined ? 'sid' : 'sub', grants_revoked: revoked });
      return c.body(null, 200, { 'cache-control': 'no-store' });
    } catch (err) {
      const error = toGatewayError(err, { storeUnavailable: 'The logout cannot be recorded now; try again' });
      if (error.status >= 500) deps.logger.warn({ err: error.cause instanceof Error ? error.cause.message : undefined }, 'back-channel logout failed');
      return errorResponse(error);
    }
  });
  return app;
}

async function verified(deps: BackchannelLogoutDeps, token: string) {
  try {
    return await deps.client.verifyLogoutToken(token);
  } catch (err) {
    if (err instanceof InvalidLogoutTokenError) {
      deps.logger.info({ reason: err.message }, 'back-channel logout: refused a logout token');
      throw new GatewayError(400, 'invalid_request', 'The logout token is not valid');
    }
    if (err instanceof IdpRequestError) throw temporarilyUnavailable('The identity provider cannot be reached to check the logout token', err);
    throw err;
  }
}
