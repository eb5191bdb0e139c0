// RevokedGrants, the per-replica set behind J52: replicas sharing one store
// agree after one poll, the revoking replica knows at once, nothing is revoked
// that was not, and a replica that cannot read the shared log turns built-in
// tokens "unknown" (503) after the bound instead of accepting them.
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError, type Store } from '../../src/store/store.js';

/** `backend` with its readLog replaced (every other method bound to it). */
function withReadLog(backend: MemoryStore, readLog: Store['readLog']): Store {
  return new Proxy(backend, {
    get(target, prop) {
      if (prop === 'readLog') return readLog;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

function replica(store: Store, metrics = new Metrics({ defaultMetrics: false })): RevokedGrants {
  return new RevokedGrants({ store, issuer: 'https://as.example', accessTokenTtlMs: 600_000, logger: quiet(), metrics });
}

afterEach(() => {
  vi.useRealTimers();
});

describe('RevokedGrants across replicas sharing a store', () => {
  it('property: the revoking replica knows at once, every other after its next poll, and no other grant is ever revoked', async () => {
    const command = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), replica: fc.nat(2), grant: fc.nat(7) }),
      fc.record({ kind: fc.constant('poll' as const), replica: fc.nat(2) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(command, { maxLength: 30 }), async (commands) => {
        const store = new MemoryStore({ maxEntries: 1000 });
        const replicas = [replica(store), replica(store), replica(store)];
        for (const r of replicas) await r.start();
        const revoked = new Set<string>();
        try {
          for (const c of commands) {
            const r = replicas[c.replica]!;
            if (c.kind === 'add') {
              const grant = `g${c.grant}`;
              await r.add(grant);
              revoked.add(grant);
              expect(r.state(grant)).toBe('revoked');
            } else {
              await r.poll();
              for (const grant of revoked) expect(r.state(grant)).toBe('revoked');
            }
          }
          for (const r of replicas) {
            await r.poll();
            for (let g = 0; g < 8; g++) expect(r.state(`g${g}`)).toBe(revoked.has(`g${g}`) ? 'revoked' : 'usable');
          }
        } finally {
          for (const r of replicas) r.close();
        }
      }),
      { numRuns: 60 },
    );
  });

  it('a revocation whose write to the shared log failed is written again at the next poll, so other replicas still learn it', async () => {
    const backend = new MemoryStore({ maxEntries: 100 });
    let failWrites = true;
    const flaky: Store = new Proxy(backend, {
      get(target, prop) {
        if (prop === 'appendToLog') {
          return (...args: Parameters<Store['appendToLog']>) => (failWrites ? Promise.reject(new StoreUnavailableError('blip')) : target.appendToLog(...args));
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const revoker = replica(flaky);
    const other = replica(backend);
    await revoker.start();
    await other.start();
    try {
      await revoker.add('blipped');
      expect(revoker.state('blipped')).toBe('revoked');
      await other.poll();
      expect(other.state('blipped')).toBe('usable');
      failWrites = false;
      await revoker.poll();
      await other.poll();
      expect(other.state('blipped')).toBe('revoked');
    } finally {
      revoker.close();
      other.close();
    }
  });

  it('a replica started after a revocation knows it from its first read', async () => {
    const store = new MemoryStore({ maxEntries: 100 });
    const first = replica(store);
    await first.start();
    await first.add('early');
    const late = replica(store);
    await late.start();
    expect(late.state('early')).toBe('revoked');
    expect(late.state('other')).toBe('usable');
    first.close();
    late.close();
  });
});

describe('RevokedGrants when the store cannot be read', () => {
  it('usable while reads are recent; unknown after 4 s without one; usable again after a read; revoked stays revoked', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const memory = new MemoryStore({ maxEntries: 100 });
    let down = false;
    const store = withReadLog(memory, (key, since) => (down ? Promise.reject(new StoreUnavailableError('down')) : memory.readLog(key, since)));
    const metrics = new Metrics({ defaultMetrics: false });
    const r = replica(store, metrics);
    await r.start();
    await r.add('gone');
    expect(r.state('live')).toBe('usable');

    down = true;
    vi.advanceTimersByTime(3_900);
    await r.poll();
    expect(r.state('live')).toBe('usable'); // the last good read is 3.9 s old
    vi.advanceTimersByTime(200);
    await r.poll();
    expect(r.state('live')).toBe('unknown');
    expect(r.state('gone')).toBe('revoked');
    expect(await metrics.registry.getSingleMetricAsString('mag_revocation_syncs_total')).toMatch(/result="error"} 2/);

    down = false;
    await r.poll();
    expect(r.state('live')).toBe('usable');
    expect(r.state('gone')).toBe('revoked');
    r.close();
  });

  it('never read at all (the store down from the start): unknown, not usable', async () => {
    const failing = withReadLog(new MemoryStore({ maxEntries: 10 }), () => Promise.reject(new StoreUnavailableError('down')));
    const r = replica(failing);
    await r.start();
    expect(r.state('any')).toBe('unknown');
    r.close();
  });

  it('a revoked grant is forgotten only after every token of it has expired (retention ≥ 1 h)', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const r = replica(new MemoryStore({ maxEntries: 10 }));
    await r.start();
    await r.add('old');
    vi.advanceTimersByTime(3_599_000);
    await r.poll();
    expect(r.state('old')).toBe('revoked');
    vi.advanceTimersByTime(2_000);
    await r.poll();
    expect(r.state('old')).toBe('usable');
    r.close();
  });
});
