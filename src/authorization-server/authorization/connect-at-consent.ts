// user_oauth, connecting at consent (DESIGN §8.1): when the route of the
// request's resource wants the user's own upstream account and the user has
// no grant there, the authorization detours through the upstream AS before the
// code exists. The approved, signed-in request waits as an interaction at
// stage `connect`, bound to the browser; the upstream AS's callback sends the
// browser back to CONNECTED_RESUME_PATH, which completes it (code and the
// client's redirect), whether the connection succeeded or not: a user who
// declines upstream still gets the app, and is asked again on first use.
import type { Context } from 'hono';
import { CONNECTED_RESUME_PATH } from '../../config/reserved-paths.js';
import { endpointUrl, type AsContext } from '../context.js';
import { redirect } from '../helpers/redirect.js';
import { randomToken } from '../helpers/secrets.js';
import type { BrowserBinding } from '../interactions/browser-binding.js';
import { consentState, withConsent } from '../interactions/consent-state.js';
import { belongsTo, type Interaction, type Interactions } from '../interactions/interactions.js';
import type { AuthenticatedUser } from '../login/login-method.js';
import { errorPage } from '../pages/respond-page.js';
import type { UpstreamAccounts } from '../upstream-accounts/upstream-accounts.js';
import { UpstreamAsError } from '../upstream-accounts/upstream-server.js';

export interface ConnectAtConsentDeps {
  accounts: UpstreamAccounts;
  interactions: Interactions;
  browser: BrowserBinding;
}

/** CompletionDeps.connectFirst: the redirect to the upstream AS, or undefined to issue the code now. */
export function connectAtConsent(ctx: AsContext, deps: ConnectAtConsentDeps) {
  return async function connectFirst(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response | undefined> {
    const { request } = interaction;
    const state = consentState(request);
    const route = ctx.resources.get(request.resource);
    const account = route && deps.accounts.routes.get(route.path);
    if (state.upstreamChecked || !route || !account) return undefined;
    const owner = { issuer: ctx.issuer, subject: user.subject, routePath: route.path };
    const browserId = await deps.browser.browserId(c);
    if (!browserId || (await deps.accounts.grants.load(owner))) return undefined;
    // Bound to its grant now, as before a consent page: what a third-party login holds cannot wait as a closure.
    const grantId = state.signedIn?.grantId ?? randomToken(16);
    if (!state.signedIn) await user.bindToGrant?.(grantId);
    const waiting = await deps.interactions.create('connect', { ...withConsent(request, { consent: state.consent, signedIn: { subject: user.subject, grantId } }), upstreamChecked: true } as typeof request, browserId);
    const resume = new URL(endpointUrl(ctx.issuer, CONNECTED_RESUME_PATH));
    resume.searchParams.set('interaction', waiting.id);
    try {
      return redirect(c, await account.flow.start(owner, browserId, resume.href));
    } catch (err) {
      if (!(err instanceof UpstreamAsError)) throw err;
      deps.accounts.events.record('connect_failed', owner, err.message);
      return redirect(c, resume.href);
    }
  };
}

/** GET CONNECTED_RESUME_PATH: the waiting authorization of this browser, completed (code, redirect to the client). */
export function resumeAfterConnect(deps: Pick<ConnectAtConsentDeps, 'interactions' | 'browser'>, complete: (c: Context, interaction: Interaction, user: AuthenticatedUser) => Promise<Response> | Response) {
  return async function resume(c: Context): Promise<Response> {
    const interaction = await deps.interactions.take(c.req.query('interaction') ?? '');
    const signedIn = interaction && consentState(interaction.request).signedIn;
    if (!interaction || interaction.stage !== 'connect' || !signedIn || !belongsTo(interaction, await deps.browser.browserId(c))) {
      return errorPage(c, 400, 'Request expired', 'This authorization request can no longer be completed. Start again from your application.');
    }
    return complete(c, interaction, { subject: signedIn.subject });
  };
}
