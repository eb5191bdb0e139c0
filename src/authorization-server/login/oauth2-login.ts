// `login: { kind: oauth2 }`: users sign in at an IdP that speaks OAuth 2.0
// but no OpenID Connect (GitHub). As the oidc login: the gateway's own
// per-client consent first, then the IdP (idp-round-trip.ts: the interaction
// id is the `state`, the PKCE verifier derived from it, never stored); the
// user is whoever the IdP's user endpoint says the access token belongs to,
// and the gateway token's `sub` is that answer's `subject_claim` (GitHub:
// `id`, a number made a string; never `login`, which its user may change).
//
// What the oidc login adds does not apply: there is no ID token, so no nonce,
// no IdP session to follow (no back-channel logout, no IdP refresh at the
// gateway's refresh), and the IdP's access token is not kept (no
// `upstream_auth: idp_token`). A grant lives as the gateway's own tokens do.
// An IdP error (access_denied, …) goes back to the client as the oidc login's
// do; a failed code exchange, user endpoint or user id is an error page.
import { Hono, type Context } from 'hono';
import type { OAuth2LoginConfig } from '../../config/types.js';
import { endpointUrl, type AsContext } from '../context.js';
import { OAuth2Client } from '../idp/oauth2-client.js';
import { IdpAuthorizationError, IdpRequestError } from '../idp/oidc-client.js';
import type { Interaction } from '../interactions/interactions.js';
import { guarded } from '../pages/respond-page.js';
import { clientError, describeError, machineSubjects, redirectToIdp, takeSignInInteraction, userIdFrom } from './idp-round-trip.js';
import { IdpRequestSecretsDeriver } from './idp-request-secrets.js';
import type { LoginMethod, LoginMethodFactory, LoginServices } from './login-method.js';

const LOGIN_METHOD = 'oauth2';

interface OAuth2LoginDeps {
  ctx: AsContext;
  config: OAuth2LoginConfig;
  services: LoginServices;
  client: OAuth2Client;
  requestSecrets: IdpRequestSecretsDeriver;
}

export const oauth2Login: LoginMethodFactory = (ctx, services): LoginMethod => {
  const config = ctx.config.login;
  if (config.kind !== 'oauth2') throw new Error('the oauth2 login needs authorization_server.login.kind: oauth2');
  const callbackPath = `${services.basePath}/callback` as `/${string}`;
  const client = new OAuth2Client({ ...config, redirectUri: endpointUrl(ctx.issuer, callbackPath) });
  const deps: OAuth2LoginDeps = { ctx, config, services, client, requestSecrets: new IdpRequestSecretsDeriver(ctx.keys.cookieSecret) };
  return {
    kind: LOGIN_METHOD,
    start: (c, interaction, browserId) =>
      redirectToIdp(services, ctx.logger, c, interaction, browserId, LOGIN_METHOD, (state) => client.authorizationUrl(state, deps.requestSecrets.for(state).codeVerifier)),
    routes() {
      const app = new Hono();
      app.get(callbackPath, (c) => guarded(c, () => callback(deps, c)));
      return app;
    },
  };
};

/** The IdP's answer: the interaction it belongs to, the code redeemed, the user read, then the code for the client. */
async function callback(deps: OAuth2LoginDeps, c: Context): Promise<Response> {
  const { ctx, config, services } = deps;
  const params = new URL(c.req.url).searchParams;
  const taken = await takeSignInInteraction(services, c, params, LOGIN_METHOD);
  if (taken instanceof Response) return taken;
  const { interaction, state } = taken;
  const user = await userAtIdp(deps, c, params, interaction, state);
  if (user instanceof Response) return user;
  const subject = userIdFrom(user, config.subjectClaim, true, machineSubjects(ctx.config));
  if (subject === undefined) {
    ctx.logger.warn({ subject_claim: config.subjectClaim }, 'oauth2 login: the user endpoint named no usable user id (a string of 1 to 255 printable ASCII characters, or a non-negative integer)');
    return signInFailed(deps, c, interaction, 'no_subject', 'The identity provider did not say who you are in a way this gateway can use. Tell the gateway’s administrator (login.subject_claim).');
  }
  ctx.audit.record({ event: 'idp_login', outcome: 'success', sub: subject, client_id: interaction.request.clientId });
  return services.complete(c, interaction, { subject });
}

/** The callback checked (state, iss), the code redeemed and the user endpoint read; a failure answers the client or shows an error page. */
async function userAtIdp(deps: OAuth2LoginDeps, c: Context, params: URLSearchParams, interaction: Interaction, state: string): Promise<Record<string, unknown> | Response> {
  const { ctx, services, client } = deps;
  let validated: URLSearchParams;
  try {
    validated = client.validateCallback(params, state);
  } catch (err) {
    if (err instanceof IdpAuthorizationError) {
      ctx.audit.record({ event: 'idp_login', outcome: 'error', error: err.error, client_id: interaction.request.clientId });
      return services.fail(c, interaction, ...clientError(err.error));
    }
    ctx.logger.warn({ err: describeError(err) }, 'oauth2 login: refused an authorization response');
    return services.errorPage(c, 400, 'Sign-in failed', 'The answer did not come from the expected identity provider. Start again from your application.');
  }
  try {
    return await client.user(validated, deps.requestSecrets.for(state).codeVerifier);
  } catch (err) {
    ctx.logger.warn({ err: describeError(err) }, 'oauth2 login: the identity provider did not complete the sign-in');
    if (err instanceof IdpRequestError && err.network) {
      ctx.audit.record({ event: 'idp_login', outcome: 'error', error: 'unreachable', client_id: interaction.request.clientId });
      return services.errorPage(c, 503, 'Temporarily unavailable', 'The identity provider cannot be reached. Try again in a moment, from your application.');
    }
    return signInFailed(deps, c, interaction, 'idp_error', 'The identity provider did not complete the sign-in. Start again from your application; if it fails again, tell the gateway’s administrator.');
  }
}

function signInFailed({ ctx, services }: OAuth2LoginDeps, c: Context, interaction: Interaction, error: string, message: string): Promise<Response> {
  ctx.audit.record({ event: 'idp_login', outcome: 'error', error, client_id: interaction.request.clientId });
  return services.errorPage(c, 502, 'Sign-in failed', message);
}
