// The end of a successful interaction: the code (bound to the client, the
// redirect URI, the PKCE challenge, the resource, the scopes and the user),
// the user's consent recorded, and the redirect back with code, state and iss.
import type { Context } from 'hono';
import { consentKey } from '../store/keys.js';
import type { AsContext } from './context.js';
import { authorizationRedirectUrl } from './authorization-response.js';
import type { AuthorizationCodes } from './codes.js';
import type { ClientRegistry } from './clients.js';
import type { Interaction } from './interactions.js';
import type { AuthenticatedUser, LoginFailure } from './login/login-method.js';
import { randomToken } from './secrets.js';

/** How long a user's consent record (for a future "connected apps" page) lives unused. */
const CONSENT_RECORD_TTL_MS = 30 * 24 * 3600_000;

export interface CompletionDeps {
  codes: AuthorizationCodes;
  clients: ClientRegistry;
}

export function createCompletion(ctx: AsContext, deps: CompletionDeps) {
  async function complete(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response> {
    const { request } = interaction;
    const grantId = randomToken(16);
    await user.bindToGrant?.(grantId);
    const code = await deps.codes.issue({
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      redirectUriSent: request.redirectUriSent,
      codeChallenge: request.codeChallenge,
      resource: request.resource,
      scopes: request.scopes,
      subject: user.subject,
      grantId,
      authTime: Math.floor(Date.now() / 1000),
    });
    await ctx.store.set(
      consentKey(ctx.issuer, user.subject, request.clientId),
      JSON.stringify({ redirectUri: request.registeredRedirectUri, resource: request.resource, scopes: request.scopes, at: Date.now() }),
      CONSENT_RECORD_TTL_MS,
    );
    const lookup = await deps.clients.find(request.clientId);
    if (lookup.found) await deps.clients.touch(lookup.client);
    ctx.audit.record({ event: 'authorization_granted', sub: user.subject, client_id: request.clientId, resource: request.resource, scope: request.scopes.join(' ') });
    return redirect(c, authorizationRedirectUrl(request.redirectUri, { code }, request.state, ctx.issuer));
  }

  function fail(c: Context, interaction: Interaction, error: LoginFailure, description: string): Response {
    const { request } = interaction;
    return redirect(c, authorizationRedirectUrl(request.redirectUri, { error, description }, request.state, ctx.issuer));
  }

  return { complete, fail };
}

/** 303 after a form post (302 after a GET): the browser follows with a GET; the code is never cached or sent as a referrer. */
export function redirect(c: Context, location: string): Response {
  c.header('cache-control', 'no-store');
  c.header('referrer-policy', 'no-referrer');
  return c.redirect(location, c.req.method === 'POST' ? 303 : 302);
}
