// The paths the gateway answers itself, at the root of its origin: no route
// may take one. The one list: the built-in AS serves and advertises its
// endpoints from AS_ENDPOINTS, operations.ts serves OPERATIONS_PATHS, and
// config refuses a route at any of them (isReservedPath).

/** The built-in AS's endpoints; at the origin's root, so 2025-03-26 clients' default endpoints work. */
export const AS_ENDPOINTS = { authorize: '/authorize', token: '/token', register: '/register', revoke: '/revoke', jwks: '/jwks.json' } as const;

/** The AS's pages (consent, login, the IdP's callback and logout) live below /authorize/. */
export const AS_PAGES_PREFIX = `${AS_ENDPOINTS.authorize}/`;

/** user_oauth: where the upstream AS's callback sends the browser back to finish an authorization that detoured there. */
export const CONNECTED_RESUME_PATH = '/authorize/connected';

/** The connected-apps page and its forms (`account.enabled`); the prefix is reserved whether or not it is on. */
export const ACCOUNT_PAGES_PREFIX = '/account/';
export const ACCOUNT_PATHS = {
  apps: '/account/apps',
  revoke: '/account/apps/revoke',
  signOut: '/account/sign-out',
  /** user_oauth: where a connect link (a URL elicitation) lands, and the Disconnect form of an upstream account. */
  connect: '/account/connect',
  disconnect: '/account/apps/disconnect',
} as const;

/**
 * A page of one route's upstream AS under `prefix`. An aggregated route's entry (`<path>#<name>`,
 * a route path never holds `#`) has its own, under `<prefix>-entry/<name><path>`: a name holds no
 * `/`, so no two routes or entries share one.
 */
function perRoutePath(prefix: string, routePath: string): `/${string}` {
  const [path = '/', entry] = routePath.split('#');
  const tail = path === '/' ? '' : path;
  return entry === undefined ? `/account/${prefix}${tail}` : `/account/${prefix}-entry/${entry}${tail}`;
}
/** user_oauth: the one callback of a route's upstream AS (one path per route and aggregated entry, so no AS can answer for another's). */
export const upstreamCallbackPath = (routePath: string): `/${string}` => perRoutePath('upstream-callback', routePath);
/** user_oauth: the gateway's client ID metadata document for a route's upstream AS (its URL is the client_id there). */
export const upstreamClientDocumentPath = (routePath: string): `/${string}` => perRoutePath('upstream-client', routePath);

export const OPERATIONS_PATHS = { health: '/healthz', ready: '/readyz', metrics: '/metrics' } as const;

/** RFC 8615: metadata documents (protected resource, AS, OpenID). */
const WELL_KNOWN = '/.well-known';

const EXACT = new Set<string>([...Object.values(AS_ENDPOINTS), ...Object.values(OPERATIONS_PATHS), WELL_KNOWN]);

export function isReservedPath(path: string): boolean {
  return EXACT.has(path) || path.startsWith(`${WELL_KNOWN}/`) || path.startsWith(AS_PAGES_PREFIX) || path.startsWith(ACCOUNT_PAGES_PREFIX);
}
