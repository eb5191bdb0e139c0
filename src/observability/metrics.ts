// Prometheus metrics. Labels are bounded: route paths come from config,
// never from the request, and no label ever holds a token or an id.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CounterTally } from './counter-tally.js';
import { RequestHistogram } from './request-histogram.js';

/** The `decision` label of mag_requests_total: what became of a request to a protected route (not policy's Decision). */
export type RequestOutcome = 'allow' | 'deny' | 'unauthenticated' | 'error';

/** What the built-in authorization server counts. */
export type AuthorizationServerMetrics = Pick<Metrics, 'tokensIssued' | 'tokenErrors' | 'consentDecisions' | 'grantsRevoked' | 'rateLimited' | 'rateLimitFailOpen' | 'revocationSyncs' | 'revocationLastRead' | 'upstreamAccountEvents'>;

export class Metrics {
  readonly registry = new Registry();

  /** Counted per request: `requestTally.count({...}).inc()`, kept by the caller. */
  readonly requestTally = new CounterTally<'route' | 'status' | 'decision'>();
  readonly tokenCacheTally = new CounterTally<'result'>();

  readonly requests: Counter<'route' | 'status' | 'decision'> = new Counter({
    name: 'mag_requests_total',
    help: 'Requests to protected routes by route, status and decision',
    labelNames: ['route', 'status', 'decision'] as const,
    registers: [this.registry],
    collect: () => this.requestTally.flushInto(this.requests),
  });

  /** Observed per request: bind `duration.labels(route)` once. */
  readonly duration = new RequestHistogram({
    name: 'mag_request_duration_seconds',
    help: 'Time from the request to the end of its answer: the upstream response, an event stream until it closes, or the gateway rejection',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly tokenCache: Counter<'result'> = new Counter({
    name: 'mag_token_cache_total',
    help: 'Verified-token cache lookups',
    labelNames: ['result'] as const,
    registers: [this.registry],
    collect: () => this.tokenCacheTally.flushInto(this.tokenCache),
  });

  readonly upstreamErrors = new Counter({
    name: 'mag_upstream_errors_total',
    help: 'Upstream failures by route and kind',
    labelNames: ['route', 'kind'] as const,
    registers: [this.registry],
  });

  readonly aggregateUpstreamUp = new Gauge({
    name: 'mag_aggregate_upstream_up',
    help: 'Upstreams of aggregated routes: 1 served, 0 down (left out of lists, calls failed at once)',
    labelNames: ['route', 'upstream'] as const,
    registers: [this.registry],
  });

  readonly aggregateLeftOut = new Counter({
    name: 'mag_aggregate_left_out_total',
    help: 'Lists of aggregated routes answered without an upstream (down, slow or failing)',
    labelNames: ['route', 'upstream'] as const,
    registers: [this.registry],
  });

  readonly aggregateUpstreamDuration = new Histogram({
    name: 'mag_aggregate_upstream_request_duration_seconds',
    help: 'Requests of aggregated routes to each upstream (a list page, a call, a read), from sending to the whole answer, answered or failed',
    labelNames: ['route', 'upstream'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly aggregateUpstreamErrors = new Counter({
    name: 'mag_aggregate_upstream_errors_total',
    help: 'Failed requests of aggregated routes to each upstream, by reason: timeout, cut (over max_body_bytes or ended early), status (a non-2xx answer), unreadable, down (no session), rpc_error (a JSON-RPC error answer), unavailable (failed at once while the upstream is down), account (the user has not connected their account there), error',
    labelNames: ['route', 'upstream', 'reason'] as const,
    registers: [this.registry],
  });

  readonly openStreams = new Gauge({
    name: 'mag_open_streams',
    help: 'Event streams currently open through the gateway',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  readonly stdioProcesses = new Gauge({
    name: 'mag_stdio_processes',
    help: 'Child processes of stdio routes currently running, by route',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  readonly stdioSpawns = new Counter({
    name: 'mag_stdio_spawns_total',
    help: 'Child processes started for stdio routes, by route',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  readonly stdioExits = new Counter({
    name: 'mag_stdio_exits_total',
    help: 'Child processes of stdio routes that ended, by route and reason (exited, idle, deleted, evicted: stopped to make room for another session, shutdown, fault, timeout, spawn_failed)',
    labelNames: ['route', 'reason'] as const,
    registers: [this.registry],
  });

  readonly stdioCleanupFailures = new Counter({
    name: 'mag_stdio_cleanup_failures_total',
    help: 'Directories or cgroups of ended stdio processes that could not be removed (each logged), by route',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  readonly storeDuration = new Histogram({
    name: 'mag_store_operation_duration_seconds',
    help: 'Store operations (get, set, take...) by backend, operation and outcome',
    labelNames: ['backend', 'operation', 'outcome'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly storeErrors = new Counter({
    name: 'mag_store_errors_total',
    help: 'Failed store operations: unavailable (down, paused, timed out) or other',
    labelNames: ['backend', 'operation', 'kind'] as const,
    registers: [this.registry],
  });

  readonly storeClockOffset = new Gauge({
    name: 'mag_store_clock_offset_seconds',
    help: "The shared store's clock (Redis TIME) minus this replica's, at the last reading (every 30 s); DPoP iat is judged by the store's clock",
    registers: [this.registry],
  });

  readonly storeClockSkewExceeded = new Gauge({
    name: 'mag_store_clock_skew_exceeded',
    help: "1 while this replica's clock is further from the store's than store.max_clock_skew (logged once when it happens), else 0",
    registers: [this.registry],
  });

  readonly traceSpans = new Counter({
    name: 'mag_trace_spans_total',
    help: 'Finished sampled spans by result: exported, failed (the collector refused or did not answer) or dropped (the export queue was full)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  // --- built-in authorization server: per replica, sum over pods ---------------

  readonly tokensIssued = new Counter({
    name: 'mag_tokens_issued_total',
    help: 'Access tokens issued by the built-in authorization server, by grant type',
    labelNames: ['grant_type'] as const,
    registers: [this.registry],
  });

  readonly tokenErrors = new Counter({
    name: 'mag_token_errors_total',
    help: 'Refused /token requests of the built-in authorization server, by grant type (other: unknown or missing) and OAuth error code',
    labelNames: ['grant_type', 'error'] as const,
    registers: [this.registry],
  });

  readonly consentDecisions = new Counter({
    name: 'mag_consent_decisions_total',
    help: 'Consent decisions at the built-in authorization server: allow, deny, or remembered (an earlier approval in this browser covered the request)',
    labelNames: ['decision'] as const,
    registers: [this.registry],
  });

  readonly grantsRevoked = new Counter({
    name: 'mag_grants_revoked_total',
    help: 'Grants (refresh-token families) revoked, by reason: revoked_by_client, refresh_token_reuse, code_replay, idp_session_ended, revoked_by_user (the connected-apps page), superseded (pushed out of the bounded list of apps of a user)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly upstreamAccountEvents = new Counter({
    name: 'mag_upstream_account_events_total',
    help: "Users' own upstream accounts (upstream_auth kind user_oauth), by route and event: connected, connect_failed, refreshed, refresh_failed, disconnected, revocation_failed",
    labelNames: ['route', 'event'] as const,
    registers: [this.registry],
  });

  readonly revocationSyncs = new Counter({
    name: 'mag_revocation_syncs_total',
    help: 'Reads of the shared list of revoked grants (every second per replica), by result: ok or error (the store did not answer)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly revocationLastRead = new Gauge({
    name: 'mag_revocation_last_read_timestamp_seconds',
    help: 'When this replica last read the shared list of revoked grants; over 4 s ago, it refuses built-in AS tokens with 503 until a read succeeds',
    registers: [this.registry],
  });

  readonly rateLimited = new Counter({
    name: 'mag_rate_limited_total',
    help: 'Requests to the built-in authorization server refused with 429, by limit (authorize, token, register, registrations, interaction, pending_authorizations)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  readonly rateLimitFailOpen = new Counter({
    name: 'mag_rate_limit_fail_open_total',
    help: 'Requests let through unlimited because the store did not answer the rate-limit count, by limit',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  // --- route rate limits (rate_limits of a route) -------------------------------

  readonly routeRateLimited = new Counter({
    name: 'mag_route_rate_limited_total',
    help: 'Requests to protected routes refused with 429 by a rate limit, by route and limit (rate_limits[i] of the route)',
    labelNames: ['route', 'limit'] as const,
    registers: [this.registry],
  });

  readonly routeRateLimitFailOpen = new Counter({
    name: 'mag_route_rate_limit_fail_open_total',
    help: 'Requests to protected routes let through a rate limit because the store failed or did not answer within store.command_timeout, by route and limit',
    labelNames: ['route', 'limit'] as const,
    registers: [this.registry],
  });

  // --- configuration reloads ------------------------------------------------------

  readonly configLoaded = new Gauge({
    name: 'mag_config_loaded_timestamp_seconds',
    help: 'When the live configuration was loaded (start or the last successful reload)',
    registers: [this.registry],
  });

  readonly configInfo = new Gauge({
    name: 'mag_config_info',
    help: 'Always 1: the live configuration, its hash (sha256 of its files as read, as /readyz shows it) in the label',
    labelNames: ['hash'] as const,
    registers: [this.registry],
  });

  readonly configReloads = new Counter({
    name: 'mag_config_reloads_total',
    help: 'Reloads by result: ok, invalid (the configuration has issues, logged with file:line; the last good one keeps serving) or failed (it did not build)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'mag_' });
  }
}
