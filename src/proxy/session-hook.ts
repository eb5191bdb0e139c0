// The forwarder's session hook for one route, backed by the store's session
// bindings (session-binding.ts).
import type { ProxyLogger, SessionHook } from './forwarder.js';
import type { SessionBinding } from './session-binding.js';

export function sessionHook(routePath: string, sessions: SessionBinding, logger?: ProxyLogger): SessionHook {
  return {
    admit: (sessionId, auth) => sessions.check(routePath, sessionId, auth),
    bind: (sessionId, auth) => sessions.bind(routePath, sessionId, auth),
    release(sessionId) {
      sessions.release(routePath, sessionId).catch((err: unknown) => {
        // The binding expires with its TTL; the client's DELETE did succeed.
        logger?.warn({ route: routePath, err }, 'could not release a session binding');
      });
    },
  };
}
