// The configuration file formats. Pure zod without transforms, so the same
// schema validates files and generates schema/gateway.schema.json.
import { z } from 'zod';
import { WhenSchema } from './cel-when.js';
import { IdentityHeadersSchema } from './identity-headers.js';
import { parseDuration } from './duration.js';
import { ASYMMETRIC_JWS_ALGORITHMS } from './jws-algorithms.js';
import { GATEWAY_AUTHORIZE_PARAMS, isGatewayAuthorizeParam } from './idp-authorize-params.js';
import { userOAuthSchema } from './user-oauth.js';
import { accountTokensSchema } from './account-tokens.js';
import { aggregateRouteFields } from './upstreams-schema.js';
import { MaxClockSkew } from './replica-clocks.js';
import { JwksSettingsSchema } from './jwks-settings.js';

/** A duration such as `500ms`, `60s`, `10m`, `12h`, `30d`. */
export const Duration = z
  .string()
  .regex(/^[1-9][0-9]*(ms|s|m|h|d)$/, 'expected a duration such as 500ms, 60s, 10m, 12h or 30d')
  .meta({ id: 'Duration', description: 'A duration: a positive integer and a unit (ms, s, m, h, d), e.g. 60s or 10m' });

/** A secret is never inline: it names an environment variable or a file. */
export const SecretRef = z
  .union(
    [
      z.strictObject({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name') }),
      z.strictObject({ file: z.string().min(1) }),
    ],
    {
      error: (issue) =>
        typeof issue.input === 'object' && issue.input !== null
          ? 'a secret is exactly one of { env: NAME } or { file: path }'
          : 'a secret is never inline: write { env: NAME } or { file: path }',
    },
  )
  .meta({ id: 'SecretRef', description: 'A secret, never inline: { env: NAME } or { file: path } (relative to the config directory)' });

const HttpUrl = z
  .string()
  .refine((s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol), 'expected an http(s) URL')
  .refine((s) => !s.includes('#'), 'a URL here must not have a fragment')
  .meta({ id: 'HttpUrl', description: 'An absolute http(s) URL without a fragment' });

const Scope = z
  .string()
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, 'not a valid OAuth scope token (RFC 6749 §3.3)')
  .meta({ id: 'Scope', description: 'An OAuth scope token (RFC 6749 §3.3)' });

const RoutePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/, 'a route path starts with / and holds only unreserved path characters')
  .refine((p) => p === '/' || !p.endsWith('/'), 'a route path has no trailing slash')
  .refine((p) => !p.split('/').some((s) => s === '.' || s === '..'), 'a route path has no . or .. segments')
  .refine((p) => !p.includes('//'), 'a route path has no empty segments');

const JwtAlgorithm = z.enum(ASYMMETRIC_JWS_ALGORITHMS);

export const TokenSchema = z
  .strictObject({
    jwt: z
      .strictObject({
        issuer: HttpUrl,
        jwks_uri: HttpUrl.optional().describe('default: discovered from the issuer metadata (RFC 8414, then OpenID)'),
        algorithms: z.array(JwtAlgorithm).min(1).default(['RS256', 'ES256']),
        clock_skew: Duration.default('30s'),
      })
      .optional(),
    introspection: z
      .strictObject({
        endpoint: HttpUrl,
        client_id: z.string().min(1),
        client_secret: SecretRef,
        issuer: HttpUrl.optional().describe("expected `iss` of active tokens (default: any)"),
        cache_ttl: Duration.default('60s'),
      })
      .optional(),
    dpop: z
      .enum(['allowed', 'required', 'off'])
      .default('allowed')
      .describe('DPoP (RFC 9449): allowed (Bearer or DPoP), required (DPoP only), off (the DPoP scheme is unknown here)'),
    dpop_nonce: z
      .boolean()
      .default(false)
      .describe('DPoP proofs must carry a nonce this gateway handed out in DPoP-Nonce (RFC 9449 §8); the key is dpop_nonce_key or derived from the built-in AS signing key'),
  })
  // Neither is the built-in AS's tokens (only `dpop` given); resolve.ts says when there is none.
  .refine((t) => !(t.jwt && t.introspection), 'choose exactly one of jwt or introspection')
  .refine((t) => !(t.dpop_nonce && t.dpop === 'off'), { message: 'dpop_nonce needs dpop allowed or required', path: ['dpop_nonce'] })
  .meta({ id: 'Token' });

const Glob = z.string().min(1);

/** What a rule or a rate limit applies to: JSON-RPC messages by method and tool, resource or prompt name (globs). */
const MATCH_FIELDS = { method: z.string().min(1).optional(), tool: Glob.optional(), uri: Glob.optional(), prompt: Glob.optional(), upstream: z.string().min(1).optional().describe('on an aggregated route: tools and prompts of this upstream (by its name under upstreams)') };
const MatchSchema = z.strictObject(MATCH_FIELDS).refine((m) => Object.keys(m).length > 0, 'a match needs at least one of method, tool, uri, prompt, upstream');
/** A rule's match may also hold a CEL condition (cel-when.ts). */
const RuleMatchSchema = z
  .strictObject({ ...MATCH_FIELDS, when: WhenSchema.optional() })
  .refine((m) => Object.keys(m).length > 0, 'a match needs at least one of method, tool, uri, prompt, upstream, when');

export const RuleSchema = z
  .strictObject({
    match: RuleMatchSchema,
    require_scopes: z.array(Scope).optional(),
    deny: z.literal(true).optional(),
    allow_clients: z.array(z.string().min(1)).optional(),
    allow_subjects: z.array(z.string().min(1)).optional(),
  })
  .refine((r) => !(r.deny && (r.require_scopes || r.allow_clients || r.allow_subjects)), 'deny stands alone')
  .meta({ id: 'Rule' });

/** Longest rate-limit window: a counter lives as long as its window. */
const MAX_RATE_LIMIT_WINDOW_MS = 86_400_000;

export const RouteRateLimitSchema = z
  .strictObject({
    per: z.enum(['principal', 'client', 'subject']).describe('whose uses are counted together: principal (issuer, subject and client id), client (issuer and client id), subject (issuer and subject)'),
    match: MatchSchema.optional().describe('count only the messages a policy rule with this match would apply to (default: every request)'),
    requests: z.number().int().positive().max(1_000_000),
    window: Duration.refine((w) => {
      const ms = parseDuration(w);
      return ms >= 1000 && ms <= MAX_RATE_LIMIT_WINDOW_MS;
    }, 'a rate-limit window is between 1s and 1d'),
  })
  .meta({ id: 'RouteRateLimit', description: 'At most `requests` uses in any sliding `window`, shared by every replica through the store; over it: 429 with Retry-After' });

export const UpstreamAuthSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('none') }),
  z.strictObject({
    kind: z.literal('static'),
    header: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'not a header name').default('Authorization'),
    value: SecretRef,
  }),
  z.strictObject({
    kind: z.literal('client_credentials'),
    token_endpoint: HttpUrl,
    client_id: z.string().min(1),
    client_secret: SecretRef,
    scopes: z.array(Scope).default([]),
    resource: HttpUrl.optional(),
  }),
  z.strictObject({
    kind: z.literal('token_exchange'),
    token_endpoint: HttpUrl,
    client_id: z.string().min(1),
    client_secret: SecretRef,
    audience: z.string().min(1).optional().describe('default: the upstream URL'),
    scopes: z.array(Scope).default([]),
  }),
  z.strictObject({ kind: z.literal('idp_token') }),
  z.strictObject({
    kind: z.literal('signed'),
    audience: z.string().min(1).optional().describe('default: the upstream URL'),
    ttl: Duration.default('60s'),
  }),
  userOAuthSchema({ HttpUrl, SecretRef, Scope }),
]).meta({ id: 'UpstreamAuth', description: 'What the upstream receives instead of the client token' });

/** How many upstream sessions (stdio processes, legacy SSE streams) one principal holds on a route unless told otherwise. */
export const DEFAULT_SESSIONS_PER_PRINCIPAL = 4;
/** Upstream sessions (open SSE streams) of one legacy SSE route at once unless told otherwise. */
export const DEFAULT_SSE_SESSIONS = 1_000;

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name');

const AbsolutePath = z
  .string()
  .regex(/^\/[^\0]*$/, 'an absolute path (starting with /)')
  .refine((p) => !p.split('/').some((s) => s === '..'), 'a path here has no .. segments');

/** A Linux sandbox around each process (bubblewrap: namespaces, a fresh /proc, only chosen paths visible). */
export const StdioSandboxSchema = z
  .strictObject({
    kind: z.literal('bubblewrap', { error: 'the sandbox kind is bubblewrap' }),
    readable: z
      .array(AbsolutePath)
      .default([])
      .describe('read-only beyond the system set (/usr, /bin, /lib*, /sbin, the /etc files programs need): the server\'s own files, e.g. its node_modules; ["/"] shows the whole filesystem read-only'),
    writable: z.array(AbsolutePath).default([]).describe('read-write beyond ${PROCESS_DIR} (which always is), e.g. a shared package cache'),
    network: z.boolean().default(true).describe('false: the process gets a network namespace of its own, with no interface but loopback'),
  })
  .meta({ id: 'StdioSandbox', description: 'Runs each process in new PID, IPC, UTS, cgroup (and, when the process is not root, user) namespaces with bubblewrap' });

const UserOrGroup = z.union([z.number().int().min(0).max(4_294_967_294), z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]*\$?$/, 'a user or group name, or a number')], {
  error: (issue) => (issue.input === undefined ? 'required, but missing' : 'a user or group name, or a number from 0'),
});

/** Another OS user for each process: the gateway must be root or hold CAP_SETUID and CAP_SETGID. */
export const StdioUserSchema = z
  .strictObject({
    uid: UserOrGroup.describe('a user name (from /etc/passwd) or a numeric uid'),
    gid: UserOrGroup.optional().describe("a group name (from /etc/group) or a numeric gid; default: the user's primary group"),
  })
  .meta({ id: 'StdioUser', description: 'The OS user each process runs as; its ${PROCESS_DIR} is given to that user' });

/** `upstream.stdio.resources` when none is given: far above what an ordinary MCP server (npx included) needs. */
export const DEFAULT_STDIO_RESOURCES = { processes: 256, memoryBytes: 1024 * 1024 * 1024, cpus: 1 } as const;

/** What one process's cell may use, all its descendants together (src/proxy/stdio/resource-limits.ts): far above what an ordinary MCP server (npx included) needs. */
export const StdioResourcesSchema = z
  .strictObject({
    processes: z.number().int().min(8).max(32_768).default(DEFAULT_STDIO_RESOURCES.processes).describe('processes and threads at once (cgroup pids.max, v2 or v1; else RLIMIT_NPROC, per uid)'),
    memory_mib: z.number().int().min(64).max(1_048_576).default(DEFAULT_STDIO_RESOURCES.memoryBytes / 1048576).describe('MiB of memory, no swap (cgroup memory.max, or v1 memory.limit_in_bytes and memsw; else RLIMIT_DATA, per process); past it the kernel kills the process and its session ends'),
    cpus: z.number().min(0.01).max(1024).default(DEFAULT_STDIO_RESOURCES.cpus).describe('CPUs worth of time (cgroup cpu.max, or v1 cpu.cfs_quota_us); no fallback without a cgroup'),
  })
  .meta({ id: 'StdioResources', description: "Per-process bounds on processes, memory and CPU, so one user's server cannot take the machine's" });

export const StdioUpstreamSchema = z
  .strictObject({
    command: z.string().min(1).describe('the program to start: a name looked up in the inherited PATH, or a path (relative to the config directory)'),
    args: z.array(z.string()).default([]).describe('${PROCESS_DIR} is replaced by the process\'s private directory'),
    env: z
      .record(EnvName, z.union([z.string(), SecretRef]))
      .default({})
      .describe('the only variables the process gets besides inherit_env; ${PROCESS_DIR} in a plain value is replaced'),
    inherit_env: z.array(EnvName).default(['PATH', 'LANG']).describe("the gateway's own variables that pass to the process"),
    cwd: z.string().min(1).optional().describe('default: ${PROCESS_DIR}, a fresh private (0700) directory per process'),
    max_processes: z.number().int().positive().max(10_000).default(20).describe('per route; beyond it: 503 with Retry-After'),
    max_processes_per_principal: z
      .number()
      .int()
      .positive()
      .max(10_000)
      .optional()
      .describe(`at most max_processes; default ${DEFAULT_SESSIONS_PER_PRINCIPAL}, or max_processes when lower. At it, the principal's least recently used idle process is stopped to make room`),
    idle_timeout: Duration.default('10m').describe('a process idle this long is stopped (SIGTERM, then SIGKILL)'),
    sandbox: StdioSandboxSchema.optional().describe('default: none, the process sees what the gateway\'s user sees'),
    user: StdioUserSchema.optional().describe("default: the gateway's own user"),
    resources: StdioResourcesSchema.default({ processes: DEFAULT_STDIO_RESOURCES.processes, memory_mib: DEFAULT_STDIO_RESOURCES.memoryBytes / 1048576, cpus: DEFAULT_STDIO_RESOURCES.cpus }).describe('default: 256 processes, 1 GiB, 1 CPU'),
  })
  .meta({ id: 'StdioUpstream', description: 'An MCP server the gateway starts itself, one process per MCP session' });

/**
 * A `{ stdio: ... }` that fails on a type (a wrong `sandbox.kind`, a string for a boolean) fails
 * every option of the upstream union alike, so zod reports the union: this names the first
 * problem of the stdio option by its key (a missing command gets the list of keys).
 */
function stdioIssue(issue: { errors?: unknown }): string {
  const options = (issue.errors ?? []) as { path: PropertyKey[]; message: string }[][];
  const first = options.find((errs) => errs[0]?.path[0] === 'stdio')?.[0];
  const key = first?.path.slice(1).join('.');
  if (first === undefined || key === 'command' || key === '') return 'stdio needs at least command (then args, env, inherit_env, cwd, max_processes, idle_timeout, sandbox, user, resources)';
  return `stdio.${key}: ${first.message}`;
}

/** A legacy HTTP+SSE server (2024-11-05): the gateway opens its GET stream and POSTs to the endpoint it names. */
const SseUpstream = z
  .strictObject({
    sse: z.union(
      [
        HttpUrl,
        z.strictObject({
          url: HttpUrl.describe('the SSE URL (GET)'),
          max_sessions: z.number().int().positive().max(100_000).default(DEFAULT_SSE_SESSIONS).describe('upstream sessions (open SSE streams) of this route at once'),
          max_sessions_per_principal: z
            .number()
            .int()
            .positive()
            .max(100_000)
            .optional()
            .describe(`at most max_sessions; default ${DEFAULT_SESSIONS_PER_PRINCIPAL}, or max_sessions when lower. At it, the principal's least recently used idle session is ended to make room`),
        }),
      ],
      { error: (issue) => (issue.input === undefined ? undefined : 'expected an http(s) URL or { url, max_sessions, max_sessions_per_principal }') },
    ),
  })
  .meta({ id: 'SseUpstream', description: 'A legacy HTTP+SSE MCP server (2024-11-05 transport): its SSE URL, or the URL with its session bounds' });

/** Where a route's (or an aggregated route's entry's) MCP server is: Streamable HTTP, legacy SSE or a process. */
export const UpstreamSchema = z
  .union([HttpUrl, z.strictObject({ stdio: StdioUpstreamSchema }), SseUpstream], {
    // `{ sse: ... }` gets the errors of its one key (validate.ts locates them).
    error: (issue) =>
      issue.input === undefined
        ? 'required, but missing'
        : typeof issue.input === 'object' && issue.input !== null && 'stdio' in issue.input
          ? stdioIssue(issue)
          : typeof issue.input === 'object' && issue.input !== null && 'sse' in issue.input
            ? undefined
            : 'expected an http(s) URL, { sse: URL } (legacy HTTP+SSE) or { stdio: { command, ... } }',
  })
  .describe('a Streamable HTTP URL, { sse: URL } (a legacy HTTP+SSE server), or { stdio: { command, ... } }');

export const RouteSchema = z.strictObject({
  path: RoutePath,
  upstream: UpstreamSchema.optional().describe('required unless upstreams is given'),
  ...aggregateRouteFields({ upstream: UpstreamSchema, upstreamAuth: UpstreamAuthSchema, duration: Duration }),
  resource: HttpUrl.optional().describe('default: public_url + path'),
  authorization_servers: z.array(HttpUrl).min(1).optional().describe('default: the built-in AS'),
  token: TokenSchema.optional(),
  scopes_supported: z.array(Scope).default([]),
  required_scopes: z.array(Scope).default([]),
  rules: z.array(RuleSchema).default([]),
  filter_tools_list: z.boolean().default(false),
  rate_limits: z.array(RouteRateLimitSchema).max(20).default([]).describe('all that match a request apply'),
  cors: z.strictObject({ allowed_origins: z.array(HttpUrl).default([]) }).default({ allowed_origins: [] }),
  limits: z
    .strictObject({
      max_body_bytes: z.number().int().positive().max(1024 * 1024 * 1024).default(4 * 1024 * 1024),
      upstream_timeout: Duration.default('60s'),
      max_get_streams_per_user: z.number().int().positive().max(1_000_000).default(16).describe('open GET and subscriptions/listen streams of one user (all its clients) on a Streamable HTTP route, per replica; beyond: 429'),
      max_requests_in_flight_per_user: z.number().int().positive().max(1_000_000).default(64).describe('POST requests of one user (all its clients) in flight on the route, any transport, until each answer (stream included) ends, per replica; beyond: 429'),
    })
    .default({ max_body_bytes: 4 * 1024 * 1024, upstream_timeout: '60s', max_get_streams_per_user: 16, max_requests_in_flight_per_user: 64 }),
  upstream_auth: UpstreamAuthSchema.default({ kind: 'none' }),
  identity_headers: IdentityHeadersSchema.optional(),
})
  // Reported beside the route's other issues, not after them: hence `when`.
  .refine((r) => r.upstream !== undefined || r.upstreams !== undefined, {
    path: ['upstream'],
    message: 'required, but missing',
    when: ({ value }) => typeof value === 'object' && value !== null,
  })
  .meta({ id: 'RouteFile', description: 'One route: a file under the config directory other than gateway.yaml' });

export const StoreSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('memory'),
    max_entries: z
      .number()
      .int()
      .positive()
      .default(100_000)
      .describe('entries per key class (sessions, registrations, refresh tokens, revocations, …), each class bounded apart; see docs/storage.md'),
  }),
  z.strictObject({
    kind: z.literal('redis'),
    url: z.string().regex(/^rediss?(\+sentinel|\+cluster)?:\/\//, 'expected a redis:// or rediss:// URL'),
    key_prefix: z.string().default('mag:'),
    command_timeout: Duration.default('2s'),
    require_noeviction: z
      .boolean()
      .default(false)
      .describe('refuse to start unless Redis maxmemory-policy is verified to be noeviction (default: log an error and start)'),
    max_clock_skew: MaxClockSkew,
  }),
]).meta({ id: 'Store' });

/** A claim of the ID token (oidc) or member of the user JSON (oauth2) that names the user. */
const SubjectClaim = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'a claim name is 1 to 64 letters, digits or _ . : -');

const PARAM_NAME = /^[A-Za-z0-9_.~-]{1,64}$/;

const ExtraAuthorizeParams = z
  .record(z.string(), z.string().max(2048))
  // Names are checked here rather than by a key schema, whose issues zod words only as "Invalid key in record".
  .superRefine((params, ctx) => {
    for (const name of Object.keys(params)) {
      if (!PARAM_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'a parameter name is 1 to 64 letters, digits or _ . ~ -' });
      else if (isGatewayAuthorizeParam(name)) ctx.addIssue({ code: 'custom', path: [name], message: `${name} is set by the gateway itself (the gateway sets ${GATEWAY_AUTHORIZE_PARAMS.join(', ')})` });
    }
  })
  .default({})
  .describe('added to the authorization request at the IdP (e.g. Google access_type, Auth0 audience); never a parameter the gateway sets itself');

export const LoginSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('dev') }),
  z.strictObject({
    kind: z.literal('oidc'),
    issuer: HttpUrl,
    client_id: z.string().min(1),
    client_secret: SecretRef.optional(),
    scopes: z.array(Scope).default(['openid']),
    send_resource: z
      .boolean()
      .default(true)
      .describe("send the client's RFC 8707 resource in the IdP's authorization and token requests (false for Entra ID, which refuses it: AADSTS9010010)"),
    subject_claim: SubjectClaim.default('sub').describe("the ID token claim whose string value is the gateway token's sub (Entra ID: oid)"),
    extra_authorize_params: ExtraAuthorizeParams,
  }),
  z.strictObject({
    kind: z.literal('oauth2'),
    authorization_endpoint: HttpUrl,
    token_endpoint: HttpUrl,
    userinfo_endpoint: HttpUrl.describe('read with the access token; its JSON names the user'),
    client_id: z.string().min(1),
    client_secret: SecretRef.describe('sent to the token endpoint as client_secret_post'),
    scopes: z.array(Scope).default([]),
    subject_claim: SubjectClaim.describe("the member of the user JSON whose value (a string, or an integer made a string) is the gateway token's sub (GitHub: id)"),
    extra_authorize_params: ExtraAuthorizeParams,
  }),
]).meta({ id: 'Login', description: 'Where users prove who they are' });

/** RFC 7523 §2.1: the grant an ID-JAG is presented with at /token. */
export const JWT_BEARER_GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

/** An enterprise IdP whose ID-JAGs (draft-ietf-oauth-identity-assertion-authz-grant) /token accepts. */
export const EnterpriseIdpSchema = z
  .strictObject({
    issuer: HttpUrl.describe('the IdP\'s issuer identifier, compared exactly with the assertion\'s iss (https; http only on a loopback host)'),
    jwks_uri: HttpUrl.describe('where the IdP publishes the keys it signs ID-JAGs with (https; http only on a loopback host); fetched without redirects, cached, refetched for an unknown kid'),
  })
  .meta({ id: 'EnterpriseIdp', description: 'An enterprise IdP trusted to issue Identity Assertion JWT Authorization Grants (ID-JAG) for this gateway' });

export const StaticClientSchema = z
  .strictObject({
    client_id: z.string().regex(/^[\x21-\x7E]{1,255}$/, 'a client_id is 1 to 255 printable ASCII characters without spaces'),
    client_secret: SecretRef.optional().describe('confidential clients: authenticate with client_secret_basic or client_secret_post'),
    client_name: z.string().min(1).max(200).optional().describe('shown on the consent page'),
    redirect_uris: z.array(z.string().min(1)).max(20).default([]).describe('exact strings; http only on loopback hosts'),
    grant_types: z
      .array(z.enum(['authorization_code', 'refresh_token', 'client_credentials', JWT_BEARER_GRANT_TYPE]))
      .min(1)
      .default(['authorization_code', 'refresh_token'])
      .describe(`${JWT_BEARER_GRANT_TYPE}: ID-JAG assertions of authorization_server.enterprise_idps (a client_secret is required)`),
    scopes: z.array(Scope).optional().describe('the scopes this client may be granted (default: any scope of the requested resource)'),
  })
  .refine((c) => !c.grant_types.includes('client_credentials') || c.client_secret, 'client_credentials needs a client_secret')
  .refine((c) => !c.grant_types.includes(JWT_BEARER_GRANT_TYPE) || c.client_secret, 'the jwt-bearer grant (ID-JAG) needs a client_secret: only confidential clients may present assertions')
  .refine((c) => !c.grant_types.includes('authorization_code') || c.redirect_uris.length > 0, 'authorization_code needs at least one redirect_uri')
  .meta({ id: 'StaticClient', description: 'A client registered in configuration' });

const RateLimitSchema = z
  .strictObject({ requests: z.number().int().positive(), window: Duration })
  .meta({ id: 'RateLimit', description: 'At most `requests` in each fixed `window`' });

// The built-in AS's flood limits. Per client address (the socket peer, or the
// X-Forwarded-For entry of the trust_proxy hop; IPv6 by /64), shared by every
// replica through the store; over a limit: 429 with Retry-After.
/** A sign-in takes one or two /authorize requests; 300 a minute leaves room for a whole office behind one NAT. */
const DEFAULT_AUTHORIZE_LIMIT = { requests: 300, window: '1m' };
/** Code redemptions and refreshes of every client behind one address: the busiest endpoint (also /revoke). */
const DEFAULT_TOKEN_LIMIT = { requests: 600, window: '1m' };
/** Registration attempts, valid or not (each one is parsed): a client registers once. */
const DEFAULT_REGISTER_LIMIT = { requests: 300, window: '1m' };
/** Registrations that succeed: each is kept for at least 30 days, so far fewer. */
const DEFAULT_REGISTRATIONS_LIMIT = { requests: 60, window: '10m' };
/** Consent and login posts and the IdP callback: one or two per sign-in. */
const DEFAULT_INTERACTION_LIMIT = { requests: 300, window: '1m' };
/**
 * Pending authorizations written across all addresses (about 1 KiB, ten
 * minutes each), so this bounds them near twice this number in Redis however
 * many addresses a flood comes from. Counted only for valid requests, each
 * address first against a fiftieth of it (pending-authorization-budget.ts).
 */
const DEFAULT_PENDING_AUTHORIZATIONS_LIMIT = { requests: 20_000, window: '10m' };

const AuthorizationServerRateLimitsSchema = z
  .strictObject({
    authorize: RateLimitSchema.default(DEFAULT_AUTHORIZE_LIMIT).describe('GET/POST /authorize, per client address'),
    token: RateLimitSchema.default(DEFAULT_TOKEN_LIMIT).describe('/token and /revoke, per client address'),
    register: RateLimitSchema.default(DEFAULT_REGISTER_LIMIT).describe('/register attempts, per client address'),
    registrations: RateLimitSchema.default(DEFAULT_REGISTRATIONS_LIMIT).describe('successful registrations, per client address'),
    interaction: RateLimitSchema.default(DEFAULT_INTERACTION_LIMIT).describe('consent and login posts, the IdP callback, per client address'),
    pending_authorizations: RateLimitSchema.default(DEFAULT_PENDING_AUTHORIZATIONS_LIMIT).describe('sign-ins started (pending authorizations written) by valid requests from all addresses together; each address may use a fiftieth'),
  })
  .meta({ id: 'AuthorizationServerRateLimits', description: 'Flood limits of the built-in AS; the store being down lets requests through (counted in mag_rate_limit_fail_open_total)' });

export const AuthorizationServerSchema = z.strictObject({
  enabled: z.boolean().default(true),
  issuer: HttpUrl.optional().describe('default: public_url'),
  signing_key: SecretRef.optional().describe('a private JWK; dev: generated into a local 0600 file'),
  access_token_ttl: Duration.default('10m'),
  refresh_token_ttl: Duration.default('30d'),
  default_resource: HttpUrl.optional(),
  registration: z
    .strictObject({
      dynamic: z.boolean().default(true),
      client_id_metadata_documents: z.boolean().default(true),
    })
    .default({ dynamic: true, client_id_metadata_documents: true }),
  login: LoginSchema.default({ kind: 'dev' }),
  dpop_nonce: z.boolean().default(false).describe('DPoP proofs at /token must carry a nonce this gateway handed out in DPoP-Nonce (RFC 9449 §9)'),
  clients: z.array(StaticClientSchema).default([]).describe('pre-registered clients'),
  enterprise_idps: z
    .array(EnterpriseIdpSchema)
    .default([])
    .describe(`enterprise-managed authorization: /token accepts grant_type ${JWT_BEARER_GRANT_TYPE} with an ID-JAG signed by one of these IdPs, from configured confidential clients that list the grant`),
  rate_limits: AuthorizationServerRateLimitsSchema.default({
    authorize: DEFAULT_AUTHORIZE_LIMIT,
    token: DEFAULT_TOKEN_LIMIT,
    register: DEFAULT_REGISTER_LIMIT,
    registrations: DEFAULT_REGISTRATIONS_LIMIT,
    interaction: DEFAULT_INTERACTION_LIMIT,
    pending_authorizations: DEFAULT_PENDING_AUTHORIZATIONS_LIMIT,
  }),
}).meta({ id: 'AuthorizationServer', description: 'The gateway as its own OAuth authorization server' });

/** The OTLP/HTTP trace export (DESIGN §7.3); the standard OTEL_* variables override it (config/telemetry.ts). */
export const TelemetrySchema = z
  .strictObject({
    traces: z
      .strictObject({
        otlp_endpoint: HttpUrl.optional().describe(
          "the collector's OTLP/HTTP base URL (as OTEL_EXPORTER_OTLP_ENDPOINT): spans go to <otlp_endpoint>/v1/traces. Without it and without the OTEL_* variables, tracing is off",
        ),
        sample_ratio: z.number().min(0).max(1).default(1).describe('the share of requests traced, drawn by the gateway (neither the client\'s trace id nor its sampled flag decides)'),
      })
      .optional(),
  })
  .meta({ id: 'Telemetry', description: 'OpenTelemetry traces' });

export const GatewaySchema = z.strictObject({
  listen: z
    .strictObject({
      host: z.string().min(1).default('0.0.0.0'),
      port: z.number().int().min(0).max(65535).default(8080),
    })
    .default({ host: '0.0.0.0', port: 8080 }),
  public_url: HttpUrl.refine((u) => {
    // zod runs this refinement even when HttpUrl's failed: that failure is the one to report.
    if (!URL.canParse(u)) return true;
    const url = new URL(u);
    return url.search === '' && (url.pathname === '/' || !url.pathname.endsWith('/'));
  }, 'public_url has no query and no trailing slash'),
  trust_proxy: z
    .union([z.boolean(), z.number().int().min(1).max(16)])
    .default(false)
    .describe('the reverse proxies in front that append to X-Forwarded-For: true for one (an ingress), a number for a chain (CDN + ingress: 2); the client address is that many entries from the right. false: the header is ignored'),
  store: StoreSchema.default({ kind: 'memory', max_entries: 100_000 }),
  audit: z.strictObject({ sink: z.enum(['stdout', 'stderr', 'none']).default('stdout') }).default({ sink: 'stdout' }),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  shutdown_grace: Duration.default('25s'),
  drain_delay: z
    .union([z.literal('0s'), Duration])
    .default('5s')
    .describe('after SIGTERM, how long new connections are still served while load balancers stop routing here (Kubernetes endpoints take a few seconds); readiness is 503 throughout'),
  limits: z
    .strictObject({
      header_timeout: Duration.default('10s'),
      request_timeout: Duration.default('30s'),
      keep_alive_timeout: Duration.default('5s'),
      max_header_bytes: z.number().int().min(1024).max(1024 * 1024).default(16 * 1024),
      store_timeout: Duration.default('2s'),
    })
    .default({ header_timeout: '10s', request_timeout: '30s', keep_alive_timeout: '5s', max_header_bytes: 16384, store_timeout: '2s' }),
  jwks: JwksSettingsSchema,
  authorization_server: AuthorizationServerSchema.optional(),
  dpop_nonce_key: SecretRef.optional().describe(
    'the secret DPoP nonces are derived from, the same on every replica (at least 32 characters); default: derived from the built-in AS signing key. Needed for token.dpop_nonce without the built-in AS',
  ),
  telemetry: TelemetrySchema.optional(),
  account: z
    .strictObject({ enabled: z.boolean().default(false) })
    .optional()
    .describe('the connected-apps page at /account/apps (needs the built-in authorization server): users sign in with its login, see the clients they approved, and revoke them'),
  account_tokens: accountTokensSchema(SecretRef).optional(),
});

/**
 * A gateway.yaml as written: the global settings, plus optional inline routes so
 * a single-file configuration (`--config gateway.yaml`) can hold everything.
 */
export const GatewayDocumentSchema = GatewaySchema.extend({
  routes: z.array(RouteSchema).optional().describe('inline routes, in addition to the route files of a config directory'),
}).meta({ id: 'GatewayFile', description: 'gateway.yaml: the global settings' });

export type GatewayFile = z.infer<typeof GatewaySchema>;
export type RouteFile = z.infer<typeof RouteSchema>;
export type SecretRefValue = z.infer<typeof SecretRef>;
export type StdioUpstreamFile = z.infer<typeof StdioUpstreamSchema>;
export type SseUpstreamFile = z.infer<typeof SseUpstream>['sse'];
