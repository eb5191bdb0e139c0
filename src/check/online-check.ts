// `check --online`: reaches what each route depends on (its token issuer's
// metadata and keys, or its introspection endpoint; the authorization servers
// it advertises; its upstream), and the built-in AS's login IdP and enterprise
// IdPs' key sets, so a wrong issuer, key set, audience or upstream path shows
// before the first client does. Probes run concurrently;
// one URL shared by several routes is fetched once.
import type { GatewayConfig, RouteConfig } from '../config/types.js';
import { redactUrl } from '../config/urls.js';
import { error, formatFinding, ok, type Finding } from './findings.js';
import { findMetadata, issuerFinding, probeJwks, probeJwtIssuer } from './probe-issuer.js';
import { ASYMMETRIC_JWS_ALGORITHMS } from '../config/jws-algorithms.js';
import { probeIntrospection } from './probe-introspection.js';
import { probeUpstream } from './probe-upstream.js';
import { upstreamRoutes } from '../config/upstreams.js';

export interface OnlineReport {
  lines: string[];
  /** No finding at level error. */
  ok: boolean;
}

export async function checkOnline(config: GatewayConfig): Promise<OnlineReport> {
  const once = memo();
  const builtinIssuer = config.authorizationServer?.issuer;
  const sections = config.routes.map((route) => ({ title: `${route.path}  (tokens must carry aud ${route.resource})`, findings: routeFindings(route, builtinIssuer, once) }));
  const login = config.authorizationServer?.login;
  if (login?.kind === 'oidc') sections.push({ title: 'authorization_server.login', findings: loginFindings(login.issuer) });
  for (const idp of config.authorizationServer?.enterpriseIdps ?? []) {
    sections.push({ title: `authorization_server.enterprise_idps  (ID-JAGs of ${redactUrl(idp.issuer)})`, findings: once(`jwks ${idp.jwksUri}`, async () => [await probeJwks(idp.jwksUri, ASYMMETRIC_JWS_ALGORITHMS)]) });
  }
  const lines = ['online:'];
  let errors = 0;
  for (const { title, findings } of sections) {
    lines.push(title);
    for (const finding of await findings) {
      if (finding.level === 'error') errors++;
      lines.push(formatFinding(finding));
    }
  }
  lines.push(errors === 0 ? 'online: everything answered as expected' : `online: ${errors} problem${errors === 1 ? '' : 's'}`);
  return { lines, ok: errors === 0 };
}

type Once = <T>(key: string, run: () => Promise<T>) => Promise<T>;

function memo(): Once {
  const started = new Map<string, Promise<unknown>>();
  return <T>(key: string, run: () => Promise<T>) => {
    if (!started.has(key)) started.set(key, run());
    return started.get(key) as Promise<T>;
  };
}

async function routeFindings(route: RouteConfig, builtinIssuer: string | undefined, once: Once): Promise<Finding[]> {
  const [token, servers, upstream] = await Promise.all([
    tokenFindings(route, once),
    Promise.all(advertisedServers(route, builtinIssuer).map((issuer) => once(`as ${issuer}`, () => authorizationServerFinding(issuer)))),
    Promise.all(upstreamRoutes(route).map(probeUpstream)),
  ]);
  return [...token, ...servers, ...upstream];
}

function tokenFindings(route: RouteConfig, once: Once): Promise<Finding[]> {
  const token = route.token;
  switch (token.kind) {
    case 'jwt':
      return once(`jwt ${JSON.stringify([token.issuer, token.jwksUri, token.algorithms])}`, () => probeJwtIssuer(token));
    case 'introspection':
      // The key stays in memory: the secret tells two clients of one endpoint apart.
      return once(`introspection ${JSON.stringify([token.endpoint, token.clientId, token.clientSecret])}`, async () => [await probeIntrospection(token)]);
    case 'builtin':
      return Promise.resolve([ok('tokens', 'signed by the built-in authorization server (nothing to reach)')]);
  }
}

/** The authorization servers clients are sent to, other than the gateway itself and the token issuer already probed. */
function advertisedServers(route: RouteConfig, builtinIssuer: string | undefined): string[] {
  const probed = route.token.kind === 'jwt' ? route.token.issuer : undefined;
  return route.authorizationServers.filter((issuer) => issuer !== builtinIssuer && issuer !== probed);
}

/** The built-in AS's third-party login reads OpenID discovery only (authorization-server/idp/oidc-client.ts), and checks its issuer exactly. */
async function loginFindings(issuer: string): Promise<Finding[]> {
  const found = await findMetadata(issuer, [`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`]);
  if ('failures' in found) return [error('login issuer', `no OpenID metadata, so no one can sign in: ${found.failures.join('; ')}`)];
  return [issuerFinding('login issuer', issuer, found)];
}

/** MCP clients find the authorization server through its metadata: without one they cannot sign in. */
async function authorizationServerFinding(issuer: string): Promise<Finding> {
  const found = await findMetadata(issuer);
  if ('failures' in found) return error('authorization server', `${redactUrl(issuer)} has no metadata, so clients cannot sign in: ${found.failures.join('; ')}`);
  return issuerFinding('authorization server', issuer, found);
}
