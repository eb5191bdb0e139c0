import { describe, expect, it } from 'vitest';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError, type Store } from '../../src/store/store.js';
import type { AuthContext } from '../../src/auth/principal.js';
import { rejection } from '../helpers/rejection.js';

const principal = (subject: string, clientId = 'client-1'): AuthContext => ({
  issuer: 'https://as.example',
  subject,
  clientId,
  scopes: [],
  expiresAt: 0,
  claims: {},
  token: `token-of-${subject}`,
  tokenHash: `hash-of-${subject}`,
});
const alice = principal('alice');
const bob = principal('bob');

const down: Store = {
  kind: 'redis',
  get: () => Promise.reject(new StoreUnavailableError('down')),
  set: () => Promise.reject(new StoreUnavailableError('down')),
  setIfAbsent: () => Promise.reject(new StoreUnavailableError('down')),
  compareAndSet: () => Promise.reject(new StoreUnavailableError('down')),
  take: () => Promise.reject(new StoreUnavailableError('down')),
  increment: () => Promise.reject(new StoreUnavailableError('down')),
  admit: () => Promise.reject(new StoreUnavailableError('down')),
  delete: () => Promise.reject(new StoreUnavailableError('down')),
  appendToLog: () => Promise.reject(new StoreUnavailableError('down')),
  readLog: () => Promise.reject(new StoreUnavailableError('down')),
  ping: () => Promise.reject(new StoreUnavailableError('down')),
  close: () => Promise.resolve(),
};

describe('session binding', () => {
  it('passes requests without a session id', async () => {
    await createSessionBinding(new MemoryStore({ maxEntries: 10 })).check('/r', undefined, alice);
  });

  it('admits the creating principal, and refuses another or an unknown id with 404', async () => {
    const sessions = createSessionBinding(new MemoryStore({ maxEntries: 10 }));
    await sessions.bind('/r', 'sess-1', alice);
    await sessions.check('/r', 'sess-1', alice);
    expect((await rejection(sessions.check('/r', 'sess-1', bob))).status).toBe(404);
    expect((await rejection(sessions.check('/r', 'sess-1', principal('alice', 'other-client')))).status).toBe(404);
    expect((await rejection(sessions.check('/r', 'sess-unknown', alice))).code).toBe('not_found');
    // bound per route: the same id on another route is unknown there
    expect((await rejection(sessions.check('/other', 'sess-1', alice))).status).toBe(404);
  });

  it('forgets a released session', async () => {
    const sessions = createSessionBinding(new MemoryStore({ maxEntries: 10 }));
    await sessions.bind('/r', 'sess-1', alice);
    await sessions.release('/r', 'sess-1');
    expect((await rejection(sessions.check('/r', 'sess-1', alice))).status).toBe(404);
  });

  it('never rebinds an id to another principal', async () => {
    const sessions = createSessionBinding(new MemoryStore({ maxEntries: 10 }));
    await sessions.bind('/r', 'sess-1', alice);
    await sessions.bind('/r', 'sess-1', alice);
    expect((await rejection(sessions.bind('/r', 'sess-1', bob))).status).toBe(502);
    await sessions.check('/r', 'sess-1', alice);
  });

  it('refuses malformed session ids with 400', async () => {
    const sessions = createSessionBinding(new MemoryStore({ maxEntries: 10 }));
    for (const id of ['', 'a b', 'a,\tb', 'caf\u00e9', 'x'.repeat(257), 'a\u0000']) {
      expect((await rejection(sessions.check('/r', id, alice))).status).toBe(400);
    }
    await rejection(sessions.check('/r', 'x'.repeat(256), alice)).then((e) => expect(e.status).toBe(404));
    expect((await rejection(sessions.bind('/r', 'a b', alice))).status).toBe(502);
  });

  it('answers 503 when the store is down, for check and bind', async () => {
    const sessions = createSessionBinding(down);
    const err = await rejection(sessions.check('/r', 'sess-1', alice));
    expect(err.status).toBe(503);
    expect(err.code).toBe('temporarily_unavailable');
    expect((await rejection(sessions.bind('/r', 'sess-1', alice))).status).toBe(503);
    await sessions.check('/r', undefined, alice);
  });

  it('stores only hashes of the session id', async () => {
    const keys: string[] = [];
    const store = new MemoryStore({ maxEntries: 10 });
    const spy: Store = Object.assign(Object.create(store) as Store, {
      setIfAbsent: (key: string, value: string, ttl: number) => {
        keys.push(key);
        return store.setIfAbsent(key, value, ttl);
      },
    });
    await createSessionBinding(spy).bind('/r', 'secret-session-id', alice);
    expect(keys).toHaveLength(1);
    expect(keys[0]).not.toContain('secret-session-id');
  });
});
