// What every third-party login (`oidc`, `oauth2`) does around the IdP's own
// protocol: after consent, the consented interaction becomes a fresh one whose
// id is the IdP `state` (256 random bits, bound to the browser cookie, single
// use, ten minutes, in the store only as a hash), and the browser goes to the
// IdP; at the callback, that `state` must name a login interaction of the same
// method, fresh, started in this browser, and it is taken (single use).
// A missing, unknown, used, stale or foreign `state` is an error page: nothing
// reaches the client, nothing is issued. Also: the user id the gateway token
// will carry, read from what the IdP said, and the words an IdP error becomes.
import type { Context } from 'hono';
import type { AuthorizationServerConfig } from '../../config/types.js';
import type { Logger } from '../../observability/logger.js';
import { redirect } from '../helpers/redirect.js';
import { belongsTo, INTERACTION_TTL_MS, type Interaction } from '../interactions/interactions.js';
import type { LoginFailure, LoginServices } from './login-method.js';

/** After consent: a new interaction (its id the IdP `state`), and a redirect to `authorizationUrl(state)`. */
export async function redirectToIdp(
  services: LoginServices,
  logger: Logger,
  c: Context,
  consentedInteraction: Interaction,
  browserId: string,
  method: string,
  authorizationUrl: (state: string) => Promise<URL>,
): Promise<Response> {
  const consented = await services.interactions.take(consentedInteraction.id);
  if (!consented) return services.errorPage(c, 400, 'Request expired', 'This authorization request was already answered. Start again from your application.');
  const pending = await services.interactions.create('login', consented.request, browserId, { method });
  let url: URL;
  try {
    url = await authorizationUrl(pending.id);
  } catch (err) {
    await services.interactions.take(pending.id);
    logger.warn({ err: describeError(err) }, `${method} login: the identity provider cannot be reached`);
    return services.fail(c, consented, 'temporarily_unavailable', 'the identity provider cannot be reached');
  }
  return redirect(c, url.href);
}

/** The one `state` names a login interaction of `method`, fresh, started in this browser: taken (single use), or an error page. */
export async function takeSignInInteraction(services: LoginServices, c: Context, params: URLSearchParams, method: string): Promise<{ interaction: Interaction; state: string } | Response> {
  const states = params.getAll('state');
  const state = states.length === 1 ? states[0] : undefined;
  if (!state) return services.errorPage(c, 400, 'Sign-in failed', 'The answer from the identity provider is not for a sign-in started here. Start again from your application.');
  const pending = await services.interactions.peek(state);
  if (!pending || pending.stage !== 'login' || pending.login?.method !== method || Date.now() - pending.createdAt > INTERACTION_TTL_MS) {
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

/** OIDC Core §2 bounds `sub` to 255 ASCII characters; the gateway token's `sub` is held to the same, printable. */
const USER_ID = /^[\x20-\x7E]{1,255}$/;

/**
 * The shape of an enterprise user's subject, `<issuer>#<sub>` (jwt-bearer.ts `tokenSubject`): an
 * issuer is a URL without a fragment, so its first `#` ends it. A login subject of that shape
 * would be that enterprise user.
 */
const ENTERPRISE_SUBJECT = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^#]*#/;

/** The machine subjects: a client_credentials token's `sub` is its client's id (client-credentials.ts). */
export function machineSubjects(config: Pick<AuthorizationServerConfig, 'clients'>): ReadonlySet<string> {
  return new Set((config.clients ?? []).filter((c) => c.grantTypes.includes('client_credentials')).map((c) => c.clientId));
}

/**
 * The user id in `claims[claim]`: a string of 1 to 255 printable ASCII
 * characters, or (`integers`: an OAuth user endpoint such as GitHub's `id`)
 * a non-negative safe integer, as its decimal string. Anything else,
 * missing included, is undefined: no user, no session. So is an id that
 * spells another namespace's subject — an enterprise user's `<issuer>#<sub>`
 * or one of `machines` (client ids) — so a signed-in user never shares a
 * principal (grants, shares, `allow_subjects`) with either.
 */
export function userIdFrom(claims: Readonly<Record<string, unknown>>, claim: string, integers: boolean, machines: ReadonlySet<string> = new Set()): string | undefined {
  const value = Object.hasOwn(claims, claim) ? claims[claim] : undefined;
  let id: string | undefined;
  if (typeof value === 'string') id = USER_ID.test(value) ? value : undefined;
  else if (integers && typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) id = String(value);
  return id === undefined || ENTERPRISE_SUBJECT.test(id) || machines.has(id) ? undefined : id;
}

/** What the client is told for an IdP's authorization error: its own fixed words, never the IdP's. */
export function clientError(idpError: string): [LoginFailure, string] {
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
export const describeError = (err: unknown) => (err instanceof Error ? { name: err.name, message: err.message } : { message: String(err) });
