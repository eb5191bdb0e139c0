// `login: { kind: oidc }`: users sign in at a third-party OpenID Connect IdP,
// where the gateway is one confidential client with its own static id (spec
// §4.7). The order is what defeats the confused deputy (spec §5.11): the
// gateway's own per-client consent comes first (authorize.ts / consent.tsx),
// and only then does `start` create the IdP request — a fresh interaction
// whose id is the IdP `state` (256 random bits, bound to the browser cookie,
// single use, ten minutes, in the store only as a hash); the PKCE verifier
// and nonce are derived from it under a server key, never stored. The callback
// refuses a missing, unknown, used, stale or foreign `state` with an error
// page (nothing reaches the client, nothing is issued); an IdP error goes back
// to the client as an authorization error with its `state` and `iss`.
//
// Identity: the gateway token's `sub` is the IdP's `sub`, unchanged. A
// gateway trusts exactly one IdP, so the pair (IdP issuer, sub) is fixed by
// configuration; the IdP issuer is recorded with the grant's IdP tokens and
// `idp_token` refuses grants from another issuer after `login.issuer` changes.
import { Hono, type Context } from 'hono';
import { endpointUrl, type AsContext } from '../context.js';
import { redirect } from '../helpers/redirect.js';
import { IdpAccessTokens } from '../idp/idp-access-tokens.js';
import { IdpTokenCipher } from '../idp/idp-token-cipher.js';
import { IdpTokenStore } from '../idp/idp-token-store.js';
import { belongsTo, INTERACTION_TTL_MS, type Interaction } from '../interactions/interactions.js';
import { guarded } from '../pages/respond-page.js';
import { backchannelLogoutRoutes } from './backchannel-logout.js';
import { IdpRequestSecretsDeriver } from './idp-request-secrets.js';
import { IdpSessions } from './idp-sessions.js';
import type { LoginFailure, LoginMethod, LoginMethodFactory, LoginServices } from './login-method.js';
import { IdpAuthorizationError, IdpRequestError, OidcClient, type IdpRequestSecrets, type IdpSignIn } from '../idp/oidc-client.js';

const LOGIN_METHOD = 'oidc';
/** OIDC Core §2: `sub` is at most 255 ASCII characters; it becomes the gateway token's `sub`. */
const IDP_SUBJECT = /^[\x20-\x7E]{1,255}$/;

export const oidcLogin: LoginMethodFactory = (ctx, services): LoginMethod => {
  const config = ctx.config.login;
  if (config.kind !== 'oidc') throw new Error('the oidc login needs authorization_server.login.kind: oidc');
  const callbackPath = `${services.basePath}/callback` as `/${string}`;
  const client = new OidcClient({
    issuer: config.issuer,
    clientId: config.clientId,
    clientSecret: config.clientSecret,
    scopes: config.scopes,
    redirectUri: endpointUrl(ctx.issuer, callbackPath),
  });
  const requestSecrets = new IdpRequestSecretsDeriver(ctx.keys.cookieSecret);
  const tokens = new IdpTokenStore(ctx.store, new IdpTokenCipher(ctx.keys.cookieSecret), ctx.config.refreshTokenTtlMs);
  // Refresh-token reuse, code replay, /revoke: the grant's IdP tokens go with it.
  services.grants.onRevoke((grantId) => tokens.delete(grantId));
  const idpTokens = new IdpAccessTokens({ issuer: ctx.issuer, store: ctx.store, tokens, client, grants: services.grants, logger: ctx.logger });
  // The gateway's refresh asks the IdP too: a grant ends with its IdP session (README, "Third-party login").
  services.grants.beforeRefresh((grant) => idpTokens.confirmSession(grant));
  const sessions = new IdpSessions(ctx.store, ctx.config.refreshTokenTtlMs);
  const logoutPath = `${services.basePath}/backchannel-logout` as `/${string}`;
  ctx.logger.info({ backchannel_logout_uri: endpointUrl(ctx.issuer, logoutPath) }, 'oidc login: register this back-channel logout URI at the identity provider');
  const deps: OidcLoginDeps = { ctx, services, client, requestSecrets, tokens, sessions };

  return {
    kind: LOGIN_METHOD,
    start: (c, interaction, browserId) => start(deps, c, interaction, browserId),
    routes() {
      const app = new Hono();
      app.get(callbackPath, (c) => guarded(c, () => callback(deps, c)));
      app.route('/', backchannelLogoutRoutes(logoutPath, { client, sessions, grants: services.grants, store: ctx.store, audit: ctx.audit, logger: ctx.logger }));
      return app;
    },
    idpTokens,
  };
};

/** What the two steps of the login share, built once by the factory. */
interface OidcLoginDeps {
  ctx: AsContext;
  services: LoginServices;
  client: OidcClient;
  requestSecrets: IdpRequestSecretsDeriver;
  tokens: IdpTokenStore;
  sessions: IdpSessions;
}

/** After consent: the consented interaction becomes the IdP request, and the browser goes to the IdP. */
async function start({ ctx, services, client, requestSecrets }: OidcLoginDeps, c: Context, interaction: Interaction, browserId: string): Promise<Response> {
  // A new id (the IdP `state`), its verifier and nonce derived from it.
  const consented = await services.interactions.take(interaction.id);
  if (!consented) return services.errorPage(c, 400, 'Request expired', 'This authorization request was already answered. Start again from your application.');
  const pending = await services.interactions.create('login', consented.request, browserId, { method: LOGIN_METHOD });
  const secrets = requestSecrets.for(pending.id);
  let url: URL;
  try {
    url = await client.authorizationUrl(pending.id, secrets);
  } catch (err) {
    await services.interactions.take(pending.id);
    ctx.logger.warn({ err: describe(err) }, 'oidc login: the identity provider cannot be reached');
    return services.fail(c, consented, 'temporarily_unavailable', 'the identity provider cannot be reached');
  }
  return redirect(c, url.href);
}

/** The IdP's answer: the interaction it belongs to, then the sign-in, then the code for the client. */
async function callback(deps: OidcLoginDeps, c: Context): Promise<Response> {
  const { ctx, services, tokens, sessions } = deps;
  const params = new URL(c.req.url).searchParams;
  const taken = await takeSignInInteraction(deps, c, params);
  if (taken instanceof Response) return taken;
  const { interaction, state } = taken;
  const signIn = await signInAtIdp(deps, c, params, interaction, state);
  if (signIn instanceof Response) return signIn;
  if (!IDP_SUBJECT.test(signIn.subject)) {
    ctx.logger.warn('oidc login: the ID token sub is not 1 to 255 printable ASCII characters');
    return services.fail(c, interaction, 'server_error', 'the identity provider returned an unusable user id');
  }
  ctx.audit.record({ event: 'idp_login', outcome: 'success', sub: signIn.subject, client_id: interaction.request.clientId });
  const { request } = interaction;
  return services.complete(c, interaction, {
    subject: signIn.subject,
    bindToGrant: async (grantId) => {
      await tokens.save(grantId, { idpIssuer: signIn.issuer, idpSubject: signIn.subject, subject: signIn.subject, clientId: request.clientId, ...signIn.tokens });
      await sessions.bind(grantId, signIn.issuer, signIn.subject, signIn.tokens.sid);
    },
  });
}

/** The one `state` names a login interaction of this method, fresh, started in this browser: taken (single use), or an error page. */
async function takeSignInInteraction({ services }: OidcLoginDeps, c: Context, params: URLSearchParams): Promise<{ interaction: Interaction; state: string } | Response> {
  const states = params.getAll('state');
  const state = states.length === 1 ? states[0] : undefined;
  if (!state) return services.errorPage(c, 400, 'Sign-in failed', 'The answer from the identity provider is not for a sign-in started here. Start again from your application.');
  const pending = await services.interactions.peek(state);
  if (!pending || pending.stage !== 'login' || pending.login?.method !== LOGIN_METHOD || Date.now() - pending.createdAt > INTERACTION_TTL_MS) {
    return services.errorPage(c, 400, 'Sign-in expired', 'This sign-in has expired or was already completed. Start again from your application.');
  }
  // Login CSRF: only the browser that approved the client may finish its sign-in.
  if (!belongsTo(pending, await services.browser.browserId(c))) {
    return services.errorPage(c, 403, 'Not allowed', 'This sign-in was started in another browser. Start again from your application.');
  }
  const interaction = await services.interactions.take(state);
  if (!interaction?.login) return services.errorPage(c, 400, 'Sign-in expired', 'This sign-in was already completed. Start again from your application.');
  return { interaction, state };
}

/** The authorization response checked (issuer, state) and the code redeemed at the IdP; a failure answers the client or shows an error page. */
async function signInAtIdp(deps: OidcLoginDeps, c: Context, params: URLSearchParams, interaction: Interaction, state: string): Promise<IdpSignIn | Response> {
  const { ctx, services, client } = deps;
  const secrets: IdpRequestSecrets = deps.requestSecrets.for(state);
  let validated: URLSearchParams;
  try {
    validated = await client.validateCallback(params, state);
  } catch (err) {
    if (err instanceof IdpAuthorizationError) {
      ctx.audit.record({ event: 'idp_login', outcome: 'error', error: err.error, client_id: interaction.request.clientId });
      return services.fail(c, interaction, ...clientError(err.error));
    }
    ctx.logger.warn({ err: describe(err) }, 'oidc login: refused an authorization response');
    if (err instanceof IdpRequestError) return services.fail(c, interaction, 'temporarily_unavailable', 'the identity provider cannot be reached');
    // A wrong or missing `iss` (mix-up), a repeated parameter: not an answer to our request.
    return services.errorPage(c, 400, 'Sign-in failed', 'The answer did not come from the expected identity provider. Start again from your application.');
  }
  try {
    return await client.redeem(validated, secrets);
  } catch (err) {
    ctx.logger.warn({ err: describe(err) }, 'oidc login: the identity provider did not complete the sign-in');
    const unreachable = err instanceof IdpRequestError && err.network;
    return services.fail(c, interaction, unreachable ? 'temporarily_unavailable' : 'server_error', 'the identity provider did not complete the sign-in');
  }
}

/** What the client is told for an IdP's authorization error: its own fixed words, never the IdP's. */
function clientError(idpError: string): [LoginFailure, string] {
  switch (idpError) {
    case 'access_denied':
    case 'login_required':
    case 'interaction_required':
    case 'consent_required':
    case 'account_selection_required':
      return ['access_denied', 'the user did not sign in at the identity provider'];
    case 'temporarily_unavailable':
      return ['temporarily_unavailable', 'the identity provider is temporarily unavailable'];
    default:
      return ['server_error', 'the identity provider refused the sign-in request'];
  }
}

/** For logs: name and message only (the client's errors never carry what the IdP sent). */
const describe = (err: unknown) => (err instanceof Error ? { name: err.name, message: err.message } : { message: String(err) });
