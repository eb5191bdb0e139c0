// The start-up check of Redis's `maxmemory-policy`. Under any policy but
// `noeviction` Redis may drop a key when memory runs short: a `grant:` key
// that revokes a family, a `code-used:` replay marker or a client
// registration would vanish silently, and a revoked token could work again.
// `store.require_noeviction: true` refuses to start unless the policy is
// verified; otherwise anything short of `noeviction` is logged as an error.
import type { Logger } from '../observability/logger.js';
import type { RedisStore } from './redis-store.js';

export class EvictionPolicyError extends Error {
  override readonly name = 'EvictionPolicyError';
}

export type EvictionCheck =
  | { outcome: 'noeviction' }
  | { outcome: 'evicting'; policy: string }
  | { outcome: 'unknown'; reason: string };

async function readEvictionPolicy(store: Pick<RedisStore, 'checkEvictionPolicy'>): Promise<EvictionCheck> {
  let policy: string | undefined;
  try {
    policy = await store.checkEvictionPolicy();
  } catch (err) {
    return { outcome: 'unknown', reason: `Redis did not answer (${err instanceof Error ? err.message : String(err)})` };
  }
  if (policy === undefined) return { outcome: 'unknown', reason: 'CONFIG GET is disabled on this Redis' };
  return policy === 'noeviction' ? { outcome: 'noeviction' } : { outcome: 'evicting', policy };
}

/** Throws EvictionPolicyError when `require` and the policy is not verified to be noeviction; logs otherwise. */
export async function enforceEvictionPolicy(store: Pick<RedisStore, 'checkEvictionPolicy'>, options: { require: boolean; logger: Logger }): Promise<void> {
  const check = await readEvictionPolicy(store);
  if (check.outcome === 'noeviction') return;
  const problem =
    check.outcome === 'evicting'
      ? `Redis maxmemory-policy is ${check.policy}, not noeviction: an evicted key could revive a revoked token or lose a client`
      : `cannot verify that Redis maxmemory-policy is noeviction: ${check.reason}`;
  if (options.require) {
    throw new EvictionPolicyError(`${problem}; refusing to start (store.require_noeviction is true: set maxmemory-policy noeviction, or set require_noeviction false)`);
  }
  const fields = check.outcome === 'evicting' ? { policy: check.policy } : { reason: check.reason };
  if (check.outcome === 'evicting') options.logger.error(fields, `${problem} (set maxmemory-policy noeviction; store.require_noeviction: true refuses to start)`);
  else options.logger.warn(fields, problem);
}
