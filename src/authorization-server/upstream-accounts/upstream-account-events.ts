// Audit lines and counters of users' upstream accounts: connect, refresh,
// failure, disconnect. They name the route and the user's gateway subject,
// never a token or anything the upstream AS sent.
import type { Audit } from '../../observability/audit.js';
import type { AuthorizationServerMetrics } from '../../observability/metrics.js';
import type { GrantOwner } from './upstream-grants.js';

export type UpstreamAccountEvent = 'connected' | 'connect_failed' | 'refreshed' | 'refresh_failed' | 'disconnected' | 'revocation_failed' | 'refresh_dropped';

export interface UpstreamAccountEvents {
  record(event: UpstreamAccountEvent, owner: GrantOwner, reason?: string): void;
}

export function upstreamAccountEvents(audit: Audit, metrics: AuthorizationServerMetrics): UpstreamAccountEvents {
  return {
    record(event, owner, reason) {
      audit.record({ event: `upstream_account_${event}`, sub: owner.subject, route: owner.routePath, ...(reason !== undefined && { reason }) });
      metrics.upstreamAccountEvents.labels(owner.routePath, event).inc();
    },
  };
}
