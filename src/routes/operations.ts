// /healthz, /readyz and /metrics. Readiness reports the store's and the
// JWKS's health in its body but fails only while starting or draining,
// because JWT routes keep working without the store.
import { Hono } from 'hono';
import { OPERATIONS_PATHS } from '../config/reserved-paths.js';
import type { Store } from '../store/store.js';
import type { Metrics } from '../observability/metrics.js';

export interface Lifecycle {
  /** true once config is loaded and listeners are up, false again when draining. */
  ready: boolean;
  /** The live configuration: its hash (undefined when built in code) and when it was loaded. */
  config?: { hash?: string; loadedAt: Date };
}

export function operationsRoutes(deps: { lifecycle: Lifecycle; store: Store; metrics: Metrics; storeTimeoutMs: number }): Hono {
  const app = new Hono();
  app.get(OPERATIONS_PATHS.health, (c) => c.json({ status: 'ok' }));
  app.get(OPERATIONS_PATHS.ready, async (c) => {
    const store = await probe(deps.store, deps.storeTimeoutMs);
    const ready = deps.lifecycle.ready;
    const live = deps.lifecycle.config;
    const config = live && { hash: live.hash ?? null, loaded_at: live.loadedAt.toISOString() };
    return c.json({ status: ready ? 'ready' : 'not_ready', store, config }, ready ? 200 : 503);
  });
  app.get(OPERATIONS_PATHS.metrics, async (c) => {
    const body = await deps.metrics.registry.metrics();
    return c.body(body, 200, { 'content-type': deps.metrics.registry.contentType });
  });
  return app;
}

async function probe(store: Store, timeoutMs: number): Promise<'ok' | 'unavailable'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
  });
  try {
    await Promise.race([store.ping(), timeout]);
    return 'ok';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}
