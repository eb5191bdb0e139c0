// `login: { kind: oidc }`: users sign in at a third-party OpenID Connect IdP,
// where the gateway is one confidential client with its own static id (spec
// §4.7). The order is what defeats the confused deputy (spec §5.11): the
// gateway's own per-client consent comes first (authorize.ts / consent.tsx),
// and only then does `start` create the IdP request (idp-round-trip.ts: the
// interaction id is the IdP `state`); the PKCE verifier and nonce are derived
// from it under a server key, never stored. An IdP error goes back to the
// client as an authorization error with its `state` and `iss`, except what only
// the operator can fix (an IdP refusing `resource`, an unusable user id): an
// error page that says so.
//
// Identity: the gateway token's `sub` is the ID token's `subject_claim`
// (default `sub`; Entra ID: `oid`). A gateway trusts exactly one IdP, so the
// pair (IdP issuer, user id) is fixed by configuration; the IdP issuer is
// recorded with the grant's IdP tokens and `idp_token` refuses grants from
// another issuer after `login.issuer` changes. What the IdP itself names the
// user by stays the ID token's `sub`: back-channel logout tokens and refreshed
// ID tokens carry it, so the grant's IdP session is indexed by it, while the
// connected-apps page and the grant use the gateway's `sub`.
import { Hono, type Context } from 'hono';
import type { OidcLoginConfig } from '../../config/types.js';
import { endpointUrl, type AsContext } from '../context.js';
import { IdpAccessTokens } from '../idp/idp-access-tokens.js';
import { IdpTokenCipher } from '../idp/idp-token-cipher.js';
import { IdpTokenStore } from '../idp/idp-token-store.js';
import type { Interaction } from '../interactions/interactions.js';
import { guarded } from '../pages/respond-page.js';
import { backchannelLogoutRoutes } from './backchannel-logout.js';
import { clientError, describeError, machineSubjects, redirectToIdp, takeSignInInteraction, userIdFrom } from './idp-round-trip.js';
import { IdpRequestSecretsDeriver } from './idp-request-secrets.js';
import { IdpSessions } from './idp-sessions.js';
import type { LoginMethod, LoginMethodFactory, LoginServices } from './login-method.js';
import { IdpAuthorizationError, IdpRequestError, OidcClient, type IdpRequestSecrets, type IdpSignIn } from '../idp/oidc-client.js';

const LOGIN_METHOD = 'oidc';
/** RFC 8707 §2: the IdP's answer when it does not accept the `resource` asked for (Entra ID: AADSTS9010010). */
const INVALID_TARGET = 'invalid_target';

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
    extraAuthorizeParams: config.extraAuthorizeParams,
  });
  const requestSecrets = new IdpRequestSecretsDeriver(ctx.keys.cookieSecret);
  const tokens = new IdpTokenStore(ctx.store, new IdpTokenCipher(ctx.keys.cookieSecret), ctx.config.refreshTokenTtlMs);
  // Refresh-token reuse, code replay, /revoke: the grant's IdP tokens go with it.
  services.grants.onRevoke((grantId) => tokens.delete(grantId));
  const idpTokens = new IdpAccessTokens({ issuer: ctx.issuer, store: ctx.store, tokens, client, grants: services.grants, logger: ctx.logger });
  // The gateway's refresh asks the IdP too: a grant ends with its IdP session (docs/authorization-server.md, "Third-party login").
  services.grants.beforeRefresh((grant) => idpTokens.confirmSession(grant));
  const sessions = new IdpSessions(ctx.store, ctx.config.refreshTokenTtlMs);
  const logoutPath = `${services.basePath}/backchannel-logout` as `/${string}`;
  ctx.logger.info({ backchannel_logout_uri: endpointUrl(ctx.issuer, logoutPath) }, 'oidc login: register this back-channel logout URI at the identity provider');
  const deps: OidcLoginDeps = { ctx, config, services, client, requestSecrets, tokens, sessions };

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
  config: OidcLoginConfig;
  services: LoginServices;
  client: OidcClient;
  requestSecrets: IdpRequestSecretsDeriver;
  tokens: IdpTokenStore;
  sessions: IdpSessions;
}

/** After consent: the consented interaction becomes the IdP request, and the browser goes to the IdP. */
function start({ ctx, config, services, client, requestSecrets }: OidcLoginDeps, c: Context, interaction: Interaction, browserId: string): Promise<Response> {
  const resource = resourceFor(config, interaction);
  return redirectToIdp(services, ctx.logger, c, interaction, browserId, LOGIN_METHOD, (state) => client.authorizationUrl(state, requestSecrets.for(state), resource));
}

/** The client's RFC 8707 resource, unless `send_resource: false` (an account sign-in has none). */
const resourceFor = (config: OidcLoginConfig, interaction: Interaction): string | undefined =>
  config.sendResource && interaction.request.resource !== '' ? interaction.request.resource : undefined;

/** The IdP's answer: the interaction it belongs to, then the sign-in, then the code for the client. */
async function callback(deps: OidcLoginDeps, c: Context): Promise<Response> {
  const { ctx, config, services, tokens, sessions } = deps;
  const params = new URL(c.req.url).searchParams;
  const taken = await takeSignInInteraction(services, c, params, LOGIN_METHOD);
  if (taken instanceof Response) return taken;
  const { interaction, state } = taken;
  const signIn = await signInAtIdp(deps, c, params, interaction, state);
  if (signIn instanceof Response) return signIn;
  const subject = userIdFrom(signIn.claims, config.subjectClaim, false, machineSubjects(ctx.config));
  if (subject === undefined || !userIdFrom(signIn.claims, 'sub', false)) {
    ctx.logger.warn({ subject_claim: config.subjectClaim }, 'oidc login: the ID token has no usable user id (the subject claim, and sub, must be 1 to 255 printable ASCII characters)');
    ctx.audit.record({ event: 'idp_login', outcome: 'error', error: 'no_subject', client_id: interaction.request.clientId });
    return services.errorPage(c, 502, 'Sign-in failed', 'The identity provider did not say who you are in a way this gateway can use. Tell the gateway’s administrator (login.subject_claim).');
  }
  ctx.audit.record({ event: 'idp_login', outcome: 'success', sub: subject, client_id: interaction.request.clientId });
  const { request } = interaction;
  return services.complete(c, interaction, {
    subject,
    bindToGrant: async (grantId) => {
      await tokens.save(grantId, { idpIssuer: signIn.issuer, idpSubject: signIn.subject, subject, clientId: request.clientId, ...signIn.tokens });
      await sessions.bind(grantId, signIn.issuer, signIn.subject, signIn.tokens.sid);
    },
  });
}

/** The authorization response checked (issuer, state) and the code redeemed at the IdP; a failure answers the client or shows an error page. */
async function signInAtIdp(deps: OidcLoginDeps, c: Context, params: URLSearchParams, interaction: Interaction, state: string): Promise<IdpSignIn | Response> {
  const { ctx, config, services, client } = deps;
  const secrets: IdpRequestSecrets = deps.requestSecrets.for(state);
  let validated: URLSearchParams;
  try {
    validated = await client.validateCallback(params, state);
  } catch (err) {
    if (err instanceof IdpAuthorizationError) return idpRefused(deps, c, interaction, err.error);
    ctx.logger.warn({ err: describeError(err) }, 'oidc login: refused an authorization response');
    if (err instanceof IdpRequestError) return services.fail(c, interaction, 'temporarily_unavailable', 'the identity provider cannot be reached');
    // A wrong or missing `iss` (mix-up), a repeated parameter: not an answer to our request.
    return services.errorPage(c, 400, 'Sign-in failed', 'The answer did not come from the expected identity provider. Start again from your application.');
  }
  try {
    return await client.redeem(validated, secrets, resourceFor(config, interaction));
  } catch (err) {
    ctx.logger.warn({ err: describeError(err) }, 'oidc login: the identity provider did not complete the sign-in');
    const unreachable = err instanceof IdpRequestError && err.network;
    return services.fail(c, interaction, unreachable ? 'temporarily_unavailable' : 'server_error', 'the identity provider did not complete the sign-in');
  }
}

/**
 * The IdP answered the authorization request with an error: the client hears
 * it in fixed words, except `invalid_target` — the IdP refuses the `resource`
 * the gateway sent, which no user or client can change: a page says so.
 */
function idpRefused({ ctx, config, services }: OidcLoginDeps, c: Context, interaction: Interaction, error: string): Response | Promise<Response> {
  ctx.audit.record({ event: 'idp_login', outcome: 'error', error, client_id: interaction.request.clientId });
  if (error !== INVALID_TARGET) return services.fail(c, interaction, ...clientError(error));
  const hint = config.sendResource ? ' (set authorization_server.login.send_resource: false for an IdP that refuses RFC 8707 resource, as Entra ID does)' : '';
  ctx.logger.warn(`oidc login: the identity provider answered invalid_target${hint}`);
  return services.errorPage(c, 502, 'Sign-in failed', `The identity provider refused the sign-in request this gateway sent (invalid_target: it does not accept the resource parameter). Tell the gateway’s administrator${config.sendResource ? ' (login.send_resource)' : ''}.`);
}
