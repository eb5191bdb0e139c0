// /account/apps (`account.enabled`): the connected-apps page. A browser
// without a session is signed in through the configured login method (the
// same interaction flow as an authorization, marked as an account sign-in:
// interactions/account-sign-in.ts); its `complete` lands in `signedIn` here,
// which starts an account session and shows the page.
//
// Revoke and sign-out are POST forms with the consent page's protections: a
// same-site post only (Fetch metadata / Origin), the session's CSRF token
// (bound to the browser cookie and the session), the session itself bound to
// that browser. A revoke names a client id; only the signed-in user's own
// apps are looked up, so another user's id finds nothing (404) and changes
// nothing. Revoking ends every grant of the app (its refresh tokens refused,
// its IdP tokens deleted by the login's revocation listener, its access
// tokens refused on every replica within 5 s through the revocation log) and
// forgets the user's consent, so the app must ask again.
import { Hono, type Context } from 'hono';
import { ACCOUNT_PATHS } from '../../config/reserved-paths.js';
import { endpointUrl, type AsContext } from '../context.js';
import { redirect } from '../helpers/redirect.js';
import { readPageForm } from '../helpers/request-body.js';
import type { AccountSession, AccountSessions } from '../interactions/account-sessions.js';
import { accountSignInRequest } from '../interactions/account-sign-in.js';
import { belongsTo, type Interaction, type Interactions } from '../interactions/interactions.js';
import type { PendingAuthorizationBudget } from '../interactions/pending-authorization-budget.js';
import { isCrossSitePost, type BrowserBinding } from '../interactions/browser-binding.js';
import type { UserConsents } from '../interactions/user-consents.js';
import type { AuthenticatedUser, LoginMethod } from '../login/login-method.js';
import { renderConnectedApps, renderSignedOut } from '../pages/connected-apps-page.js';
import { errorPage, guarded } from '../pages/respond-page.js';
import type { ConnectedApps } from '../tokens/connected-apps.js';
import type { Grants } from '../tokens/grants.js';
import type { UpstreamAccounts } from '../upstream-accounts/upstream-accounts.js';

export interface AccountDeps {
  apps: ConnectedApps;
  sessions: AccountSessions;
  browser: BrowserBinding;
  interactions: Interactions;
  /** Spent only by a signed-out visit, which starts a sign-in (issue 26). */
  pendingBudget: PendingAuthorizationBudget;
  userConsents: UserConsents;
  grants: Grants;
  login: LoginMethod;
  selfOrigin: string;
  /** user_oauth routes: the user's upstream accounts, listed with the apps. */
  upstreamAccounts?: UpstreamAccounts;
}

export function accountRoutes(ctx: AsContext, deps: AccountDeps): Hono {
  const app = new Hono();

  app.get(ACCOUNT_PATHS.apps, (c) =>
    guarded(c, async () => {
      const browserId = await deps.browser.ensureBrowserId(c);
      const session = await deps.sessions.current(c, browserId);
      if (!session) {
        await deps.pendingBudget.admit(c);
        const interaction = await deps.interactions.create('login', accountSignInRequest(endpointUrl(ctx.issuer, ACCOUNT_PATHS.apps)), browserId);
        return deps.login.start(c, interaction, browserId);
      }
      const apps = await deps.apps.list(session.subject);
      const upstreamAccounts = await deps.upstreamAccounts?.list(session.subject);
      return renderConnectedApps(c, { subject: session.subject, apps, upstreamAccounts, csrfToken: deps.sessions.csrfToken(browserId, session) });
    }),
  );

  app.post(ACCOUNT_PATHS.revoke, (c) =>
    guarded(c, async () => {
      const checked = await checkedForm(c, deps);
      if (checked instanceof Response) return checked;
      const { form, session } = checked;
      const clientId = form.get('client_id') ?? '';
      // Looked up among this user's apps only: another user's client id is not found here.
      const found = clientId === '' ? undefined : await deps.apps.find(session.subject, clientId);
      if (!found) return errorPage(c, 404, 'Not found', 'This application is not among your connected apps (it may have been revoked already).');
      // Revoked before they leave the index: a store failing half-way leaves the rest listed, to revoke again.
      for (const grantId of found.grants) await deps.grants.revoke(grantId, 'revoked_by_user', { subject: session.subject, clientId });
      await deps.userConsents.forget(session.subject, clientId);
      await deps.apps.removeGrants(session.subject, clientId, found.grants);
      ctx.audit.record({ event: 'connected_app_revoked', sub: session.subject, client_id: clientId, grants: found.grants.length });
      return redirect(c, endpointUrl(ctx.issuer, ACCOUNT_PATHS.apps));
    }),
  );

  app.post(ACCOUNT_PATHS.signOut, (c) =>
    guarded(c, async () => {
      const checked = await checkedForm(c, deps);
      if (checked instanceof Response) return checked;
      await deps.sessions.end(c, checked.session);
      ctx.audit.record({ event: 'account_sign_out', sub: checked.session.subject });
      return renderSignedOut(c);
    }),
  );

  app.get(ACCOUNT_PATHS.revoke, (c) => errorPage(c, 403, 'Not allowed', 'Apps are revoked with the buttons of the connected-apps page.'));
  app.get(ACCOUNT_PATHS.signOut, (c) => errorPage(c, 403, 'Not allowed', 'Sign out with the button of the connected-apps page.'));
  return app;
}

/** A form post of the page: same-site, from a signed-in session of this browser, with its CSRF token; or the page refusing it. */
export async function checkedForm(c: Context, deps: Pick<AccountDeps, 'selfOrigin' | 'browser' | 'sessions'>): Promise<{ form: URLSearchParams; session: AccountSession } | Response> {
  if (isCrossSitePost(c, deps.selfOrigin)) return errorPage(c, 403, 'Not allowed', 'This form must be sent from this site.');
  const form = await readPageForm(c.req.raw);
  const browserId = await deps.browser.browserId(c);
  const session = await deps.sessions.current(c, browserId);
  if (!session) return errorPage(c, 403, 'Not signed in', 'Your session has ended. Open the connected-apps page again to sign in.');
  if (!deps.sessions.checkCsrf(browserId, session, form.get('csrf') ?? undefined)) {
    return errorPage(c, 403, 'Not allowed', 'This form is not valid in this browser. Open the connected-apps page again.');
  }
  return { form, session };
}

/**
 * Where the login method's `complete` and `fail` go for an account sign-in
 * (index.ts routes them here): a session for the signed-in user and the page;
 * never a code, never a redirect anywhere but this origin.
 */
export function accountSignIn(ctx: AsContext, deps: Pick<AccountDeps, 'sessions' | 'browser'>) {
  async function signedIn(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response> {
    const browserId = await deps.browser.browserId(c);
    if (!browserId || !belongsTo(interaction, browserId)) {
      return errorPage(c, 403, 'Not allowed', 'This sign-in was started in another browser. Open the connected-apps page again.');
    }
    await deps.sessions.start(c, user.subject, browserId);
    ctx.audit.record({ event: 'account_sign_in', sub: user.subject });
    return redirect(c, accountPageOf(ctx.issuer, interaction.request.redirectUri));
  }

  function failed(c: Context): Promise<Response> {
    return errorPage(c, 400, 'Sign-in failed', 'You were not signed in. Open the connected-apps page to try again.');
  }

  return { signedIn, failed };
}

/** Where a sign-in goes back to: the account page it started from (the apps, or a connect link), never elsewhere. */
function accountPageOf(issuer: string, started: string): string {
  const apps = endpointUrl(issuer, ACCOUNT_PATHS.apps);
  const connect = endpointUrl(issuer, ACCOUNT_PATHS.connect);
  return started === apps || started.startsWith(`${connect}?`) ? started : apps;
}
