// A route's `rate_limits` compiled once per configuration load: the match
// through the rules' own compiler (route-policy.ts), and what one request
// costs against each limit. Pure; rate-limiter.ts asks the store.
import type { AuthContext } from '../auth/principal.js';
import { principalKey } from '../auth/principal.js';
import type { RouteConfig, RouteRateLimitConfig } from '../config/types.js';
import type { Operation } from './json-rpc.js';
import { compileMatch, describeMatch, matchesOperation, type CompiledMatch } from './route-policy.js';

export interface CompiledRateLimit {
  /** `rate_limits[i]`: the metric label (bounded: a route has at most 20). */
  label: string;
  /** `file:line` of the limit (or `file: rate_limits[i]`): the audit line's `limit`. */
  name: string;
  /** The limit as written, on one line: part of its store key, so a changed limit counts afresh. */
  definition: string;
  per: RouteRateLimitConfig['per'];
  match?: CompiledMatch;
  requests: number;
  windowMs: number;
}

export function compileRateLimits(route: Pick<RouteConfig, 'file' | 'rateLimits'>): CompiledRateLimit[] {
  return route.rateLimits.map((limit, index) => ({
    label: `rate_limits[${index}]`,
    name: limit.source ?? `${route.file}: rate_limits[${index}]`,
    definition: describeRateLimit(limit),
    per: limit.per,
    ...(limit.match && { match: compileMatch(limit.match) }),
    requests: limit.requests,
    windowMs: limit.windowMs,
  }));
}

/** `per principal: 5 per 3600000 ms, match { method: tools/call, tool: "delete_*" }` */
export function describeRateLimit(limit: RouteRateLimitConfig): string {
  const base = `per ${limit.per}: ${limit.requests} per ${limit.windowMs} ms`;
  return limit.match ? `${base}, ${describeMatch(limit.match)}` : base;
}

/**
 * Uses one request counts against `limit`. With a `match`: each message of
 * the body that the match applies to (a batch of n such calls: n; none: 0,
 * the limit does not apply). Without: every request and notification in the
 * body, and at least 1, so a GET, a DELETE or a body of responses counts once.
 * `operations` has one entry per message, undefined for a response.
 */
export function costOf(limit: CompiledRateLimit, operations: readonly (Operation | undefined)[]): number {
  let cost = 0;
  for (const operation of operations) if (operation && (!limit.match || matchesOperation(limit.match, operation))) cost++;
  return limit.match ? cost : Math.max(1, cost);
}

/** Whose uses a limit counts together; a token naming no client counts as client "". */
export function counted(per: CompiledRateLimit['per'], auth: AuthContext): string {
  if (per === 'principal') return principalKey(auth);
  return JSON.stringify(per === 'client' ? [auth.issuer, '', auth.clientId] : [auth.issuer, auth.subject, '']);
}
