// What every endpoint of the built-in AS shares, built once per configuration load.
import type { DpopNonces } from '../auth/dpop-nonce.js';
import type { AuthorizationServerConfig, RouteConfig } from '../config/types.js';
import type { Audit } from '../observability/audit.js';
import type { Logger } from '../observability/logger.js';
import type { AuthorizationServerMetrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import type { SigningKeys } from './keys/signing-keys.js';

export interface AsContext {
  /** `iss` of every token and authorization response; no trailing slash. */
  readonly issuer: string;
  readonly config: AuthorizationServerConfig;
  /** The routes whose tokens this AS issues (`token` left to the built-in AS), by canonical resource. */
  readonly resources: ReadonlyMap<string, RouteConfig>;
  /** Honour X-Forwarded-For from the trusted hops (true: one) when naming a client IP. */
  readonly trustProxy: boolean | number;
  readonly keys: SigningKeys;
  /** The gateway's DPoP nonces (RFC 9449 §9), required at /token with `dpop_nonce`. */
  readonly dpopNonces: DpopNonces;
  readonly store: Store;
  readonly logger: Logger;
  readonly audit: Audit;
  readonly metrics: AuthorizationServerMetrics;
}

/** The upstream of the route of `resource` when it uses the user's own account there (user_oauth). */
export function userAccountUpstream(ctx: AsContext, resource: string): string | undefined {
  const route = ctx.resources.get(resource);
  return route?.upstreamAuth.kind === 'user_oauth' ? route.upstream : undefined;
}

/** The endpoints sit at the root of the issuer's origin, so 2025-03-26 clients' default endpoints work. */
export function endpointUrl(issuer: string, path: `/${string}`): string {
  return `${new URL(issuer).origin}${path}`;
}
