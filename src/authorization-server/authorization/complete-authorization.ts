// The end of a successful interaction: the signed-in user's own consent
// (given on the page in this flow, remembered for this user, or asked for now
// on a consent page of their own), then the code (bound to the client, the
// redirect URI, the PKCE challenge, the resource, the scopes and the user),
// and the redirect back with code, state and iss.
import type { Context } from 'hono';
import { userAccountUpstream, type AsContext } from '../context.js';
import { authorizationRedirectUrl } from './authorization-response.js';
import { redirect } from '../helpers/redirect.js';
import { BrowserBinding } from '../interactions/browser-binding.js';
import type { AuthorizationCodes, CodeRecord } from '../tokens/codes.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import { consentState, withConsent } from '../interactions/consent-state.js';
import { renderConsent } from '../pages/consent-page.js';
import { Interactions, type AuthorizationRequest, type Interaction } from '../interactions/interactions.js';
import type { AuthenticatedUser, LoginFailure } from '../login/login-method.js';
import { errorPage } from '../pages/respond-page.js';
import { randomToken } from '../helpers/secrets.js';
import { UserConsents } from '../interactions/user-consents.js';
import { isAccountSignIn } from '../interactions/account-sign-in.js';
import type { ClientRecord } from '../clients/client-record.js';
import type { ConnectedApps } from '../tokens/connected-apps.js';
import type { Grants } from '../tokens/grants.js';
import type { SignInShare } from '../tokens/sign-in-share.js';

export interface CompletionDeps {
  codes: AuthorizationCodes;
  clients: ClientRegistry;
  grants: Grants;
  /** Each user's share of sign-ins: what bounds the never-evicted markers a user's grants and codes leave (K72, K81). */
  signInShare: SignInShare;
  /** With `account.enabled`: the index of each user's apps and grants, for the connected-apps page. */
  apps?: ConnectedApps;
  /** user_oauth: a detour to the upstream AS before the code when the user has no grant there (connect-at-consent.ts). */
  connectFirst?: (c: Context, interaction: Interaction, user: AuthenticatedUser) => Promise<Response | undefined>;
}

export function createCompletion(ctx: AsContext, deps: CompletionDeps) {
  const userConsents = new UserConsents(ctx.store, ctx.issuer);
  // Stateless views of the same cookie secret and store the rest of the AS uses.
  const browser = new BrowserBinding(ctx.keys.cookieSecret);
  const interactions = new Interactions(ctx.store);

  async function complete(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response> {
    const { request } = interaction;
    // An account sign-in names no client: it never gets a code (index.ts sends it to the account page).
    if (isAccountSignIn(request)) throw new Error('an account sign-in reached the authorization completion');
    const state = consentState(request);
    if (state.consent !== 'page' && !(await userConsents.covers(user.subject, request))) {
      return askSignedInUser(c, interaction, user);
    }
    if (state.consent !== 'page') {
      ctx.audit.record({ event: 'consent', decision: 'allow', remembered: true, sub: user.subject, client_id: request.clientId, resource: request.resource, scope: request.scopes.join(' ') });
      ctx.metrics.consentDecisions.labels('remembered').inc();
    }
    const detour = deps.connectFirst && (await deps.connectFirst(c, interaction, user));
    if (detour) return detour;
    // A login paused for the consent page was bound to its grant before the page.
    // Counted before the grant exists: past the user's share, 429 for them alone, and nothing issued to revoke.
    await deps.signInShare.admit(user.subject);
    const grantId = state.signedIn?.grantId ?? randomToken(16);
    if (!state.signedIn) await user.bindToGrant?.(grantId);
    const lookup = await deps.clients.find(request.clientId);
    // Indexed before the code exists: no token of the grant can work while the page cannot revoke it.
    if (deps.apps && lookup.found) await recordApp(deps, deps.apps, { subject: user.subject, request, client: lookup.client, grantId });
    const code = await deps.codes.issue(codeRecord(request, user.subject, grantId));
    await userConsents.remember(user.subject, request);
    if (lookup.found) await deps.clients.touch(lookup.client);
    ctx.audit.record({ event: 'authorization_granted', sub: user.subject, client_id: request.clientId, resource: request.resource, scope: request.scopes.join(' ') });
    return redirect(c, authorizationRedirectUrl(request.redirectUri, { code }, request.state, ctx.issuer));
  }

  /**
   * This browser approved the request before, but not this user: the consent
   * page again, now for them. Their login is bound to a grant first (what a
   * third-party login holds cannot wait in the store as a closure); no code
   * exists until they approve.
   */
  async function askSignedInUser(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response> {
    const browserId = await browser.browserId(c);
    const lookup = await deps.clients.find(interaction.request.clientId);
    if (!browserId || !lookup.found) return errorPage(c, 400, 'Request expired', 'This authorization request can no longer be completed. Start again from your application.');
    const grantId = randomToken(16);
    await user.bindToGrant?.(grantId);
    const request = withConsent(interaction.request, { signedIn: { subject: user.subject, grantId } });
    const pending = await interactions.create('consent', request, browserId);
    return renderConsent(c, lookup.client, pending, browser.csrfToken(browserId, pending.id), userAccountUpstream(ctx, request.resource));
  }

  function fail(c: Context, interaction: Interaction, error: LoginFailure, description: string): Response {
    const { request } = interaction;
    return redirect(c, authorizationRedirectUrl(request.redirectUri, { error, description }, request.state, ctx.issuer));
  }

  return { complete, fail };
}

/** The app and its new grant in the user's index; a grant pushed out of its bounds is revoked, so none works unseen. */
async function recordApp(deps: CompletionDeps, apps: ConnectedApps, done: { subject: string; request: AuthorizationRequest; client: ClientRecord; grantId: string }): Promise<void> {
  const { subject, request, client, grantId } = done;
  const approval = { clientId: client.clientId, clientKind: client.kind, redirectUri: request.registeredRedirectUri, resource: request.resource, scopes: request.scopes, ...(client.clientName && { clientName: client.clientName }) };
  const pushedOut = await apps.record(subject, approval, grantId);
  for (const old of pushedOut) await deps.grants.revoke(old, 'superseded', { subject });
}

/** What the code is bound to: the client, the redirect URI, the PKCE challenge, the DPoP key (dpop_jkt), the resource, the scopes and the user, signed in now. */
function codeRecord(request: AuthorizationRequest, subject: string, grantId: string): CodeRecord {
  return {
    clientId: request.clientId,
    redirectUri: request.redirectUri,
    redirectUriSent: request.redirectUriSent,
    codeChallenge: request.codeChallenge,
    ...(request.dpopJkt !== undefined && { dpopJkt: request.dpopJkt }),
    resource: request.resource,
    scopes: request.scopes,
    subject,
    grantId,
    authTime: Math.floor(Date.now() / 1000),
  };
}
