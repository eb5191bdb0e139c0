// Header hygiene on both legs of the proxy (SECURITY H34, H35, H36, H38).
// Request: the client's credentials and any header an upstream might trust
// for identity are dropped, then the gateway's credential is added — so no
// client header (nor a hostile `Connection` naming one) can remove or
// override it. Response: hop-by-hop headers and what only the gateway may
// say to the client (challenges, CORS, cookies on its origin) are dropped.
import type { TraceHeaders } from '../observability/tracing.js';

/** RFC 9110 §7.6.1 hop-by-hop headers, plus the de-facto ones. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

// What never reaches an upstream: exact names here, families in
// DROP_FROM_REQUEST_PREFIXES. One list, judged once per name (judgeRequestHeader).
const DROP_FROM_REQUEST = new Set([
  ...HOP_BY_HOP,
  // Set to the upstream's own authority.
  'host',
  // The client's token never passes, in any mode (README, first list), nor
  // the DPoP proof bound to it (RFC 9449; DESIGN §7.4).
  'authorization',
  'dpop',
  // The gateway's own cookies (AS session, consent) share its origin; MCP
  // clients authenticate with bearer tokens, so no cookie is the upstream's.
  'cookie',
  // The proxy sends the buffered body with its own length; undici also
  // refuses `expect`, and the body has been read already anyway.
  'content-length',
  'expect',
  // Identity and client-address headers an upstream may trust.
  'forwarded',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'x-user',
  'x-email',
  // A TLS client certificate a terminating proxy vouches for (RFC 9440).
  'client-cert',
  'client-cert-chain',
  // Kong's OpenID Connect plugin; oauth2-proxy (`x-access-token`, `gap-auth`).
  'x-userinfo',
  'x-access-token',
  'x-id-token',
  'gap-auth',
  // Google Cloud Endpoints and API Gateway: the verified JWT's claims.
  'x-endpoint-api-userinfo',
  'x-apigateway-api-userinfo',
  // Cloud Run checks IAM against this one before Authorization: the client's would replace the gateway's.
  'x-serverless-authorization',
  // Would let a client bypass per-method routing or rewrite the path upstream.
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-rewrite-url',
  // W3C Baggage: name=value pairs an instrumented upstream copies into its own
  // spans, logs and onward calls, and some read as the caller's attributes
  // (`user.id=admin`). The client's word about itself; the gateway adds none.
  'baggage',
]);

/**
 * Header families an upstream behind an identity-aware proxy trusts as the
 * proxy's word about the user or the client certificate. Whichever proxy the
 * operator might put behind the gateway, a client must not be able to speak
 * for it.
 */
const DROP_FROM_REQUEST_PREFIXES = [
  // Proxy-Authorization and the other hop-by-hop `Proxy-*` headers.
  'proxy-',
  // X-Forwarded-For/-Host/-Proto, and oauth2-proxy's -User, -Email, -Access-Token.
  'x-forwarded-',
  // oauth2-proxy's X-Auth-Request-*; X-Auth-Token and the like.
  'x-auth-',
  // Kong (X-Authenticated-Userid, -Scope), and generic ones.
  'x-authenticated-',
  'x-user-',
  'x-email-',
  'x-original-',
  // Apache/CGI REMOTE_USER; Authelia's Remote-User, -Groups, -Email, -Name.
  'remote-',
  'x-remote-',
  // Azure App Service authentication (Easy Auth): X-MS-Client-Principal,
  // X-MS-Client-Principal-Name/-Id/-Idp, X-MS-Token-AAD-Access-Token/-Id-Token.
  'x-ms-client-principal',
  'x-ms-token-',
  // Cloudflare Access: Cf-Access-Jwt-Assertion, Cf-Access-Authenticated-User-Email.
  'cf-access-',
  // AWS Application Load Balancer: X-Amzn-Oidc-Identity/-Data/-Accesstoken.
  'x-amzn-oidc-',
  // Google Identity-Aware Proxy: X-Goog-Authenticated-User-*, X-Goog-IAP-JWT-Assertion.
  'x-goog-authenticated-',
  'x-goog-iap-',
  // Pomerium: X-Pomerium-Jwt-Assertion, X-Pomerium-Claim-*.
  'x-pomerium-',
  // Grafana's and others' auth-proxy mode: X-WEBAUTH-USER, -EMAIL, -NAME.
  'x-webauth-',
  // authentik and Vouch Proxy outposts.
  'x-authentik-',
  'x-vouch-',
  // `tailscale serve`: Tailscale-User-Login, -Name, -Profile-Pic, Tailscale-App-Capabilities.
  'tailscale-',
  // Teleport application access: Teleport-Jwt-Assertion.
  'teleport-',
  // A verified JWT's payload or claims forwarded by a proxy: Envoy jwt_authn (X-Jwt-Payload), WSO2 (X-JWT-Assertion), Istio claim headers.
  'x-jwt-',
  // Kong consumers: X-Consumer-Id, -Username, -Custom-Id, -Groups.
  'x-consumer-',
  // TLS client certificates from nginx, HAProxy, F5 and Envoy-style setups:
  // X-SSL-Client-Cert, X-SSL-Client-S-DN, SSL-Client-Cert, X-Client-Cert(-Chain).
  'x-ssl-',
  'ssl-client-',
  'x-client-cert',
];

const DROP_FROM_REQUEST_PREFIX = new RegExp(`^(?:${DROP_FROM_REQUEST_PREFIXES.join('|')})`);

const DROP_FROM_RESPONSE = new Set([
  ...HOP_BY_HOP,
  'proxy-authenticate',
  // The upstream's own challenge names its own AS; the client deals only with
  // the gateway's (SECURITY H36).
  'www-authenticate',
  // Requests never carry cookies to the upstream (above), so an upstream
  // cookie could never come back; it could only plant cookies on the
  // gateway's origin, next to the AS's session and consent cookies.
  'set-cookie',
]);

/** What `Connection` usually says: nothing beyond the hop-by-hop headers dropped anyway. */
const PLAIN_CONNECTION = /^\s*(?:keep-alive|close)\s*$/i;

/**
 * Lower-case tokens of every `Connection` header value: further headers the
 * sender declared hop-by-hop. Undefined when it names none beyond HOP_BY_HOP.
 */
function connectionTokens(values: string | readonly string[]): Set<string> | undefined {
  if (typeof values === 'string') return connectionTokensOf(values, undefined);
  let named: Set<string> | undefined;
  for (let i = 0; i < values.length; i++) named = connectionTokensOf(values[i]!, named);
  return named;
}

function connectionTokensOf(value: string, named: Set<string> | undefined): Set<string> | undefined {
  if (value === 'keep-alive' || value === 'close' || PLAIN_CONNECTION.test(value)) return named;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && !HOP_BY_HOP.has(name)) (named ??= new Set()).add(name);
  }
  return named;
}

export interface UpstreamHeaderOptions {
  /** The upstream's `host[:port]`. */
  hostHeader: string;
  /** The credential the route's `upstream_auth` produces; lower-case names. */
  injected: Readonly<Record<string, string>>;
  /** With tracing on, the gateway's W3C trace context: the client's `traceparent` and `tracestate` are replaced by it, never passed. */
  trace?: TraceHeaders;
  /** Lower-case names the gateway alone may send (the route's identity_headers): the client's copies are removed, whether or not `injected` sets them. */
  strip?: ReadonlySet<string>;
}

/** What the request policy makes of one header name, whatever its value. */
interface RequestHeaderName {
  /** Lower-cased, as sent upstream. */
  name: string;
  dropped: boolean;
}

/**
 * Names an upstream reads exactly as the gateway does. CGI, WSGI, Rack and
 * PHP read a header as `HTTP_` + upper case with `-` → `_`, so `Mcp_Session_Id`
 * lands on the same variable as `Mcp-Session-Id` while the gateway (and every
 * check it makes) sees two different headers. Only letters, digits and `-`
 * map one-to-one; anything else (`_`, `.`, …) is dropped, as nginx does with
 * `_` and Apache httpd with any other character (SECURITY J50).
 */
const UNAMBIGUOUS_NAME = /^[a-z0-9-]+$/;

// Clients send the same few header names on every request: each is judged
// once. Bounded, so a client inventing names cannot grow it.
const judgedNames = new Map<string, RequestHeaderName>();
const MAX_JUDGED_NAMES = 1_024;

function judgeRequestHeader(raw: string): RequestHeaderName {
  let judged = judgedNames.get(raw);
  if (judged === undefined) {
    const name = raw.toLowerCase();
    judged = { name, dropped: !UNAMBIGUOUS_NAME.test(name) || DROP_FROM_REQUEST.has(name) || DROP_FROM_REQUEST_PREFIX.test(name) };
    if (judgedNames.size >= MAX_JUDGED_NAMES) judgedNames.clear();
    judgedNames.set(raw, judged);
  }
  return judged;
}

/**
 * Headers for the upstream request from Node's `req.rawHeaders`, as undici's
 * flat `[name, value, …]` list (duplicates kept in order).
 */
export function buildUpstreamHeaders(rawHeaders: readonly string[], opts: UpstreamHeaderOptions): string[] {
  const { injected, trace, strip } = opts;
  const out: string[] = ['host', opts.hostHeader];
  let connectionValues: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = judgeRequestHeader(rawHeaders[i]!);
    if (header.name === 'connection') (connectionValues ??= []).push(rawHeaders[i + 1]!);
    if (header.dropped || Object.hasOwn(injected, header.name) || strip?.has(header.name)) continue;
    if (trace !== undefined && (header.name === 'traceparent' || header.name === 'tracestate')) continue;
    out.push(header.name, rawHeaders[i + 1]!);
  }
  // Headers the client declared hop-by-hop, wherever they came in the request (never `host`, set above).
  const named = connectionValues && connectionTokens(connectionValues);
  if (named) {
    for (let i = out.length - 2; i >= 2; i -= 2) if (named.has(out[i]!)) out.splice(i, 2);
  }
  // Added last and never subject to `Connection`: the client cannot remove them.
  for (const name in injected) out.push(name, injected[name]!);
  if (trace !== undefined) {
    out.push('traceparent', trace.traceparent);
    if (trace.tracestate !== undefined) out.push('tracestate', trace.tracestate);
  }
  return out;
}

export type ResponseHeaders = Record<string, string | string[]>;

/** Upstream response headers (undici: lower-case names) minus what must not reach the client. */
export function filterResponseHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): ResponseHeaders {
  const connection = headers['connection'];
  const named = connection === undefined ? undefined : connectionTokens(connection);
  // A plain object, as undici's own: Node's writeHead walks it with for…in,
  // which a prototype-less (dictionary-mode) object makes slow. `__proto__` is
  // then defined, never assigned, as undici does.
  const out: ResponseHeaders = {};
  // for…in over own names: no array of keys nor iterator per response.
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || !Object.hasOwn(headers, name) || DROP_FROM_RESPONSE.has(name) || named?.has(name)) continue;
    // CORS is the gateway's policy alone (origin.ts); an upstream's `*` must not widen it.
    if (name.startsWith('access-control-')) continue;
    if (name === '__proto__') Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
    else out[name] = value;
  }
  return out;
}

/** Directives that would let a shared cache keep an answer (RFC 9111 §5.2.2.9, §5.2.2.10). */
const SHARED_CACHE_DIRECTIVE = /^(?:public|s-maxage(?:=.*)?)$/i;

/**
 * The upstream's `Cache-Control` for an answer meant for one caller only: its
 * directives but those that address shared caches, plus `private` (RFC 9111 §5.2.2.7).
 */
export function privateCacheControl(value: string | string[] | undefined): string {
  const directives = (Array.isArray(value) ? value.join(',') : (value ?? ''))
    .split(',')
    .map((directive) => directive.trim())
    .filter((directive) => directive !== '' && !SHARED_CACHE_DIRECTIVE.test(directive));
  if (!directives.some((directive) => directive.toLowerCase() === 'private')) directives.push('private');
  return directives.join(', ');
}
