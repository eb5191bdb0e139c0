// The store the configuration names; the only place that picks a backend.
import type { StoreConfig } from '../config/types.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';
import type { Store } from './store.js';

export interface CreateStoreOptions {
  /** Redis connection errors, for logging. */
  onConnectionError?: (err: Error) => void;
}

export function createStore(config: StoreConfig, options: CreateStoreOptions = {}): Store {
  switch (config.kind) {
    case 'memory':
      return new MemoryStore({ maxEntries: config.maxEntries });
    case 'redis':
      return new RedisStore({
        url: config.url,
        keyPrefix: config.keyPrefix,
        commandTimeoutMs: config.commandTimeoutMs,
        onConnectionError: options.onConnectionError,
      });
  }
}
