/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// The consent step. The page (from /authorize) posts to /authorize/consent;
// only a same-site POST from the browser the interaction belongs to, with
// that browser's CSRF token for it, counts. A refused post changes nothing
// (the interaction stays, nothing is written); an accepted one consumes the
// interaction, remembers an approval, and hands over to the login — or, when
// the page was shown after the login (the browser had approved this request
// for another user), completes the authorization for the signed-in user.
import { Hono } from 'hono';
import type { AsContext } from '../context.js';
import { isCrossSitePost, type BrowserBinding } from '../interactions/browser-binding.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import type { ConsentMemory } from '../interactions/consent-memory.js';
import { consentState, withConsent } from '../interactions/consent-state.js';
import { belongsTo, type Interactions } from '../interactions/interactions.js';
import type { LoginMethod, LoginServices } from '../login/login-method.js';
import { CONSENT_PATH } from '../pages/consent-page.js';
import { errorPage, guarded } from '../pages/respond-page.js';
import { readPageForm } from '../helpers/request-body.js';

export interface ConsentDeps {
  clients: ClientRegistry;
  interactions: Interactions;
  browser: BrowserBinding;
  consents: ConsentMemory;
  login: LoginMethod;
  services: Pick<LoginServices, 'fail' | 'complete'>;
  selfOrigin: string;
}

export function consentRoutes(ctx: AsContext, deps: ConsentDeps): Hono {
  const app = new Hono();
  // Approval is never a GET (a link or an <img> must not approve anything).
  app.get(CONSENT_PATH, (c) => errorPage(c, 403, 'Not allowed', 'Consent is given with the buttons of the consent page.'));
  app.post(CONSENT_PATH, (c) =>
    guarded(c, async () => {
      if (isCrossSitePost(c, deps.selfOrigin)) return errorPage(c, 403, 'Not allowed', 'Consent must be given on this site.');
      const form = await readPageForm(c.req.raw);
      const interactionId = form.get('interaction') ?? '';
      const browserId = await deps.browser.browserId(c);
      if (!deps.browser.checkCsrf(browserId, interactionId, form.get('csrf') ?? undefined)) {
        return errorPage(c, 403, 'Not allowed', 'This consent form is not valid in this browser. Start again from your application.');
      }
      const decision = form.get('decision');
      if (decision !== 'approve' && decision !== 'deny') return errorPage(c, 400, 'Invalid request', 'Choose Approve or Deny.');
      const pending = await deps.interactions.peek(interactionId);
      if (!pending || pending.stage !== 'consent' || !belongsTo(pending, browserId)) {
        return errorPage(c, 400, 'Request expired', 'This authorization request has expired or was already answered. Start again from your application.');
      }
      const interaction = await deps.interactions.take(interactionId);
      if (!interaction) return errorPage(c, 400, 'Request expired', 'This authorization request was already answered.');
      const { request } = interaction;
      ctx.audit.record({ event: 'consent', decision: decision === 'approve' ? 'allow' : 'deny', client_id: request.clientId, resource: request.resource, scope: request.scopes.join(' ') });
      ctx.metrics.consentDecisions.labels(decision === 'approve' ? 'allow' : 'deny').inc();
      if (decision === 'deny') return deps.services.fail(c, interaction, 'access_denied', 'the user denied the request');
      await deps.consents.remember(c, browserId as string, request);
      const { signedIn } = consentState(request);
      if (signedIn) return deps.services.complete(c, { ...interaction, request: withConsent(request, { consent: 'page', signedIn }) }, { subject: signedIn.subject });
      const next = await deps.interactions.create('login', withConsent(request, { consent: 'page' }), browserId as string);
      return deps.login.start(c, next, browserId as string);
    }),
  );
  return app;
}
