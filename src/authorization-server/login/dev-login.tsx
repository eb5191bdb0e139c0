/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// `login: { kind: dev }`: anyone signs in as any name. Only for a gateway on a
// loopback public URL (refused at configuration otherwise): the demo and tests.
import { Hono, type Context } from 'hono';
import { Layout } from '../pages/layout.js';
import { PAGE_HEADERS } from '../pages/security-headers.js';
import { isCrossSitePost } from '../interactions/browser-binding.js';
import { belongsTo, type Interaction } from '../interactions/interactions.js';
import { readPageForm } from '../helpers/request-body.js';
import type { LoginMethod, LoginMethodFactory } from './login-method.js';

/** What a dev user name may be: the token's `sub`, so printable and short. */
const USER_NAME = /^[\x21-\x7E]{1,64}$/;

function DevLoginPage(props: { action: string; interactionId: string; csrfToken: string; error?: string }) {
  return (
    <Layout title="Sign in (development)">
      <h1>Sign in</h1>
      <p class="note">Development login: any user name is accepted. This page exists only on a gateway reachable from this machine.</p>
      {props.error ? <p class="error">{props.error}</p> : null}
      <form method="post" action={props.action}>
        <input type="hidden" name="interaction" value={props.interactionId} />
        <input type="hidden" name="csrf" value={props.csrfToken} />
        <input type="text" name="username" placeholder="user name" autocomplete="username" required maxlength={64} autofocus />
        <button class="primary" type="submit">
          Sign in
        </button>
      </form>
    </Layout>
  );
}

export const devLogin: LoginMethodFactory = (_ctx, services): LoginMethod => {
  const action = services.basePath;

  async function page(c: Context, interaction: Interaction, browserId: string, error?: string, status: 200 | 400 = 200) {
    const csrfToken = services.browser.csrfToken(browserId, interaction.id);
    return c.html(<DevLoginPage action={action} interactionId={interaction.id} csrfToken={csrfToken} error={error} />, status, PAGE_HEADERS);
  }

  return {
    kind: 'dev',
    start: (c, interaction, browserId) => page(c, interaction, browserId),
    routes() {
      const app = new Hono();
      app.get(action, (c) => services.errorPage(c, 403, 'Not allowed', 'Sign in through the form.'));
      app.post(action, async (c) => {
        if (isCrossSitePost(c, services.selfOrigin)) return services.errorPage(c, 403, 'Not allowed', 'This form must be sent from this site.');
        const form = await readPageForm(c.req.raw);
        const interactionId = form.get('interaction') ?? '';
        const browserId = await services.browser.browserId(c);
        if (!services.browser.checkCsrf(browserId, interactionId, form.get('csrf') ?? undefined)) {
          return services.errorPage(c, 403, 'Not allowed', 'This sign-in form is not valid in this browser. Start again from your application.');
        }
        const pending = await services.interactions.peek(interactionId);
        if (!pending || pending.stage !== 'login' || !belongsTo(pending, browserId)) {
          return services.errorPage(c, 400, 'Sign-in expired', 'This sign-in request has expired or was already used. Start again from your application.');
        }
        const username = (form.get('username') ?? '').trim();
        if (!USER_NAME.test(username)) return page(c, pending, browserId as string, 'A user name is 1 to 64 printable characters without spaces.', 400);
        // Single use: of two submissions only one gets the interaction.
        const interaction = await services.interactions.take(interactionId);
        if (!interaction) return services.errorPage(c, 400, 'Sign-in expired', 'This sign-in request was already used. Start again from your application.');
        return services.complete(c, interaction, { subject: username });
      });
      return app;
    },
  };
};
