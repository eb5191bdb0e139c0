// Ids an upstream hands out that are not bound to a session (MCP task ids,
// event-stream event ids) recorded as the principal's whose answer carried
// them, so that naming one later is allowed to that principal only. The
// record is written as the answer passes (SET NX: an upstream that hands one
// id to two principals leaves it the first one's); until it is stored the id
// is refused, except that a request on this replica waits for a write still
// under way. Fails closed: an id never recorded, expired or evicted is
// nobody's.
import type { AuthContext } from '../auth/principal.js';
import { principalKey, userKey } from '../auth/principal.js';
import { translateKnown } from '../errors/translate.js';
import { hashKeyPart } from '../store/key-names.js';
import { ownedValue } from '../store/owned-value.js';
import type { Store } from '../store/store.js';

export interface OwnedIds {
  /** Records `id` as this principal's for `ttlMs`; true when it is this principal's (now or already). */
  record(id: string, auth: AuthContext, ttlMs: number): Promise<boolean>;
  /** Whether `id` was recorded as this principal's (waiting for a write this replica has under way). */
  owns(id: string, auth: AuthContext): Promise<boolean>;
}

/** The value of a record: the user and the principal, hashed (a store dump shows no subject); caps count the user. */
export const ownerValue = (auth: AuthContext): string => {
  // Written per event of a stream and read per named task: kept per verified context, which the
  // token cache hands every request of a token frozen (a context that could still change is hashed every time).
  if (!Object.isFrozen(auth)) return hashedOwner(auth);
  let value = owners.get(auth);
  if (value === undefined) owners.set(auth, (value = hashedOwner(auth)));
  return value;
};
const owners = new WeakMap<AuthContext, string>();
const hashedOwner = (auth: AuthContext): string => ownedValue(hashKeyPart(userKey(auth)), hashKeyPart(principalKey(auth)));

export async function storeCall<T>(call: () => Promise<T>, unavailable: string): Promise<T> {
  try {
    return await call();
  } catch (err) {
    // A store that is down is the client's 503; a fault goes on as it is.
    throw translateKnown(err, { storeUnavailable: unavailable }) ?? err;
  }
}

/** `keyOf`: the store key of one id (key-names.ts); `unavailable`: the 503's description. */
export function createOwnedIds(store: Store, keyOf: (id: string) => string, unavailable: string): OwnedIds {
  /** Records still being written on this replica, by key. */
  const pending = new Map<string, Promise<boolean>>();
  const call = <T>(f: () => Promise<T>) => storeCall(f, unavailable);

  async function write(key: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await call(() => store.setIfAbsent(key, owner, ttlMs))) || (await call(() => store.get(key))) === owner;
  }

  return {
    async record(id, auth, ttlMs) {
      const key = keyOf(id);
      const written = write(key, ownerValue(auth), ttlMs);
      pending.set(key, written);
      try {
        return await written;
      } finally {
        if (pending.get(key) === written) pending.delete(key);
      }
    },

    async owns(id, auth) {
      const key = keyOf(id);
      await pending.get(key)?.catch(() => false);
      return (await call(() => store.get(key))) === ownerValue(auth);
    },
  };
}
