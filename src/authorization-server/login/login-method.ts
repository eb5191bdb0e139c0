// How users prove who they are, after they approved the client and before the
// code is issued. One implementation per `authorization_server.login.kind`:
// `dev` (a name-only form, loopback gateways only), `oidc` (a third-party
// OpenID Connect IdP) and `oauth2` (an OAuth-only IdP such as GitHub). A method gets an interaction at stage `login`, already
// bound to the browser and consented; it ends by calling `complete` (or `fail`).
import type { Context, Hono } from 'hono';
import type { AsContext } from '../context.js';
import type { BrowserBinding } from '../interactions/browser-binding.js';
import type { Grants } from '../tokens/grants.js';
import type { IdpTokenSource } from '../../upstream-auth/upstream-credential.js';
import type { Interaction, Interactions } from '../interactions/interactions.js';

export interface AuthenticatedUser {
  /** `sub` of the tokens issued for this login. */
  subject: string;
  /**
   * Called once the grant exists, before the code reaches the client: where
   * a third-party login binds what it holds (the IdP's tokens) to the grant.
   */
  bindToGrant?(grantId: string): Promise<void>;
}

/** Authorization response errors a login method may end with. */
export type LoginFailure = 'access_denied' | 'login_required' | 'temporarily_unavailable' | 'server_error';

export interface LoginServices {
  interactions: Interactions;
  browser: BrowserBinding;
  /** Where the login method's own routes are mounted, e.g. `/authorize/login/dev`. */
  basePath: string;
  /** The gateway's own origin: form posts must come from it. */
  selfOrigin: string;
  /** Issues the code for a consumed interaction and redirects to the client. */
  complete(c: Context, interaction: Interaction, user: AuthenticatedUser): Promise<Response>;
  /** Sends an error back to the client (with state and iss). */
  fail(c: Context, interaction: Interaction, error: LoginFailure, description: string): Response | Promise<Response>;
  /** An error page for the user (a stale, forged or foreign form): never a redirect. */
  errorPage(c: Context, status: 400 | 403 | 502 | 503, title: string, message: string): Promise<Response>;
  /** The AS's grants: a third-party login deletes what it bound to a grant when the grant is revoked. */
  grants: Grants;
}

export interface LoginMethod {
  readonly kind: string;
  /** After consent: the response that starts the login (a page, or a redirect to the IdP). */
  start(c: Context, interaction: Interaction, browserId: string): Promise<Response>;
  /** Routes the method answers under its base path (form posts, IdP callback). */
  routes(): Hono;
  /** A third-party login's IdP access tokens, for `upstream_auth: idp_token`. */
  readonly idpTokens?: IdpTokenSource;
}

export type LoginMethodFactory = (ctx: AsContext, services: LoginServices) => LoginMethod;
