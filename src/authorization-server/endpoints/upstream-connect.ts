// user_oauth's browser endpoints (DESIGN §8.1):
// - GET /account/connect?link=…: where a URL elicitation sends the user. The
//   browser signs in with the configured login first (an account session);
//   the link is then taken (single use) and connects only when the signed-in
//   user is the principal it was made for. Then off to the upstream AS.
// - GET each route's callback: the upstream AS's answer, redeemed for the
//   principal and browser the flow was started for; and each route's client
//   ID metadata document (the gateway's client_id where the AS takes them).
// - POST /account/apps/disconnect: the account page's form (same-site, CSRF
//   token, session of this browser); revokes upstream and deletes the grant.
import { Hono, type Context } from 'hono';
import { ACCOUNT_PATHS } from '../../config/reserved-paths.js';
import { endpointUrl, type AsContext } from '../context.js';
import { redirect } from '../helpers/redirect.js';
import { accountSignInRequest } from '../interactions/account-sign-in.js';
import type { AccountDeps } from './account-apps.js';
import { checkedForm } from './account-apps.js';
import { errorPage, guarded } from '../pages/respond-page.js';
import { renderUpstreamConnected } from '../pages/upstream-accounts-page.js';
import { ConnectCallbackRefused } from '../upstream-accounts/connect-flow.js';
import type { RouteAccount, UpstreamAccounts } from '../upstream-accounts/upstream-accounts.js';
import { DiscoveredUrlRefused } from '../upstream-accounts/discovery-guard.js';
import { UpstreamAsError } from '../upstream-accounts/upstream-server.js';

export type UpstreamConnectDeps = Pick<AccountDeps, 'sessions' | 'browser' | 'interactions' | 'pendingBudget' | 'login' | 'selfOrigin'> & { accounts: UpstreamAccounts };

export function upstreamConnectRoutes(ctx: AsContext, deps: UpstreamConnectDeps): Hono {
  const app = new Hono();
  app.get(ACCOUNT_PATHS.connect, (c) => guarded(c, () => connectPage(c, ctx, deps)));
  for (const route of deps.accounts.routes.values()) {
    app.get(route.callbackPath, (c) => guarded(c, () => callback(c, deps, route)));
    // Public, fetched by the upstream AS: the same for everyone, cacheable.
    app.get(route.clientDocument.path, (c) => c.json(route.clientDocument.body, 200, { 'cache-control': 'public, max-age=3600' }));
  }

  app.post(ACCOUNT_PATHS.disconnect, (c) =>
    guarded(c, async () => {
      const checked = await checkedForm(c, deps);
      if (checked instanceof Response) return checked;
      const owner = { issuer: ctx.issuer, subject: checked.session.subject, routePath: checked.form.get('route') ?? '' };
      // Looked up for the signed-in user only: another user's account is not found.
      if (!(await deps.accounts.disconnect(owner))) return errorPage(c, 404, 'Not found', 'This account is not connected (it may have been disconnected already).');
      return redirect(c, endpointUrl(ctx.issuer, ACCOUNT_PATHS.apps));
    }),
  );
  app.get(ACCOUNT_PATHS.disconnect, (c) => errorPage(c, 403, 'Not allowed', 'Accounts are disconnected with the buttons of the connected-apps page.'));
  return app;
}

async function connectPage(c: Context, ctx: AsContext, deps: UpstreamConnectDeps): Promise<Response> {
  const linkId = c.req.query('link') ?? '';
  const browserId = await deps.browser.ensureBrowserId(c);
  const session = await deps.sessions.current(c, browserId);
  if (!session) {
    const pageUrl = new URL(endpointUrl(ctx.issuer, ACCOUNT_PATHS.connect));
    pageUrl.searchParams.set('link', linkId);
    await deps.pendingBudget.admit(c);
    const interaction = await deps.interactions.create('login', accountSignInRequest(pageUrl.href), browserId);
    return deps.login.start(c, interaction, browserId);
  }
  const owner = await deps.accounts.links.take(linkId);
  if (!owner) return errorPage(c, 404, 'Link not valid', 'This link was used already or has expired. Use your application again: it will give you a new link.');
  if (owner.issuer !== ctx.issuer || owner.subject !== session.subject) {
    deps.accounts.events.record('connect_failed', owner, 'the link was opened by another user');
    return errorPage(c, 403, 'Not your link', 'This link was made for another account. Nothing was connected; the link can no longer be used.');
  }
  const route = deps.accounts.routes.get(owner.routePath);
  if (!route) return errorPage(c, 404, 'Not found', 'This MCP server no longer uses your own account.');
  try {
    return redirect(c, await route.flow.start(owner, browserId));
  } catch (err) {
    if (!(err instanceof UpstreamAsError)) throw err;
    deps.accounts.events.record('connect_failed', owner, err.message);
    if (err instanceof DiscoveredUrlRefused) return errorPage(c, 502, 'Cannot connect', `The MCP server names a sign-in this gateway does not reach: ${err.message}. Nothing was sent there.`);
    return errorPage(c, 502, 'Cannot connect', 'The MCP server\'s sign-in cannot be reached right now. Try again later.');
  }
}

async function callback(c: Context, deps: UpstreamConnectDeps, route: RouteAccount): Promise<Response> {
  try {
    const { owner, returnTo } = await route.flow.finish(new URL(c.req.url).searchParams, await deps.browser.browserId(c));
    deps.accounts.events.record('connected', owner);
    return returnTo ? redirect(c, returnTo) : renderUpstreamConnected(c, route.upstream);
  } catch (err) {
    if (err instanceof ConnectCallbackRefused) return errorPage(c, 403, 'Not allowed', 'This answer does not belong to a connection started in this browser. Nothing was connected.');
    if (!(err instanceof UpstreamAsError)) throw err;
    deps.accounts.events.record('connect_failed', err.after?.owner ?? { issuer: '', subject: '', routePath: route.routePath }, err.message);
    // An authorization that detoured here goes on to its client: the account is asked for again on first use.
    if (err.after?.returnTo) return redirect(c, err.after.returnTo);
    return errorPage(c, 502, 'Cannot connect', 'The MCP server\'s sign-in did not complete. Nothing was connected; try again from your application.');
  }
}
