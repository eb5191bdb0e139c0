// /authorize (GET, or POST with a form): validates the request, keeps it
// server-side, and moves the browser on — to the consent page, or, when this
// browser already approved exactly this (client, redirect URI, resource,
// scopes), straight to the login; the user who then signs in must have
// approved it themselves, or sees a consent page of their own
// (complete-authorization).
import { Hono, type Context } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { userAccountUpstream, type AsContext } from '../context.js';
import { validateAuthorizationRequest } from '../authorization/authorization-request.js';
import { authorizationRedirectUrl } from '../authorization/authorization-response.js';
import type { BrowserBinding } from '../interactions/browser-binding.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import { redirect } from '../helpers/redirect.js';
import type { ConsentMemory } from '../interactions/consent-memory.js';
import { withConsent } from '../interactions/consent-state.js';
import { renderConsent } from '../pages/consent-page.js';
import type { Interactions } from '../interactions/interactions.js';
import type { PendingAuthorizationBudget } from '../interactions/pending-authorization-budget.js';
import type { LoginMethod } from '../login/login-method.js';
import { errorPage, guarded } from '../pages/respond-page.js';
import { readPageForm } from '../helpers/request-body.js';

export interface AuthorizeDeps {
  clients: ClientRegistry;
  interactions: Interactions;
  /** Spent only here, once the request is validated: garbage spends nothing (issue 26). */
  pendingBudget: PendingAuthorizationBudget;
  browser: BrowserBinding;
  consents: ConsentMemory;
  login: LoginMethod;
}

export function authorizeRoutes(ctx: AsContext, deps: AuthorizeDeps): Hono {
  const app = new Hono();

  async function authorize(c: Context, search: URLSearchParams): Promise<Response> {
    const validated = await validateAuthorizationRequest(ctx, deps.clients, search);
    if (validated.outcome === 'page') return errorPage(c, 400, validated.title, validated.message);
    if (validated.outcome === 'redirect') {
      const { redirectUri, state, error, description } = validated;
      return redirect(c, authorizationRedirectUrl(redirectUri, { error, description }, state, ctx.issuer));
    }
    const { client, request, forceConsent } = validated;
    await deps.pendingBudget.admit(c);
    const browserId = await deps.browser.ensureBrowserId(c);
    if (!forceConsent && (await deps.consents.covers(c, browserId, request))) {
      // Counted as remembered once the signed-in user is known to have approved it.
      const interaction = await deps.interactions.create('login', withConsent(request, { consent: 'browser' }), browserId);
      return deps.login.start(c, interaction, browserId);
    }
    const interaction = await deps.interactions.create('consent', request, browserId);
    return renderConsent(c, client, interaction, deps.browser.csrfToken(browserId, interaction.id), userAccountUpstream(ctx, request.resource));
  }

  app.get(AS_ENDPOINTS.authorize, (c) => guarded(c, () => authorize(c, new URL(c.req.url).searchParams)));
  app.post(AS_ENDPOINTS.authorize, (c) =>
    guarded(c, async () => {
      const type = c.req.header('content-type')?.split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/x-www-form-urlencoded') return errorPage(c, 400, 'Invalid request', 'An authorization request sent by POST must be a form.');
      return authorize(c, await readPageForm(c.req.raw));
    }),
  );
  return app;
}
