// What UpstreamAccounts (user_oauth) reads of the built-in AS's context, for tests that run the
// gateway's own classes without a whole gateway: the store, the issuer, the grant lifetime, and
// audit lines and warnings (recorded when asked for).
import type { AsContext } from '../../src/authorization-server/context.js';
import type { Store } from '../../src/store/store.js';

export interface RecordedLines {
  audit?: { event: string; reason?: string }[];
  warnings?: unknown[][];
}

export function upstreamAccountsContext(store: Store, issuer: string, recorded: RecordedLines = {}): AsContext {
  return {
    store,
    issuer,
    config: { refreshTokenTtlMs: 3600_000 },
    audit: { record: (line: { event: string; reason?: string }) => recorded.audit?.push(line) },
    metrics: { upstreamAccountEvents: { labels: () => ({ inc() {} }) } },
    logger: { warn: (...args: unknown[]) => recorded.warnings?.push(args), info() {}, debug() {}, error() {} },
  } as unknown as AsContext;
}
