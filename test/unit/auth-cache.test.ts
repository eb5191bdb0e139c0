import { afterEach, describe, expect, it, vi } from 'vitest';
import { TokenCache } from '../../src/auth/token-cache.js';
import { sha256Base64Url } from '../../src/auth/hash.js';
import type { AuthContext } from '../../src/auth/principal.js';

const R = 'https://mcp.example.com/r';

function context(token: string, lifetimeSeconds = 300): AuthContext {
  return {
    issuer: 'https://idp',
    subject: 'user',
    clientId: 'client',
    scopes: ['a'],
    expiresAt: Math.floor(Date.now() / 1000) + lifetimeSeconds,
    claims: {},
    token,
    tokenHash: sha256Base64Url(token),
  };
}

afterEach(() => vi.useRealTimers());

describe('TokenCache', () => {
  it('verifies a token once, then serves it from the cache', async () => {
    const cache = new TokenCache();
    const inner = vi.fn(async (token: string) => context(token));
    const hooks = { onHit: vi.fn(), onMiss: vi.fn() };
    const first = await cache.verify('t', R, 60_000, inner, hooks);
    expect(await cache.verify('t', R, 60_000, inner, hooks)).toBe(first);
    expect(inner).toHaveBeenCalledTimes(1);
    expect(hooks.onHit).toHaveBeenCalledTimes(1);
    expect(hooks.onMiss).toHaveBeenCalledTimes(1);
  });

  it('shares one in-flight verification between concurrent identical tokens', async () => {
    const cache = new TokenCache();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const inner = vi.fn(async (token: string) => {
      await gate;
      return context(token);
    });
    const all = Promise.all(Array.from({ length: 10 }, () => cache.verify('t', R, 60_000, inner)));
    release();
    const results = await all;
    expect(inner).toHaveBeenCalledTimes(1);
    expect(new Set(results).size).toBe(1);
  });

  it('shares a failure in flight, but never caches it', async () => {
    const cache = new TokenCache();
    const inner = vi.fn(async () => {
      throw new Error('bad');
    });
    await Promise.all([1, 2, 3].map(() => expect(cache.verify('t', R, 60_000, inner)).rejects.toThrow('bad')));
    expect(inner).toHaveBeenCalledTimes(1);
    await expect(cache.verify('t', R, 60_000, inner)).rejects.toThrow('bad');
    expect(inner).toHaveBeenCalledTimes(2);
  });

  it('keys entries by resource as well as token', async () => {
    const cache = new TokenCache();
    const inner = vi.fn(async (token: string) => context(token));
    await cache.verify('t', R, 60_000, inner);
    await cache.verify('t', `${R}/`, 60_000, inner);
    await cache.verify('u', R, 60_000, inner);
    expect(inner).toHaveBeenCalledTimes(3);
  });

  it('never serves an entry past the token exp, even with a longer TTL', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const cache = new TokenCache();
    const inner = vi.fn(async (token: string) => context(token, 2));
    await cache.verify('t', R, 3_600_000, inner);
    vi.setSystemTime(Date.now() + 1_000);
    await cache.verify('t', R, 3_600_000, inner);
    expect(inner).toHaveBeenCalledTimes(1);
    vi.setSystemTime(Date.now() + 2_000);
    await cache.verify('t', R, 3_600_000, inner);
    expect(inner).toHaveBeenCalledTimes(2);
  });

  it('does not cache a token already expired, and evicts beyond its bound', async () => {
    const cache = new TokenCache(2);
    const expired = vi.fn(async (token: string) => context(token, -1));
    await cache.verify('t', R, 60_000, expired);
    await cache.verify('t', R, 60_000, expired);
    expect(expired).toHaveBeenCalledTimes(2);
    const inner = vi.fn(async (token: string) => context(token));
    for (const token of ['a', 'b', 'c', 'a']) await cache.verify(token, R, 60_000, inner);
    expect(inner).toHaveBeenCalledTimes(4);
  });

  it('hands out frozen contexts, so one request cannot alter another', async () => {
    const cache = new TokenCache();
    const auth = await cache.verify('t', R, 60_000, async (token) => context(token));
    expect(Object.isFrozen(auth)).toBe(true);
    expect(() => auth.scopes.push('admin')).toThrow(TypeError);
  });

  describe('get: synchronous for a cached token, on any connection', () => {
    it('answers a token verified on one connection synchronously on another, and a new token with a promise', async () => {
      const cache = new TokenCache();
      const inner = vi.fn(async (token: string) => context(token));
      const hooks = { onHit: vi.fn(), onMiss: vi.fn() };
      const first = cache.get('t', R, 60_000, inner, hooks, { connection: {}, header: 'Bearer t' });
      expect(first).toBeInstanceOf(Promise);
      const auth = await first;
      const other = {};
      const again = cache.get('t', R, 60_000, inner, hooks, { connection: other, header: 'Bearer t' });
      expect(again).toBe(auth);
      expect(cache.recall(other, 'Bearer t', R)).toBe(auth);
      expect(cache.get('u', R, 60_000, inner, hooks)).toBeInstanceOf(Promise);
      expect(cache.get('t', `${R}/`, 60_000, inner, hooks)).toBeInstanceOf(Promise);
      expect(hooks.onHit).toHaveBeenCalledTimes(1);
      expect(hooks.onMiss).toHaveBeenCalledTimes(3);
    });

    it('never answers synchronously past the token exp or the cache bound: it verifies again', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      const cache = new TokenCache();
      const inner = vi.fn(async (token: string) => context(token, token === 's' ? 2 : 3_600));
      await cache.get('s', R, 3_600_000, inner);
      await cache.get('b', R, 5_000, inner);
      vi.setSystemTime(Date.now() + 2_500);
      expect(cache.get('s', R, 3_600_000, inner)).toBeInstanceOf(Promise);
      expect(cache.get('b', R, 5_000, inner)).not.toBeInstanceOf(Promise);
      vi.setSystemTime(Date.now() + 3_000);
      expect(cache.get('b', R, 5_000, inner)).toBeInstanceOf(Promise);
      await vi.waitFor(() => expect(inner).toHaveBeenCalledTimes(4));
    });
  });

  describe('recall on a connection', () => {
    const header = 'Bearer t';

    it('recalls the last header verified on a connection, for that connection, header and resource only', async () => {
      const cache = new TokenCache();
      const connection = {};
      const hooks = { onHit: vi.fn() };
      expect(cache.recall(connection, header, R)).toBeUndefined();
      const auth = await cache.verify('t', R, 60_000, async (token) => context(token), {}, { connection, header });
      expect(cache.recall(connection, header, R, hooks)).toBe(auth);
      expect(hooks.onHit).toHaveBeenCalledTimes(1);
      expect(cache.recall(connection, 'Bearer  t', R)).toBeUndefined();
      expect(cache.recall({}, header, R)).toBeUndefined();
      expect(cache.recall(connection, header, `${R}/other`)).toBeUndefined();
    });

    it('remembers a cache hit too, and only the latest header', async () => {
      const cache = new TokenCache();
      const inner = vi.fn(async (token: string) => context(token));
      const [a, b] = [{}, {}];
      await cache.verify('t', R, 60_000, inner, {}, { connection: a, header });
      const viaHit = await cache.verify('t', R, 60_000, inner, {}, { connection: b, header });
      expect(cache.recall(b, header, R)).toBe(viaHit);
      await cache.verify('u', R, 60_000, inner, {}, { connection: b, header: 'Bearer u' });
      expect(cache.recall(b, header, R)).toBeUndefined();
      expect(inner).toHaveBeenCalledTimes(2);
    });

    it('trusts a recalled token no longer than the cache would: its exp, and the cache bound', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      const cache = new TokenCache();
      const [short, bounded] = [{}, {}];
      await cache.verify('s', R, 3_600_000, async (token) => context(token, 2), {}, { connection: short, header: 'Bearer s' });
      await cache.verify('b', R, 5_000, async (token) => context(token, 3_600), {}, { connection: bounded, header: 'Bearer b' });
      vi.setSystemTime(Date.now() + 1_000);
      expect(cache.recall(short, 'Bearer s', R)).toBeDefined();
      expect(cache.recall(bounded, 'Bearer b', R)).toBeDefined();
      vi.setSystemTime(Date.now() + 1_500);
      expect(cache.recall(short, 'Bearer s', R)).toBeUndefined();
      vi.setSystemTime(Date.now() + 3_000);
      expect(cache.recall(bounded, 'Bearer b', R)).toBeUndefined();
    });

    it('never remembers a token that is already expired', async () => {
      const cache = new TokenCache();
      const connection = {};
      await cache.verify('t', R, 60_000, async (token) => context(token, -1), {}, { connection, header });
      expect(cache.recall(connection, header, R)).toBeUndefined();
    });
  });
});

