// THE one file that names store keys. Every variable part is hashed (sha256,
// base64url), so an id holding `:` or `*` can neither collide with another key
// nor act as a pattern, and a store dump shows no raw secret or identifier.
// A hashed part is 43 characters from [A-Za-z0-9_-]: never a separator.
// docs/storage.md lists every key below with its TTL; keep the two in step.
import crypto from 'node:crypto';

// crypto.hash (Node ≥ 20.12, so always here) hashes a short string in half the time of
// createHash().update().digest(), with the same digest; @types/node 20 does not declare it.
const oneShotHash = (crypto as unknown as { hash: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;

/** sha256 of the UTF-8 string, base64url without padding (43 characters). */
export function hashKeyPart(value: string): string {
  return oneShotHash('sha256', value, 'base64url');
}

const key = (namespace: string, ...parts: string[]): string =>
  [namespace, ...parts.map(hashKeyPart)].join(':');

/** Routes are few and named in keys written per request or per event: each path's hash is kept. */
const MAX_HASHED_ROUTES = 1024;
const hashedRoutes = new Map<string, string>();
function hashedRoute(routePath: string): string {
  let hashed = hashedRoutes.get(routePath);
  if (hashed === undefined) {
    // A bound, not an LRU: more distinct paths than this only means hashing them again.
    if (hashedRoutes.size >= MAX_HASHED_ROUTES) hashedRoutes.clear();
    hashedRoutes.set(routePath, (hashed = hashKeyPart(routePath)));
  }
  return hashed;
}

/** As key(), for a key whose first part is a route's path: the same string, the path's hash kept. */
const routeKey = (namespace: string, routePath: string, ...parts: string[]): string =>
  [namespace, hashedRoute(routePath), ...parts.map(hashKeyPart)].join(':');

// Key classes (a key's namespace, the text before its first `:`) that need a budget of their own.

/** Pending authorizations: written by unauthenticated /authorize requests, so a flood must find them in a budget of their own. */
export const PENDING_AUTHORIZATION_CLASS = 'pending-authz';

/** Rate-limit counters: one per client address and window, written by unauthenticated requests. */
export const RATE_LIMIT_CLASS = 'ratelimit';

/** Connections under way at upstream ASes: one per connect a signed-in user starts, so bounded per principal (the value's first line, its hashed issuer and subject). */
export const UPSTREAM_CONNECT_CLASS = 'upstream-connect';

/** Session bindings: one per `initialize` of an authenticated principal, so the memory store also bounds them per principal and route. */
export const SESSION_BINDING_CLASS = 'session';

/** MCP task owners: one per task an upstream answered a principal with, so bounded per principal and route like sessions. */
export const TASK_OWNER_CLASS = 'task';

/** Event-stream event ids and the principal they were passed on to: bounded per principal and route like sessions. */
export const EVENT_ID_CLASS = 'event-id';

const REVOKED_GRANT_CLASS = 'grant';
const USED_CODE_CLASS = 'code-used';
const LOGOUT_TOKEN_CLASS = 'idp-logout-jti';
const DPOP_PROOF_CLASS = 'dpop-jti';
const ID_JAG_CLASS = 'id-jag-jti';
const CONNECTED_APPS_CLASS = 'account-apps';

/**
 * Revocations and spent one-time values: forgetting one before its TTL would
 * lift a refusal (a revoked grant refreshing again, a replay passing), so the
 * memory store never evicts them; a full class refuses new writes instead.
 * The connected-apps index is kept too: an app the page forgot could not be
 * revoked by its user while its grant works on.
 */
export const NEVER_EVICTED_CLASSES: readonly string[] = [REVOKED_GRANT_CLASS, USED_CODE_CLASS, LOGOUT_TOKEN_CLASS, DPOP_PROOF_CLASS, ID_JAG_CLASS, CONNECTED_APPS_CLASS];

// --- protected resource / proxy ---------------------------------------------

/** Principal that created an upstream session (`Mcp-Session-Id`) on a route. */
export const sessionBindingKey = (routePath: string, sessionId: string) => routeKey(SESSION_BINDING_CLASS, routePath, sessionId);

/** Principal an upstream answered with an MCP task id (`result.task.taskId`, a 2026-07-28 `taskId`, a task notification) on a route. */
export const taskOwnerKey = (routePath: string, taskId: string) => routeKey(TASK_OWNER_CLASS, routePath, taskId);

/** The log (`Store.appendToLog`) of one principal's task ids on a route, hashed, capped in count by its writer: what its `tasks/list` may show. */
export const principalTasksKey = (routePath: string, principal: string) => routeKey('principal-tasks', routePath, principal);

/** Principal an upstream event stream's event (its `id:` field) was passed on to on a route: whose `Last-Event-ID` may resume after it. */
export const eventIdOwnerKey = (routePath: string, eventId: string) => routeKey(EVENT_ID_CLASS, routePath, eventId);

/**
 * The sliding window (`Store.admit`) of one route rate limit and one caller:
 * `limit` is the limit's definition as written (a changed limit starts new
 * counters; the old ones expire), `who` the counted identity (a principal's
 * `[issuer, sub, client_id]`, a client's or a subject's), hashed like every part.
 */
export const routeRateLimitKey = (routePath: string, limit: string, who: string) => routeKey('route-limit', routePath, limit, who);

/**
 * A DPoP proof's `jti`, claimed (SET NX) by the one request that uses it
 * (RFC 9449 §11.1), per proof key (`jkt`): a replayed proof is refused on
 * every replica. Written by protected routes and the built-in AS's /token.
 */
export const dpopProofKey = (jkt: string, jti: string) => key(DPOP_PROOF_CLASS, jkt, jti);

/**
 * One principal's share of DPoP markers (`Store.admit`, over a marker's
 * lifetime): `owner` is the user (issuer and subject), so a flood of one
 * user's proofs is refused before it fills the never-evicted class.
 */
export const dpopShareKey = (owner: string) => key('dpop-share', owner);

/**
 * One user's share of a key class under one key prefix on Redis (owner-shares.ts): a sorted set of the
 * user's record keys, by when each was written. `owner` is the record key without its last part and
 * the value's owner part (the user), so a user has one share per route whatever its clients.
 */
export const ownerShareKey = (owner: string) => key('owner-share', owner);

// --- built-in authorization server (reserved for it) ------------------------

/**
 * One user's share of sign-ins (`Store.admit`, over `refresh_token_ttl`): each
 * completed authorization may later leave a `code-used:` and a `grant:` marker,
 * never evicted, so counting the user's sign-ins bounds what they can fill.
 */
export const signInShareKey = (owner: string) => key('sign-in-share', owner);


/** A registered client (DCR) or a fetched Client ID Metadata Document. */
export const clientKey = (clientId: string) => key('client', clientId);

/** An authorization code, taken exactly once at /token. */
export const authorizationCodeKey = (code: string) => key('code', code);

/** A refresh token; the value names its family and grant. */
export const refreshTokenKey = (refreshToken: string) => key('refresh', refreshToken);

/** A refresh-token family: its current member and the one it replaced (compare-and-set only); replay of a rotated member revokes the family. */
export const refreshFamilyKey = (familyId: string) => key('refresh-family', familyId);

/** A grant: what a code or refresh token was issued under, revoked as one. */
export const grantKey = (grantId: string) => key(REVOKED_GRANT_CLASS, grantId);

/** A user's consent for one client (and its redirect URI and scopes, in the value). */
export const consentKey = (issuer: string, subject: string, clientId: string) =>
  key('consent', issuer, subject, clientId);

/** An /authorize request waiting for consent or the IdP callback, by its `state`. */
export const pendingAuthorizationKey = (state: string) => key(PENDING_AUTHORIZATION_CLASS, state);

/** The third-party IdP tokens (encrypted) kept for a grant. */
export const idpTokenKey = (grantId: string) => key('idp-token', grantId);

/** A fixed-window rate-limit counter, e.g. `rateLimitKey('register', ip)`. */
export const rateLimitKey = (bucket: string, subject: string) => key(RATE_LIMIT_CLASS, bucket, subject);

/** A redeemed authorization code → its grant, so a replay can revoke what the code issued. */
export const usedCodeKey = (code: string) => key(USED_CODE_CLASS, code);

/** Claimed (SET NX) by the one replica refreshing a grant's IdP tokens; the others wait for the result. */
export const idpRefreshLockKey = (grantId: string) => key('idp-refresh', grantId);

/** The log (sorted set) of grant ids revoked at an issuer: every replica polls it to refuse their access tokens. */
export const revokedGrantsKey = (issuer: string) => key('revoked-grants', issuer);

/** The grants bound to one IdP session (`sid`): ended together by a back-channel logout. */
export const idpSessionGrantsKey = (idpIssuer: string, sid: string) => key('idp-session', idpIssuer, sid);

/** The grants bound to one IdP user (`sub`): ended together by a back-channel logout naming only `sub`. */
export const idpSubjectGrantsKey = (idpIssuer: string, sub: string) => key('idp-subject', idpIssuer, sub);

/**
 * An ID-JAG's `jti` at its enterprise IdP, claimed (SET NX) by the one /token
 * request that redeems it, until the assertion expires: a replayed assertion
 * is refused on every replica (MCP enterprise-managed authorization §7.4.2).
 */
export const idJagKey = (idpIssuer: string, jti: string) => key(ID_JAG_CLASS, idpIssuer, jti);

/** A back-channel logout token's `jti`, claimed (SET NX) once: a replayed logout token is refused. */
export const logoutTokenKey = (idpIssuer: string, jti: string) => key(LOGOUT_TOKEN_CLASS, idpIssuer, jti);

// --- the connected-apps page (`account.enabled`) ------------------------------

/** The apps one user approved at an issuer, each with its live grant ids: what /account/apps lists and revokes (bounded per user). */
export const connectedAppsKey = (issuer: string, subject: string) => key(CONNECTED_APPS_CLASS, issuer, subject);

/** When one user's app last got tokens (sign-in or refresh): one plain write per issue, no read. */
export const appLastUsedKey = (issuer: string, subject: string, clientId: string) => key('account-app-used', issuer, subject, clientId);

/** A signed-in session of the connected-apps page, by the hash of its cookie value. */
export const accountSessionKey = (sessionId: string) => key('account-session', sessionId);

// --- users' own upstream accounts (`upstream_auth: user_oauth`) ---------------

/** One user's grant at one route's upstream AS, sealed (AES-256-GCM, account_tokens): the user named only through the hash. */
export const upstreamGrantKey = (issuer: string, subject: string, routePath: string) => key('upstream-grant', issuer, subject, routePath);

/** Claimed (SET NX) by the one replica refreshing an upstream grant; the others use the token they hold or wait. */
export const upstreamRefreshLockKey = (grantStoreKey: string) => key('upstream-refresh', grantStoreKey);

/** The gateway's client at a route's upstream AS after dynamic registration (sealed: it may hold a secret), shared by every user. */
export const upstreamClientKey = (routePath: string, asIssuer: string) => routeKey('upstream-client', routePath, asIssuer);

/** A connection under way at the upstream AS, by its `state`: the principal, the browser, the PKCE verifier (sealed); taken once by the callback. */
export const upstreamConnectKey = (state: string) => key(UPSTREAM_CONNECT_CLASS, state);

/** A connect link (the URL of the elicitation), by its random id: the principal and route it was made for; taken once. */
export const connectLinkKey = (linkId: string) => key('connect-link', linkId);

/** The one live connect link of a principal and route: at most one link per user and route exists at a time. */
export const connectLinkOfKey = (issuer: string, subject: string, routePath: string) => key('connect-link-of', issuer, subject, routePath);

/** When one user last used one route's upstream grant: a plain write, at most once a minute per replica. */
export const upstreamUsedKey = (grantStoreKey: string) => key('upstream-used', grantStoreKey);
