// The runtime configuration: files validated, defaults applied, durations in
// milliseconds, secrets resolved, canonical URIs computed. Built once per load.
import type { IdentityHeader } from './identity-headers.js';
import type { JwtAlgorithm } from './jws-algorithms.js';
import type { JWT_BEARER_GRANT_TYPE } from './schema.js';
import type { UserOAuthConfig } from './user-oauth.js';
import type { AccountTokensConfig } from './account-tokens.js';
import type { JwksSettings } from './jwks-settings.js';

export type { UserOAuthConfig } from './user-oauth.js';

export interface JwtTokenConfig {
  kind: 'jwt';
  issuer: string;
  /** undefined: discover from the issuer's metadata. */
  jwksUri?: string;
  algorithms: JwtAlgorithm[];
  clockSkewSeconds: number;
}

export interface IntrospectionTokenConfig {
  kind: 'introspection';
  endpoint: string;
  clientId: string;
  clientSecret: string;
  issuer?: string;
  cacheTtlMs: number;
}

/** Tokens signed by the gateway's own authorization server. */
export interface BuiltinTokenConfig {
  kind: 'builtin';
}

export type TokenConfig = JwtTokenConfig | IntrospectionTokenConfig | BuiltinTokenConfig;

/**
 * DPoP (RFC 9449) on a route; absent: `dpop: off`. `htu` is what a proof's
 * `htu` must equal once normalised: public_url + the route's path (RFC 9449 §4.3).
 */
export interface DpopRouteConfig {
  required: boolean;
  htu: string;
  /** `token.dpop_nonce`: proofs carry a nonce the gateway handed out (RFC 9449 §8). */
  nonce: boolean;
}

export interface RuleConfig {
  match: { method?: string; tool?: string; uri?: string; prompt?: string; when?: string; upstream?: string };
  requireScopes?: string[];
  deny?: true;
  allowClients?: string[];
  allowSubjects?: string[];
  /** `file:line` of the rule, for `explain` and the audit log. */
  source?: string;
}

/** One of a route's `rate_limits`, durations in ms. */
export interface RouteRateLimitConfig {
  per: 'principal' | 'client' | 'subject';
  /** Undefined: every request to the route counts. */
  match?: RuleConfig['match'];
  requests: number;
  windowMs: number;
  /** `file:line` of the limit, for the audit log. */
  source?: string;
}

export type UpstreamAuthConfig =
  | { kind: 'none' }
  | { kind: 'static'; header: string; value: string }
  | { kind: 'client_credentials'; tokenEndpoint: string; clientId: string; clientSecret: string; scopes: string[]; resource?: string }
  | { kind: 'token_exchange'; tokenEndpoint: string; clientId: string; clientSecret: string; audience: string; scopes: string[] }
  | { kind: 'idp_token' }
  | { kind: 'signed'; audience: string; ttlMs: number }
  | UserOAuthConfig;

/** `upstream: { stdio: ... }`: the gateway starts the server itself (src/proxy/stdio/). */
export interface StdioUpstreamConfig {
  command: string;
  /** May hold `${PROCESS_DIR}`, replaced per process. */
  args: string[];
  /** Secrets already read; plain values may hold `${PROCESS_DIR}`. */
  env: Record<string, string>;
  inheritEnv: string[];
  /** Absolute; undefined: the process's own private directory. */
  cwd?: string;
  maxProcesses: number;
  /** At most maxProcesses. */
  maxProcessesPerPrincipal: number;
  idleTimeoutMs: number;
  /** Undefined: no sandbox. */
  sandbox?: StdioSandboxConfig;
  /** Undefined: the gateway's own user. */
  user?: StdioUserConfig;
  resources: StdioResources;
}

/** `upstream.stdio.resources`: what one process and all it starts may use at once. */
export interface StdioResources {
  processes: number;
  memoryBytes: number;
  cpus: number;
}

/** `upstream.stdio.sandbox`: paths absolute, checked to exist at load. */
export interface StdioSandboxConfig {
  kind: 'bubblewrap';
  readable: string[];
  writable: string[];
  network: boolean;
}

/** `upstream.stdio.user`, names resolved at load. */
export interface StdioUserConfig {
  uid: number;
  gid: number;
}

/** `upstream: { sse: ... }`: the bounds of a legacy HTTP+SSE route's sessions (its URL is the route's `upstream`). */
export interface SseUpstreamConfig {
  maxSessions: number;
  /** At most maxSessions. */
  maxSessionsPerPrincipal: number;
}

export interface RouteConfig {
  /** The file this route came from, for messages. */
  file: string;
  path: string;
  /** The Streamable HTTP URL; for a legacy SSE route, its SSE URL; for a stdio route, `stdio:<command>` (a label only). */
  upstream: string;
  /** Set when the upstream is a process the gateway starts (then `upstream` is a label). */
  stdio?: StdioUpstreamConfig;
  /** Set when `upstream` is the SSE URL of a legacy HTTP+SSE server (2024-11-05 transport; src/proxy/sse/). */
  sse?: SseUpstreamConfig;
  /** Canonical resource URI: the audience tokens must carry. */
  resource: string;
  /** `<public_url>/.well-known/oauth-protected-resource<path>` */
  resourceMetadataUrl: string;
  authorizationServers: string[];
  token: TokenConfig;
  /** undefined: DPoP off on this route. */
  dpop?: DpopRouteConfig;
  scopesSupported: string[];
  requiredScopes: string[];
  rules: RuleConfig[];
  filterToolsList: boolean;
  /** `identity_headers`, names lower-cased; undefined or empty: none. */
  identityHeaders?: readonly IdentityHeader[];
  rateLimits: RouteRateLimitConfig[];
  allowedOrigins: string[];
  maxBodyBytes: number;
  upstreamTimeoutMs: number;
  /** Open GET streams of one user on a Streamable HTTP route (proxy/stream-quota.ts). */
  maxGetStreamsPerUser: number;
  /** POSTs of one user in flight on the route, whatever the transport (proxy/in-flight-share.ts). */
  maxRequestsInFlightPerUser: number;
  upstreamAuth: UpstreamAuthConfig;
  /** Set on an aggregated route (`upstreams:`, config/upstreams.ts); then `upstream` is a label. */
  aggregate?: AggregateConfig;
}

/** One route in front of several servers (DESIGN §8.2). */
export interface AggregateConfig {
  /** `names:`, checked to hold {upstream} and {name} once each. */
  pattern: string;
  /** In configuration order (the first wins a resource URI clash). */
  upstreams: AggregateUpstreamConfig[];
}

/** An entry of `upstreams:`: the route's upstream settings, its own. */
export type AggregateUpstreamConfig = Pick<RouteConfig, 'upstream' | 'stdio' | 'sse' | 'upstreamAuth' | 'upstreamTimeoutMs'> & {
  name: string;
  /** The upstream's own tool or prompt name → the shown one. */
  renames: Record<string, string>;
};

export type StoreConfig =
  | { kind: 'memory'; maxEntries: number }
  | {
      kind: 'redis';
      url: string;
      keyPrefix: string;
      commandTimeoutMs: number;
      requireNoeviction: boolean;
      /** `max_clock_skew`: how far apart replicas' clocks (and each from Redis's) may be (config/replica-clocks.ts). */
      maxClockSkewMs: number;
    };

export interface OidcLoginConfig {
  kind: 'oidc';
  issuer: string;
  clientId: string;
  clientSecret?: string;
  scopes: string[];
  /** Send the client's RFC 8707 `resource` to the IdP (authorization and code exchange). */
  sendResource: boolean;
  /** The ID token claim that becomes the gateway token's `sub`. */
  subjectClaim: string;
  extraAuthorizeParams: Record<string, string>;
}

/** An OAuth 2.0 IdP without OpenID Connect (GitHub): the user is read from its user endpoint. */
export interface OAuth2LoginConfig {
  kind: 'oauth2';
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userinfoEndpoint: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  /** The member of the user JSON that becomes the gateway token's `sub`. */
  subjectClaim: string;
  extraAuthorizeParams: Record<string, string>;
}

export type LoginConfig = { kind: 'dev' } | OidcLoginConfig | OAuth2LoginConfig;

export interface AuthorizationServerConfig {
  issuer: string;
  /** Private JWK as JSON text; undefined: generate a dev key. */
  signingKey?: string;
  accessTokenTtlMs: number;
  refreshTokenTtlMs: number;
  defaultResource?: string;
  dynamicRegistration: boolean;
  clientIdMetadataDocuments: boolean;
  login: LoginConfig;
  /** Pre-registered clients (`authorization_server.clients`). */
  clients?: StaticClientConfig[];
  /** Enterprise IdPs whose ID-JAGs /token accepts (`authorization_server.enterprise_idps`); empty: the jwt-bearer grant is not offered. */
  enterpriseIdps: EnterpriseIdpConfig[];
  /** Flood limits (`authorization_server.rate_limits`). */
  rateLimits: AuthorizationServerRateLimits;
  /** `account.enabled` in gateway.yaml: the connected-apps page at /account/apps. */
  accountPage?: boolean;
  /** `dpop_nonce`: DPoP proofs at /token carry a nonce the gateway handed out (RFC 9449 §9). */
  dpopNonce: boolean;
}

/** At most `max` in each fixed window of `windowMs`. */
export interface RateLimitConfig {
  max: number;
  windowMs: number;
}

export interface AuthorizationServerRateLimits {
  /** Per client address. */
  authorize: RateLimitConfig;
  token: RateLimitConfig;
  register: RateLimitConfig;
  registrations: RateLimitConfig;
  interaction: RateLimitConfig;
  /** All addresses together. */
  pendingAuthorizations: RateLimitConfig;
}

export interface EnterpriseIdpConfig {
  /** Compared exactly with an assertion's `iss`. */
  issuer: string;
  jwksUri: string;
}

export interface StaticClientConfig {
  clientId: string;
  /** Resolved secret; undefined: a public client. */
  clientSecret?: string;
  clientName?: string;
  redirectUris: string[];
  grantTypes: Array<'authorization_code' | 'refresh_token' | 'client_credentials' | typeof JWT_BEARER_GRANT_TYPE>;
  /** The scopes the client may be granted; undefined: any scope of the resource. */
  scopes?: string[];
}

/** OpenTelemetry traces, resolved from `telemetry.traces` and the OTEL_* variables (config/telemetry.ts). */
export interface TracesConfig {
  /** Where spans are POSTed: the whole URL (`…/v1/traces`). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: may hold the collector's credential, never printed. */
  headers: Record<string, string>;
  /** The share of traces sampled, decided by trace id. */
  sampleRatio: number;
  /** Follow the incoming `traceparent`'s sampled flag (OTEL_TRACES_SAMPLER=parentbased_*); the ratio decides the rest. */
  parentBased: boolean;
  serviceName: string;
  /** One export request gives up after this long. */
  exportTimeoutMs: number;
}

export interface GatewayConfig {
  /** The directory or file the configuration was loaded from. */
  source: string;
  /** sha256 of the files as read (config-files.ts); undefined when built in code. */
  digest?: string;
  host: string;
  port: number;
  /** No trailing slash. */
  publicUrl: string;
  /** Trusted reverse proxies in front (true: one); false: X-Forwarded-* ignored. */
  trustProxy: boolean | number;
  store: StoreConfig;
  auditSink: 'stdout' | 'stderr' | 'none';
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  shutdownGraceMs: number;
  /** After SIGTERM: keep accepting connections this long (load balancers catching up), then stop listening. */
  drainDelayMs: number;
  headerTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxHeaderBytes: number;
  storeTimeoutMs: number;
  /** `jwks:` (config/jwks-settings.ts); undefined (a configuration built in code): its defaults. */
  jwks?: JwksSettings;
  authorizationServer?: AuthorizationServerConfig;
  /** `dpop_nonce_key`, resolved; undefined: DPoP nonces derive from the built-in AS signing key (if any). */
  dpopNonceKey?: string;
  /** Undefined: tracing off (no endpoint configured). */
  traces?: TracesConfig;
  /** `account_tokens`: the keys of users' upstream grants (user_oauth). */
  accountTokens?: AccountTokensConfig;
  routes: RouteConfig[];
  /** Non-fatal findings (e.g. plain-http outbound URLs), logged at start-up. */
  warnings: string[];
}
