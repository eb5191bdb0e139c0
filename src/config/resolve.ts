// Validated files → the runtime GatewayConfig: durations in ms, secrets read,
// canonical URIs and defaults that depend on other settings filled in, and the
// cross-file rules (unique paths and resources, reserved paths) checked.
// Pure apart from reading secrets from the environment and files, and the
// host facts a stdio route's isolation needs (stdio-isolation.ts).
import { resolveIdentityHeaders } from './identity-headers.js';
import { formatIssue, type ConfigIssue } from './config-error.js';
import { parseDuration } from './duration.js';
import { readSecret } from './secrets.js';
import { canonicalUrl, isLoopbackUrl, isPlainHttpRemote, normalizedHttpUri, redactUrl, resourceMetadataUrl } from './urls.js';
import { parseRedisUrl, RedisUrlError } from './redis-url.js';
import { refuseDevLogin } from './dev-login-placement.js';
import { issuerWithTrailingSlash, upstreamWithoutPath } from './hints.js';
import type { ConfigPath, Locate } from './yaml-file.js';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_SSE_SESSIONS, JWT_BEARER_GRANT_TYPE, type GatewayFile, type RouteFile, type SecretRefValue, type SseUpstreamFile, type StdioUpstreamFile } from './schema.js';
import type {
  AuthorizationServerConfig,
  AuthorizationServerRateLimits,
  EnterpriseIdpConfig,
  GatewayConfig,
  LoginConfig,
  RouteConfig,
  RouteRateLimitConfig,
  RuleConfig,
  StaticClientConfig,
  SseUpstreamConfig,
  StdioUpstreamConfig,
  StoreConfig,
  TokenConfig,
  UpstreamAuthConfig,
} from './types.js';
import { checkRedirectUri } from './redirect-uri.js';
import { isReservedPath } from './reserved-paths.js';
import { resolveTraces } from './telemetry.js';
import { resolveJwksSettings } from './jwks-settings.js';
import { signedCredentialTrust } from './signed-credential-trust.js';
import { resolveSandbox, resolveUser, type IsolationProblem } from './stdio-isolation.js';
import { resolveUserOAuth, userOAuthPlacementProblem } from './user-oauth.js';
import { resolveAccountTokens } from './account-tokens.js';
import { resolveUpstreams, upstreamRoutes } from './upstreams.js';

export interface Located<T> {
  file: string;
  value: T;
  at: Locate;
}

export interface ResolveInput {
  /** The directory or file given to the loader. */
  source: string;
  /** Where relative secret files are found. */
  configDir: string;
  gateway: Located<GatewayFile>;
  routes: Located<RouteFile>[];
  env: NodeJS.ProcessEnv;
}

/** `dpop_nonce_key`: at least 256 bits when written as base64. */
const MIN_NONCE_KEY_LENGTH = 32;

/** A value that already carries an auth scheme (RFC 9110 token, a space, then credentials). */
const HAS_SCHEME = /^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]* \S/;

type AsFile = NonNullable<GatewayFile['authorization_server']>;
type UpstreamFile = NonNullable<RouteFile['upstream']>;
type UpstreamAuthFile = RouteFile['upstream_auth'];

export async function resolveConfig(input: ResolveInput): Promise<{ config: GatewayConfig; issues: ConfigIssue[] }> {
  return new Resolver(input).run();
}

class Resolver {
  private readonly issues: ConfigIssue[] = [];
  private readonly warnings: string[] = [];

  constructor(private readonly input: ResolveInput) {}

  async run(): Promise<{ config: GatewayConfig; issues: ConfigIssue[] }> {
    const { value: g, at } = this.input.gateway;
    const publicUrl = canonicalUrl(g.public_url);
    const authorizationServer = g.authorization_server?.enabled ? await this.authorizationServer(g.authorization_server, publicUrl, g.listen.host, at) : undefined;
    if (g.account?.enabled) this.accountPage(authorizationServer, at);

    const routes: RouteConfig[] = [];
    const byPath = new Map<string, string>();
    const byResource = new Map<string, string>();
    for (const source of this.input.routes) {
      const route = await this.route(source, publicUrl, authorizationServer?.issuer);
      const { value: f, at: here } = source;
      // Each upstream's credential where it can work: an aggregated route's entries each as a route of its own.
      for (const each of upstreamRoutes(route)) this.upstreamAuthPlacement(each, entryLocate(here, each.path), authorizationServer, g.account_tokens !== undefined);
      const samePath = byPath.get(route.path);
      const sameResource = byResource.get(route.resource);
      if (samePath) this.issue(here, ['path'], `${route.path} is already the path of the route in ${samePath}`);
      else if (sameResource) this.issue(here, [f.resource ? 'resource' : 'path'], `resource ${route.resource} is already the resource of the route in ${sameResource}`);
      if (!samePath) byPath.set(route.path, source.file);
      if (!sameResource) byResource.set(route.resource, source.file);
      routes.push(route);
    }

    if (authorizationServer) this.acrossRoutes(g, at, routes, byResource, authorizationServer);

    // `check` reads the URL as `serve` will, so a malformed one fails here too (the message names no part of it).
    if (g.store.kind === 'redis') this.checkRedisUrl(at, g.store.url);
    const telemetry = resolveTraces(g.telemetry?.traces, this.input.env);
    this.issues.push(...telemetry.issues);

    const config: GatewayConfig = {
      source: this.input.source,
      host: g.listen.host,
      port: g.listen.port,
      publicUrl,
      trustProxy: g.trust_proxy,
      store: storeConfig(g.store),
      auditSink: g.audit.sink,
      logLevel: g.log_level,
      shutdownGraceMs: parseDuration(g.shutdown_grace),
      drainDelayMs: parseDuration(g.drain_delay),
      headerTimeoutMs: parseDuration(g.limits.header_timeout),
      requestTimeoutMs: parseDuration(g.limits.request_timeout),
      keepAliveTimeoutMs: parseDuration(g.limits.keep_alive_timeout),
      maxHeaderBytes: g.limits.max_header_bytes,
      storeTimeoutMs: parseDuration(g.limits.store_timeout),
      jwks: resolveJwksSettings(g.jwks),
      authorizationServer,
      dpopNonceKey: await this.dpopNonceKey(g, at, routes, authorizationServer),
      traces: telemetry.traces,
      accountTokens: g.account_tokens && (await resolveAccountTokens(g.account_tokens, { secret: (path, ref) => this.secret(at, path, ref), issue: (path, message) => this.issue(at, path, message) })),
      routes,
      warnings: this.warnings,
    };
    return { config, issues: this.issues };
  }

  /** What only the routes together tell: the AS's default resource is one of them; none trusts the signed upstream credentials (K77). */
  private acrossRoutes(g: GatewayFile, at: Locate, routes: readonly RouteConfig[], byResource: ReadonlyMap<string, string>, authorizationServer: AuthorizationServerConfig): void {
    const own = { publicUrl: canonicalUrl(g.public_url), asIssuer: authorizationServer.issuer };
    for (const t of signedCredentialTrust(routes, own)) this.issue(this.input.routes[t.index]!.at, t.path, t.message);
    const defaultResource = g.authorization_server?.default_resource;
    if (!defaultResource) return;
    authorizationServer.defaultResource = canonicalUrl(defaultResource);
    if (!byResource.has(authorizationServer.defaultResource)) this.issue(at, ['authorization_server', 'default_resource'], `${redactUrl(defaultResource)} is not the resource of any route`);
  }

  /**
   * The secret DPoP nonces derive from: `dpop_nonce_key`, or (undefined) the
   * built-in AS signing key. A route asking for nonces with neither is an error.
   */
  private async dpopNonceKey(g: GatewayFile, at: Locate, routes: readonly RouteConfig[], authorizationServer: AuthorizationServerConfig | undefined): Promise<string | undefined> {
    const key = g.dpop_nonce_key && (await this.secret(at, ['dpop_nonce_key'], g.dpop_nonce_key));
    // HKDF stretches nothing: a short secret stays guessable, and a guessed key forges every nonce.
    if (key && key.length < MIN_NONCE_KEY_LENGTH) this.issue(at, ['dpop_nonce_key'], `the DPoP nonce key must be at least ${MIN_NONCE_KEY_LENGTH} characters (e.g. openssl rand -base64 32)`);
    const asking = routes.find((r) => r.dpop?.nonce);
    if (key === undefined && !authorizationServer && asking) {
      this.issue(at, [], `route ${asking.path} has token.dpop_nonce: set dpop_nonce_key (a secret shared by every replica) or enable the built-in authorization server, whose signing key the nonces derive from`);
    }
    return key;
  }

  /** The upstream_auth kinds that need the built-in AS's parts. */
  private upstreamAuthPlacement(route: RouteConfig, at: Locate, authorizationServer: AuthorizationServerConfig | undefined, accountTokens: boolean): void {
    // The user's IdP token exists only for tokens the built-in AS issued after a third-party login.
    if (route.upstreamAuth.kind === 'idp_token' && (authorizationServer?.login.kind !== 'oidc' || route.token.kind !== 'builtin')) {
      this.issue(at, ['upstream_auth', 'kind'], 'idp_token needs the built-in authorization server with login.kind oidc, and this route\'s tokens from it (no token: section)');
    }
    // user_oauth connects on the account pages, for the built-in AS's users, with account_tokens' keys.
    if (route.upstreamAuth.kind !== 'user_oauth') return;
    const facts = { accountPage: authorizationServer?.accountPage === true, builtinTokens: route.token.kind === 'builtin', accountTokens, stdio: route.stdio !== undefined };
    const problem = userOAuthPlacementProblem(facts);
    if (problem) this.issue(at, ['upstream_auth', 'kind'], problem);
  }

  /** `account.enabled`: the page signs users in with the AS's login and lists the AS's own grants, so there is no page without it. */
  private accountPage(authorizationServer: AuthorizationServerConfig | undefined, at: Locate): void {
    if (authorizationServer) authorizationServer.accountPage = true;
    else this.issue(at, ['account', 'enabled'], 'the connected-apps page needs the built-in authorization server (authorization_server: { enabled: true }): it signs users in with its login and lists the grants it issued');
  }

  private async authorizationServer(a: AsFile, publicUrl: string, listenHost: string, at: Locate): Promise<AuthorizationServerConfig> {
    const base = ['authorization_server'];
    // Anyone could sign in as anyone: only for a gateway nobody else can reach.
    const devLoginRefusal = a.login.kind === 'dev' ? refuseDevLogin(publicUrl, listenHost) : undefined;
    if (devLoginRefusal) this.issue(at, [...base, 'login'], devLoginRefusal);
    const login = await this.login(a.login, at);
    const signingKey = a.signing_key && (await this.secret(at, [...base, 'signing_key'], a.signing_key));
    if (signingKey && !isJsonObject(signingKey)) this.issue(at, [...base, 'signing_key'], 'the signing key is not a JSON Web Key (a JSON object)');
    const issuer = canonicalUrl(a.issuer ?? publicUrl);
    return {
      issuer,
      signingKey,
      accessTokenTtlMs: parseDuration(a.access_token_ttl),
      refreshTokenTtlMs: parseDuration(a.refresh_token_ttl),
      dynamicRegistration: a.registration.dynamic,
      clientIdMetadataDocuments: a.registration.client_id_metadata_documents,
      login,
      clients: await this.staticClients(a, at),
      enterpriseIdps: this.enterpriseIdps(a, issuer, at),
      rateLimits: rateLimits(a.rate_limits),
      dpopNonce: a.dpop_nonce,
    };
  }

  /**
   * `enterprise_idps` (ID-JAG): each issuer once, never this AS itself (draft
   * §8.3: an IdP does not honour its own grants), and both URLs https — TLS is
   * what authenticates the keys (MCP enterprise-managed authorization §7.3) —
   * except on a loopback host, which no network sits between. A client that
   * lists the jwt-bearer grant with no IdP to trust could never use it.
   */
  private enterpriseIdps(a: AsFile, asIssuer: string, at: Locate): EnterpriseIdpConfig[] {
    const base = ['authorization_server', 'enterprise_idps'];
    const issuers = new Set<string>();
    for (const [i, idp] of a.enterprise_idps.entries()) {
      if (issuers.has(idp.issuer)) this.issue(at, [...base, i, 'issuer'], `${redactUrl(idp.issuer)} is listed twice`);
      issuers.add(idp.issuer);
      if (canonicalUrl(idp.issuer) === asIssuer) this.issue(at, [...base, i, 'issuer'], 'an enterprise IdP is another issuer than this authorization server');
      for (const field of ['issuer', 'jwks_uri'] as const) {
        if (!isHttpsOrLoopback(idp[field])) this.issue(at, [...base, i, field], `${redactUrl(idp[field])} must be https (http only on a loopback host)`);
      }
    }
    if (a.enterprise_idps.length === 0) {
      for (const [i, c] of a.clients.entries()) {
        if (c.grant_types.includes(JWT_BEARER_GRANT_TYPE)) this.issue(at, ['authorization_server', 'clients', i, 'grant_types'], `${JWT_BEARER_GRANT_TYPE} needs authorization_server.enterprise_idps: the IdPs whose assertions it accepts`);
      }
    }
    return a.enterprise_idps.map((idp) => ({ issuer: idp.issuer, jwksUri: idp.jwks_uri }));
  }

  /** `authorization_server.login`: secrets read, plain-http IdP endpoints warned about. */
  private async login(l: AsFile['login'], at: Locate): Promise<LoginConfig> {
    const here = ['authorization_server', 'login'];
    if (l.kind === 'dev') return l;
    if (l.kind === 'oidc') {
      this.warnHttp(at, [...here, 'issuer'], l.issuer);
      this.warn(at, [...here, 'issuer'], issuerWithTrailingSlash(l.issuer));
      return {
        kind: 'oidc',
        issuer: l.issuer,
        clientId: l.client_id,
        clientSecret: l.client_secret && (await this.secret(at, [...here, 'client_secret'], l.client_secret)),
        scopes: l.scopes,
        sendResource: l.send_resource,
        subjectClaim: l.subject_claim,
        extraAuthorizeParams: l.extra_authorize_params,
      };
    }
    for (const endpoint of ['authorization_endpoint', 'token_endpoint', 'userinfo_endpoint'] as const) this.warnHttp(at, [...here, endpoint], l[endpoint]);
    return {
      kind: 'oauth2',
      authorizationEndpoint: l.authorization_endpoint,
      tokenEndpoint: l.token_endpoint,
      userinfoEndpoint: l.userinfo_endpoint,
      clientId: l.client_id,
      clientSecret: await this.secret(at, [...here, 'client_secret'], l.client_secret),
      scopes: l.scopes,
      subjectClaim: l.subject_claim,
      extraAuthorizeParams: l.extra_authorize_params,
    };
  }

  private async staticClients(a: AsFile, at: Locate): Promise<StaticClientConfig[]> {
    const clients: StaticClientConfig[] = [];
    const ids = new Set<string>();
    for (const [i, c] of a.clients.entries()) {
      const here = ['authorization_server', 'clients', i];
      if (ids.has(c.client_id)) this.issue(at, [...here, 'client_id'], `client_id ${c.client_id} is listed twice`);
      ids.add(c.client_id);
      for (const [j, uri] of c.redirect_uris.entries()) {
        const verdict = checkRedirectUri(uri, { nativeSchemes: true });
        if (!verdict.ok) this.issue(at, [...here, 'redirect_uris', j], verdict.reason);
      }
      clients.push({
        clientId: c.client_id,
        clientSecret: c.client_secret && (await this.secret(at, [...here, 'client_secret'], c.client_secret)),
        clientName: c.client_name,
        redirectUris: c.redirect_uris,
        grantTypes: [...new Set(c.grant_types)],
        scopes: c.scopes,
      });
    }
    return clients;
  }

  private async route(source: Located<RouteFile>, publicUrl: string, builtinIssuer: string | undefined): Promise<RouteConfig> {
    const { value: f, at } = source;
    // A route at / is the public URL itself, never `<public_url>/`.
    const resource = canonicalUrl(f.resource ?? publicUrl + (f.path === '/' ? '' : f.path));
    if (isReservedPath(f.path)) this.issue(at, ['path'], `${f.path} is reserved for the gateway's own endpoints`);
    if (new URL(resource).search) this.issue(at, ['resource'], 'a resource URI has no query');
    const aggregate = await resolveUpstreams(f, at, (found) => this.issues.push(found), (e, here) =>
      this.upstreamOf(here, e.upstream, e.upstream_auth ?? { kind: 'none' }, e.limits?.upstream_timeout ?? f.limits.upstream_timeout),
    );
    if (aggregate && f.upstream_auth.kind !== 'none') this.issue(at, ['upstream_auth'], 'an aggregated route takes upstream_auth in each of its upstreams');
    const upstream = f.upstream !== undefined && !aggregate
      ? await this.upstreamOf(at, f.upstream, f.upstream_auth, f.limits.upstream_timeout)
      : { upstream: `aggregate:${aggregate?.upstreams.map((u) => u.name).join(',') ?? ''}`, upstreamAuth: { kind: 'none' as const }, upstreamTimeoutMs: parseDuration(f.limits.upstream_timeout) };

    let authorizationServers = f.authorization_servers;
    if (!authorizationServers) {
      if (!builtinIssuer) this.issue(at, [], 'authorization_servers is required without the built-in authorization server');
      authorizationServers = builtinIssuer ? [builtinIssuer] : [];
    }
    return {
      file: source.file,
      path: f.path,
      ...upstream,
      ...(aggregate && { aggregate }),
      resource,
      resourceMetadataUrl: resourceMetadataUrl(resource),
      authorizationServers,
      token: await this.token(source, builtinIssuer !== undefined),
      ...dpopOf(f.token?.dpop ?? 'allowed', f.token?.dpop_nonce ?? false, publicUrl, f.path),
      scopesSupported: f.scopes_supported,
      requiredScopes: f.required_scopes,
      rules: f.rules.map(
        (r, i): RuleConfig => ({
          match: r.match,
          source: ruleSource(at(['rules', i], '')),
          ...(r.require_scopes && { requireScopes: r.require_scopes }),
          ...(r.deny && { deny: r.deny }),
          ...(r.allow_clients && { allowClients: r.allow_clients }),
          ...(r.allow_subjects && { allowSubjects: r.allow_subjects }),
        }),
      ),
      ...{ filterToolsList: f.filter_tools_list, identityHeaders: resolveIdentityHeaders(f.identity_headers) },
      rateLimits: f.rate_limits.map(
        (l, i): RouteRateLimitConfig => ({
          per: l.per,
          ...(l.match && { match: l.match }),
          requests: l.requests,
          windowMs: parseDuration(l.window),
          source: ruleSource(at(['rate_limits', i], '')),
        }),
      ),
      allowedOrigins: f.cors.allowed_origins,
      maxBodyBytes: f.limits.max_body_bytes,
      maxGetStreamsPerUser: f.limits.max_get_streams_per_user,
      maxRequestsInFlightPerUser: f.limits.max_requests_in_flight_per_user,
    };
  }

  private async token({ value: f, at }: Located<RouteFile>, builtin: boolean): Promise<TokenConfig> {
    const { jwt, introspection } = f.token ?? {};
    if (jwt) {
      // Without jwks_uri the issuer's metadata is fetched, so it is outbound too.
      this.warnHttp(at, ['token', 'jwt', jwt.jwks_uri ? 'jwks_uri' : 'issuer'], jwt.jwks_uri ?? jwt.issuer);
      this.warn(at, ['token', 'jwt', 'issuer'], issuerWithTrailingSlash(jwt.issuer));
      return { kind: 'jwt', issuer: jwt.issuer, jwksUri: jwt.jwks_uri, algorithms: jwt.algorithms, clockSkewSeconds: parseDuration(jwt.clock_skew) / 1000 };
    }
    if (introspection) {
      this.warnHttp(at, ['token', 'introspection', 'endpoint'], introspection.endpoint);
      if (introspection.issuer) this.warn(at, ['token', 'introspection', 'issuer'], issuerWithTrailingSlash(introspection.issuer));
      return {
        kind: 'introspection',
        endpoint: introspection.endpoint,
        clientId: introspection.client_id,
        clientSecret: await this.secret(at, ['token', 'introspection', 'client_secret'], introspection.client_secret),
        issuer: introspection.issuer,
        cacheTtlMs: parseDuration(introspection.cache_ttl),
      };
    }
    if (!builtin) this.issue(at, [], 'token is required without the built-in authorization server (token: { jwt: ... } or { introspection: ... })');
    return { kind: 'builtin' };
  }

  /** A route's upstream, or an aggregated route's entry's (`at` then points into the entry). */
  private async upstreamOf(at: Locate, u: UpstreamFile, auth: UpstreamAuthFile, timeout: string): Promise<Pick<RouteConfig, 'upstream' | 'stdio' | 'sse' | 'upstreamAuth' | 'upstreamTimeoutMs'>> {
    const stdio = typeof u === 'object' && 'stdio' in u ? await this.stdioUpstream(at, auth.kind, u.stdio) : undefined;
    const sse = typeof u === 'object' && 'sse' in u ? this.sseUpstream(at, u.sse) : undefined;
    const upstream = upstreamLabel(u);
    if (!stdio) {
      const upstreamAt = sse ? ['upstream', 'sse'] : ['upstream'];
      this.warnHttp(at, upstreamAt, upstream);
      this.warn(at, upstreamAt, upstreamWithoutPath(upstream));
    }
    return { upstream, ...(stdio && { stdio }), ...(sse && { sse }), upstreamAuth: await this.upstreamAuth(at, auth, upstream), upstreamTimeoutMs: parseDuration(timeout) };
  }

  private async upstreamAuth(at: Locate, u: UpstreamAuthFile, label: string): Promise<UpstreamAuthConfig> {
    const base = ['upstream_auth'];
    switch (u.kind) {
      case 'none':
      case 'idp_token':
        return { kind: u.kind };
      case 'static': {
        const secret = await this.secret(at, [...base, 'value'], u.value);
        // Header values cannot carry line breaks; refuse rather than inject.
        if (/[\r\n\0]/.test(secret)) this.issue(at, [...base, 'value'], 'the static value contains a line break or NUL');
        // A bare token in Authorization means Bearer; another header (X-API-Key) gets the value as written.
        const header = u.header.toLowerCase();
        const value = header === 'authorization' && !HAS_SCHEME.test(secret) ? `Bearer ${secret}` : secret;
        return { kind: 'static', header, value };
      }
      case 'client_credentials':
      case 'token_exchange': {
        this.warnHttp(at, [...base, 'token_endpoint'], u.token_endpoint);
        const common = {
          tokenEndpoint: u.token_endpoint,
          clientId: u.client_id,
          clientSecret: await this.secret(at, [...base, 'client_secret'], u.client_secret),
          scopes: u.scopes,
        };
        return u.kind === 'client_credentials'
          ? { kind: u.kind, ...common, resource: u.resource }
          : { kind: u.kind, ...common, audience: u.audience ?? label };
      }
      case 'signed':
        return { kind: 'signed', audience: u.audience ?? label, ttlMs: parseDuration(u.ttl) };
      case 'user_oauth':
        return resolveUserOAuth(u, label, { secret: (path, ref) => this.secret(at, path, ref), warnHttp: (path, url) => this.warnHttp(at, path, url) });
    }
  }

  /** A process the gateway starts: secrets in `env` read now, `cwd` made absolute, its sandbox and user checked. */
  private async stdioUpstream(at: Locate, authKind: UpstreamAuthFile['kind'], u: StdioUpstreamFile): Promise<StdioUpstreamConfig> {
    const base = ['upstream', 'stdio'];
    // The credential swap puts headers on an HTTP request; a process has none to carry them.
    if (authKind !== 'none') this.issue(at, ['upstream_auth', 'kind'], 'a stdio upstream takes upstream_auth kind none (pass credentials in upstream.stdio.env)');
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(u.env)) {
      env[name] = typeof value === 'string' ? value : await this.secret(at, [...base, 'env', name], value);
      if (env[name].includes('\0')) this.issue(at, [...base, 'env', name], 'an environment value cannot contain NUL');
    }
    const relative = (p: string) => (isAbsolute(p) ? p : resolvePath(this.input.configDir, p));
    const report = ({ path, message }: IsolationProblem) => this.issue(at, [...base, ...path], message);
    const sandbox = resolveSandbox(u.sandbox, report);
    const user = resolveUser(u.user, report);
    return {
      // A bare name is looked up in the process's PATH; anything with a slash is a path.
      command: u.command.includes('/') ? relative(u.command) : u.command,
      args: u.args,
      env,
      inheritEnv: u.inherit_env,
      ...(u.cwd !== undefined && { cwd: relative(u.cwd) }),
      maxProcesses: u.max_processes,
      maxProcessesPerPrincipal: this.perPrincipal(at, [...base, 'max_processes_per_principal'], u.max_processes_per_principal, u.max_processes, 'max_processes'),
      idleTimeoutMs: parseDuration(u.idle_timeout),
      ...(sandbox && { sandbox }),
      ...(user && { user }),
      resources: { processes: u.resources.processes, memoryBytes: u.resources.memory_mib * 1024 * 1024, cpus: u.resources.cpus },
    };
  }

  /** The session bounds of a legacy SSE route (`{ sse: URL }` takes the defaults). */
  private sseUpstream(at: Locate, u: SseUpstreamFile): SseUpstreamConfig {
    const maxSessions = typeof u === 'string' ? DEFAULT_SSE_SESSIONS : u.max_sessions;
    const given = typeof u === 'string' ? undefined : u.max_sessions_per_principal;
    return { maxSessions, maxSessionsPerPrincipal: this.perPrincipal(at, ['upstream', 'sse', 'max_sessions_per_principal'], given, maxSessions, 'max_sessions') };
  }

  /** A per-principal session cap: at most the route's (checked here), by default the smaller of the two. */
  private perPrincipal(at: Locate, path: ConfigPath, given: number | undefined, perRoute: number, perRouteKey: string): number {
    if (given === undefined) return Math.min(DEFAULT_SESSIONS_PER_PRINCIPAL, perRoute);
    if (given > perRoute) this.issue(at, path, `must be at most ${perRouteKey} (${perRoute})`);
    return given;
  }

  private async secret(at: Locate, path: ConfigPath, ref: SecretRefValue): Promise<string> {
    try {
      return await readSecret(ref, this.input.configDir, this.input.env);
    } catch (err) {
      this.issue(at, path, (err as Error).message);
      return '';
    }
  }

  private checkRedisUrl(at: Locate, url: string): void {
    try {
      parseRedisUrl(url);
    } catch (err) {
      if (!(err instanceof RedisUrlError)) throw err;
      this.issue(at, ['store', 'url'], err.message.replace(/^store\.url: /, ''));
    }
  }

  private warnHttp(at: Locate, path: ConfigPath, url: string): void {
    if (isPlainHttpRemote(url)) this.warn(at, path, `${redactUrl(url)} is plain http to a non-loopback host`);
  }

  private warn(at: Locate, path: ConfigPath, message: string | undefined): void {
    if (message !== undefined) this.warnings.push(formatIssue(at(path, message)));
  }

  private issue(at: Locate, path: ConfigPath, message: string): void {
    this.issues.push(at(path, message));
  }
}

/** `file:line` of a rule (the issue is only a position here). */
const ruleSource = ({ file, line }: ConfigIssue) => `${file}:${line}`;

function storeConfig(s: GatewayFile['store']): StoreConfig {
  return s.kind === 'memory'
    ? { kind: 'memory', maxEntries: s.max_entries }
    : { kind: 'redis', url: s.url, keyPrefix: s.key_prefix, commandTimeoutMs: parseDuration(s.command_timeout), requireNoeviction: s.require_noeviction, maxClockSkewMs: parseDuration(s.max_clock_skew) };
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** The route's DPoP settings: off leaves none; else the `htu` its proofs must name (the URL clients call, not `resource`). */
function dpopOf(mode: 'allowed' | 'required' | 'off', nonce: boolean, publicUrl: string, path: string): Pick<RouteConfig, 'dpop'> {
  if (mode === 'off') return {};
  const htu = normalizedHttpUri(publicUrl + path);
  if (htu === undefined) throw new Error(`public_url ${publicUrl} is not an http(s) URL`);
  return { dpop: { required: mode === 'required', htu, nonce } };
}

function rateLimits(r: AsFile['rate_limits']): AuthorizationServerRateLimits {
  const limit = (l: { requests: number; window: string }) => ({ max: l.requests, windowMs: parseDuration(l.window) });
  return {
    authorize: limit(r.authorize),
    token: limit(r.token),
    register: limit(r.register),
    registrations: limit(r.registrations),
    interaction: limit(r.interaction),
    pendingAuthorizations: limit(r.pending_authorizations),
  };
}

/** What audience-defaulting credential kinds name: the URL (a legacy server's SSE URL), or the stdio label. */
const upstreamLabel = (u: UpstreamFile): string =>
  typeof u === 'string' ? u : 'sse' in u ? (typeof u.sse === 'string' ? u.sse : u.sse.url) : `stdio:${u.stdio.command}`;

/** An https URL, or an http one to a loopback host (nothing on the network can read or change it). */
function isHttpsOrLoopback(url: string): boolean {
  const { protocol } = new URL(url);
  return protocol === 'https:' || (protocol === 'http:' && isLoopbackUrl(url));
}

/** Where an aggregated route's entry (`<path>#<name>`) is written: its problems are located inside `upstreams.<name>`. */
function entryLocate(at: Locate, path: string): Locate {
  const name = path.split('#')[1];
  return name === undefined ? at : (where, message, key) => at(['upstreams', name, ...where], message, key);
}
