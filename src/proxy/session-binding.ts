// Binds an upstream session (`Mcp-Session-Id`) to the principal whose request
// created it (SECURITY H42). The upstream knows nothing of
// principals, so without this anyone holding a session id could read or drive
// another user's session. Fails closed: a session id the gateway has no
// binding for is refused like one bound to someone else.
import type { AuthContext } from '../auth/principal.js';
import { principalKey, userKey } from '../auth/principal.js';
import { GatewayError } from '../errors/gateway-error.js';
import { translateKnown } from '../errors/translate.js';
import { sessionBindingKey } from '../store/key-names.js';
import { ownedValue } from '../store/owned-value.js';
import type { Store } from '../store/store.js';

const DEFAULT_SESSION_TTL_MS = 24 * 60 * 60 * 1000;

export interface SessionBinding {
  /** Throws 404 unless `sessionId` (when present) is bound to this principal on this route. */
  check(routePath: string, sessionId: string | undefined, auth: AuthContext): Promise<void>;
  /** Records a session id the upstream just issued. Throws 502 when it is bound to another principal. */
  bind(routePath: string, sessionId: string, auth: AuthContext): Promise<void>;
  /** Forgets a session after the upstream accepted its DELETE. */
  release(routePath: string, sessionId: string): Promise<void>;
}

// Visible ASCII, as the MCP transport specification requires of session ids.
const SESSION_ID = /^[\x21-\x7E]{1,256}$/;

/** Whether a session id is syntactically acceptable (visible ASCII, at most 256 characters). */
const isValidSessionId = (sessionId: string): boolean => SESSION_ID.test(sessionId);

/** The binding's value: the principal, led by its user, whom the memory store's per-owner cap counts (K81). */
const bindingValue = (auth: AuthContext): string => ownedValue(userKey(auth), principalKey(auth));

const unknownSession = () => new GatewayError(404, 'not_found', 'Unknown session');

async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    // A store that is down is the client's 503 (the forwarder writes what it is given); a fault goes on as it is.
    throw translateKnown(err, { storeUnavailable: 'Session store unavailable' }) ?? err;
  }
}

export function createSessionBinding(store: Store, ttlMs = DEFAULT_SESSION_TTL_MS): SessionBinding {
  return {
    async check(routePath, sessionId, auth) {
      if (sessionId === undefined) return;
      if (!isValidSessionId(sessionId)) throw new GatewayError(400, 'invalid_request', 'Invalid Mcp-Session-Id');
      const owner = await storeCall(() => store.get(sessionBindingKey(routePath, sessionId)));
      if (owner !== bindingValue(auth)) throw unknownSession();
    },

    async bind(routePath, sessionId, auth) {
      if (!isValidSessionId(sessionId)) throw new GatewayError(502, 'bad_gateway', 'Upstream returned an invalid session id');
      const key = sessionBindingKey(routePath, sessionId);
      const principal = bindingValue(auth);
      if (await storeCall(() => store.setIfAbsent(key, principal, ttlMs))) return;
      // Never overwrite: an upstream handing one id to two principals is a bug
      // that would merge their sessions, so this response is refused instead.
      if ((await storeCall(() => store.get(key))) !== principal) {
        throw new GatewayError(502, 'bad_gateway', 'Upstream reused a session id of another principal');
      }
    },

    async release(routePath, sessionId) {
      if (!isValidSessionId(sessionId)) return;
      await storeCall(() => store.delete(sessionBindingKey(routePath, sessionId)));
    },
  };
}
