// One protected route: origin check, bearer authentication, bounded body,
// policy and rate limits, credential swap, then the proxy. Whatever is thrown is translated
// (toGatewayError) and written once, by writeError.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteConfig } from '../config/types.js';
import { GatewayError, invalidRequest } from '../errors/gateway-error.js';
import { toGatewayError } from '../errors/translate.js';
import { authenticate } from '../auth/authenticate.js';
import { hasBodyAccessToken, isDpopScheme } from '../auth/bearer.js';
import type { TokenVerifier } from '../auth/verifier.js';
import { DPOP_ALGORITHMS } from '../config/jws-algorithms.js';
import { spendDpopProof, type DpopChecks } from '../auth/dpop-binding.js';
import { userKey, type AuthContext } from '../auth/principal.js';
import { readBody } from '../proxy/read-body.js';
import { checkOrigin, corsPreflight, corsResponseHeaders } from '../proxy/origin.js';
import type { ForwardContext, Forwarder } from '../proxy/forwarder.js';
import { endWithAuthorization } from '../proxy/authorization-lifetime.js';
import { opensLongLivedStream } from '../proxy/long-lived-request.js';
import { InFlightShare } from '../proxy/in-flight-share.js';
import { isForwardedMethod, methodNotAllowed } from '../proxy/forwarded-methods.js';
import type { UpstreamCredential } from '../upstream-auth/upstream-credential.js';
import type { Metrics, RequestOutcome } from '../observability/metrics.js';
import type { TallyCount } from '../observability/counter-tally.js';
import type { Logger } from '../observability/logger.js';
import { findDiagnosis, SaidOnce } from '../errors/diagnosis.js';
import { identityHeaderValues } from '../upstream-auth/identity-headers.js';
import type { GatewaySpan, Tracing } from '../observability/tracing.js';
import type { ChallengeContext } from '../errors/respond.js';
import { writeError } from '../errors/write-error.js';
import { asConnectElicitation } from './connect-elicitation.js';
import type { PolicyStep } from '../policy/policy-step.js';

const EMPTY_BODY = Buffer.alloc(0);
const FORM_CONTENT_TYPE = /^\s*application\/x-www-form-urlencoded\s*(;|$)/i;

export interface ProtectedRouteDeps {
  verifier: TokenVerifier;
  forwarder: Forwarder;
  credential: UpstreamCredential;
  metrics: Metrics;
  logger: Logger;
  /** The gateway's own origin (from public_url): same-origin requests always pass. */
  selfOrigin: string;
  /** Per-method and per-tool rules; without it, the route's required scopes only. */
  policy?: PolicyStep;
  /** The store's one-use check of DPoP proofs and the gateway's nonces; without it the DPoP scheme is refused as unknown. */
  dpop?: DpopChecks;
  /**
   * Benchmark only, never from configuration: every request is taken as this
   * principal and its token is not looked at, so `npm run bench` can measure
   * what authentication costs against the same gateway without it.
   */
  benchmarkPrincipal?: AuthContext;
  /** One server span per request when set; undefined (no endpoint configured): no span, not even a no-op one. */
  tracing?: Tracing;
}

export type ProtectedRouteHandler = (req: IncomingMessage, res: ServerResponse, search: string) => Promise<void>;
type SpannedHandler = (req: IncomingMessage, res: ServerResponse, search: string, span?: GatewaySpan) => Promise<void>;

export function createProtectedRoute(route: RouteConfig, deps: ProtectedRouteDeps): ProtectedRouteHandler {
  const handle = createHandler(route, deps);
  return deps.tracing ? tracedHandler(route, deps.tracing, handle) : handle;
}

function createHandler(route: RouteConfig, deps: ProtectedRouteDeps): SpannedHandler {
  const challenge = challengeOf(route, deps);
  const finish = routeOutcomeRecorder(deps.metrics, route.path);
  const nonces = route.dpop?.nonce ? deps.dpop?.nonces : undefined;
  const inFlight = new InFlightShare(route.maxRequestsInFlightPerUser);

  const refuse = routeRefusal(deps.logger, route.path, challenge, finish);
  const preflight = routePreflight(route, deps.selfOrigin, finish);

  // The rare steps are functions of their own: an async function keeps all
  // its locals for as long as a request lasts, so this one holds few.
  return async function handleProtectedRoute(req, res, search, span) {
    const started = performance.now();
    const origin = req.headers.origin;
    // Allowed cross-origin callers must be able to read errors too (the 401 challenge). No Origin, no CORS headers: not even an empty object.
    const cors = origin === undefined ? undefined : corsResponseHeaders(origin, route.allowedOrigins);
    // Every answer to a DPoP request, success or refusal, names the nonce to use next (RFC 9449 §8).
    if (nonces && isDpopRequest(req)) res.setHeader('dpop-nonce', nonces.current());
    try {
      if (req.method === 'OPTIONS') return preflight(req, res, origin, started, span);
      if (checkOrigin(origin, route.allowedOrigins, deps.selfOrigin) === 'deny') {
        throw new GatewayError(403, 'forbidden_origin', 'Origin not allowed');
      }
      // OPTIONS is answered above, so it is allowed too.
      if (!isForwardedMethod(req.method)) throw methodNotAllowed(['OPTIONS']);
      // A form body may carry `access_token` (RFC 6750 §2.2): refused as a
      // 400 even without a header, so it is read (bounded) before authentication.
      const formBody = req.method === 'POST' && FORM_CONTENT_TYPE.test(req.headers['content-type'] ?? '') ? await readFormBody(req, route.maxBodyBytes) : undefined;
      // Synchronous for a token this connection presented before: no await, no promise.
      const authenticated = deps.benchmarkPrincipal ?? authenticate(route, deps.verifier, req, search, deps.dpop);
      const auth = authenticated instanceof Promise ? await authenticated : authenticated;
      // The client, never the subject (a person) nor anything of the token.
      span?.set('mag.client_id', auth.clientId);
      const body = req.method === 'POST' ? await admittedBody(inFlight, auth, req, res, formBody, route.maxBodyBytes) : EMPTY_BODY;
      // Synchronous unless the route has rate limits, which ask the store.
      const checked = deps.policy?.check(req, body, auth, span);
      const outcome = checked instanceof Promise ? await checked : checked;
      const transform = outcome?.transform;
      // Admitted by policy and rate limits: only now is the DPoP proof's jti spent.
      if (auth.dpopProof && deps.dpop) await spendDpopProof(deps.dpop, auth);
      const credential = deps.credential.headersFor(auth);
      const swapped = credential instanceof Promise ? await credential.catch((err: unknown) => Promise.reject(asConnectElicitation(err, req, body))) : credential;
      // The policy's header in place of the client's (a substituted task's Mcp-Name); never the credential's or the identity's.
      const forwarded = withIdentity(route, auth, swapped);
      const injected = outcome?.headers ? { ...outcome.headers, ...forwarded } : forwarded;
      if (cors) for (const name in cors) res.setHeader(name, cors[name]!);
      const sent = outcome?.body ?? body; // the policy's body in place of the client's (a substituted task id)
      const longLived = opensLongLivedStream(req.method, sent);
      endWithAuthorization(res, longLived, auth, deps.verifier);
      const forwardCtx: ForwardContext = { auth, body: sent, injected, transform, span, longLived, servedBy: outcome?.servedBy };
      let upstream401 = false; // only a credential that can renew itself is told of an upstream 401: no closure per request otherwise
      await deps.forwarder.forward(req, res, deps.credential.rejected ? { ...forwardCtx, rejected: () => (upstream401 = true) } : forwardCtx);
      if (upstream401) await forwardAgain(req, res, deps, forwardCtx, route, outcome?.headers);
      span?.setStatus(res.statusCode);
      finish(res.statusCode, 'allow', started);
    } catch (thrown) {
      refuse(res, thrown, cors, started, span);
    }
  };
}

/**
 * The upstream refused a credential that can renew itself (a user's own grant): renewed once and
 * the request sent once more; a second 401 is the usual 502, a grant that is gone the connect link.
 */
async function forwardAgain(req: IncomingMessage, res: ServerResponse, deps: ProtectedRouteDeps, ctx: ForwardContext, route: RouteConfig, policyHeaders?: Record<string, string>): Promise<void> {
  try {
    await deps.credential.rejected!(ctx.auth, ctx.injected);
    const injected = { ...policyHeaders, ...withIdentity(route, ctx.auth, await deps.credential.headersFor(ctx.auth)) };
    await deps.forwarder.forward(req, res, { ...ctx, injected });
  } catch (err) {
    throw asConnectElicitation(err, req, ctx.body);
  }
}

/**
 * A POST's body, once the POST counts in its user's share of requests in flight (until its answer
 * ends; the 429 thrown when the share is full). Every transport's POSTs pass here, so one share
 * bounds them all (stdio, legacy SSE, aggregated too); admitted before the body is read, so a user
 * at its share spends nothing more of ours.
 */
function admittedBody(inFlight: InFlightShare, auth: AuthContext, req: IncomingMessage, res: ServerResponse, formBody: Buffer | undefined, maxBytes: number): Buffer | Promise<Buffer> {
  const refused = inFlight.admit(userKey(auth), res);
  if (refused) throw refused;
  return formBody ?? readBody(req, maxBytes);
}

/** What the route's `WWW-Authenticate` challenges name: its metadata, and DPoP's algorithms where it takes DPoP. */
function challengeOf(route: RouteConfig, deps: ProtectedRouteDeps): ChallengeContext {
  return {
    resourceMetadataUrl: route.resourceMetadataUrl,
    ...(route.dpop && deps.dpop && { dpop: { algs: DPOP_ALGORITHMS, required: route.dpop.required } }),
  };
}

/** The upstream credential plus the route's identity_headers (from the verified token), the credential's names winning. */
function withIdentity(route: RouteConfig, auth: AuthContext, credential: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  if (!route.identityHeaders?.length) return credential;
  return { ...identityHeaderValues(route.identityHeaders, auth), ...credential };
}

/** A request with a DPoP proof or a DPoP-scheme Authorization header. */
function isDpopRequest(req: IncomingMessage): boolean {
  return req.headers.dpop !== undefined || isDpopScheme(req.headers.authorization ?? '');
}

type Finish = ReturnType<typeof routeOutcomeRecorder>;

/** Whatever a step threw, answered once: logged, written with the challenge and CORS headers, counted. */
function routeRefusal(logger: Logger, routeLabel: string, challenge: ChallengeContext, finish: Finish) {
  const diagnosed = new SaidOnce();
  return function refuse(res: ServerResponse, thrown: unknown, cors: Record<string, string> | undefined, started: number, span?: GatewaySpan): void {
    const err = toGatewayError(thrown);
    const diagnosis = err.status >= 500 ? findDiagnosis(err) : undefined;
    // The cause an operator can fix, said once with what is configured and what was seen.
    if (diagnosis && diagnosed.first(diagnosis.key)) logger.error({ route: routeLabel, cause: diagnosis.cause, ...diagnosis.fields }, diagnosis.message);
    if (err.status >= 500) logger.warn({ route: routeLabel, err: err.cause ?? err, status: err.status }, err.description);
    else logger.debug({ route: routeLabel, status: err.status, error: err.code }, err.description);
    writeError(res, err, challenge, cors);
    span?.setStatus(err.status, err.code);
    finish(err.status, err.status === 401 ? 'unauthenticated' : err.status >= 500 ? 'error' : 'deny', started);
  };
}

/** The CORS preflight answer of the route (OPTIONS), counted like any request. */
function routePreflight(route: RouteConfig, selfOrigin: string, finish: Finish) {
  return function preflight(req: IncomingMessage, res: ServerResponse, origin: string | undefined, started: number, span?: GatewaySpan): void {
    const answer = corsPreflight(origin, route.allowedOrigins, selfOrigin, req.headers['access-control-request-headers']);
    res.writeHead(answer.status, answer.headers);
    res.end();
    span?.setStatus(answer.status);
    finish(answer.status, answer.status < 400 ? 'allow' : 'deny', started);
  };
}

/** A form body, refused when it carries `access_token` (RFC 6750 §2.2). */
async function readFormBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const body = await readBody(req, maxBytes);
  if (hasBodyAccessToken(req.headers['content-type'], body)) {
    throw invalidRequest('Access tokens are accepted only in the Authorization header');
  }
  return body;
}

/**
 * The handler inside one server span: `POST /path`, a child of the client's
 * `traceparent` when it sent one. What the steps learn (client id, MCP method
 * and name, decision, status) is set on it as they go.
 */
function tracedHandler(route: RouteConfig, tracing: Tracing, handle: SpannedHandler): ProtectedRouteHandler {
  const attributes = { 'http.route': route.path, 'url.path': route.path };
  return function handleTracedRoute(req, res, search) {
    // HTTP semantic conventions: a method outside the known ones is `_OTHER` (span names stay few).
    const method = isForwardedMethod(req.method) || req.method === 'OPTIONS' ? req.method : '_OTHER';
    const span = tracing.serverSpan(`${method} ${route.path}`, req.headers, { ...attributes, 'http.request.method': method });
    return span.within(() => handle(req, res, search, span)).finally(() => span.end());
  };
}

/**
 * Counts one request of the route by status and decision and observes its
 * duration. Each label set is bound once, not per request: this runs for every
 * request, and 200 allow, the usual outcome, skips even the map lookup.
 */
function routeOutcomeRecorder(metrics: Metrics, routeLabel: string): (status: number, decision: RequestOutcome, startedMs: number) => void {
  const duration = metrics.duration.labels(routeLabel);
  const counts = new Map<string, TallyCount>();
  const countOf = (status: number, decision: RequestOutcome): TallyCount => {
    const key = `${status} ${decision}`;
    let count = counts.get(key);
    if (count === undefined) counts.set(key, (count = metrics.requestTally.count({ route: routeLabel, status: String(status), decision })));
    return count;
  };
  const allowedOk = countOf(200, 'allow');
  return function finish(status, decision, startedMs) {
    (status === 200 && decision === 'allow' ? allowedOk : countOf(status, decision)).inc();
    duration.observe((performance.now() - startedMs) / 1000);
  };
}
