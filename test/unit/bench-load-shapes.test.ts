// The benchmark's traffic shapes send what they claim: shape c never repeats a
// token until its pool runs out (and counts what it reuses), shape b rotates
// its users' tokens over every connection, shape a keeps one token; with wrk
// (when installed) and autocannon alike, checked at a real HTTP server that
// records every request it gets.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad, MEASURED_BODY, type LoadTarget } from '../../bench/lib/load.js';
import { stripe, TokenFeed } from '../../bench/lib/token-feed.js';
import { findWrk, runWrk } from '../../bench/lib/wrk.js';

const tokens = (count: number, prefix = 't') => Array.from({ length: count }, (_, i) => `${prefix}${i}`);

describe('TokenFeed once (shape c): consecutive wrk runs', () => {
  it('no token twice until a stripe runs out, and exactly the repeats counted as reused', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 300 }),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.array(fc.nat({ max: 120 }), { minLength: 4, maxLength: 4 }), { minLength: 1, maxLength: 6 }),
        (poolSize, threads, runs) => {
          const pool = tokens(poolSize);
          const feed = new TokenFeed('once', pool);
          const stripes = Array.from({ length: threads }, (_, i) => stripe(pool, threads, i));
          // Every token in exactly one stripe.
          expect(stripes.flat().sort()).toEqual([...pool].sort());
          const sent: string[] = [];
          let reported = 0;
          for (const run of runs) {
            const taken = run.slice(0, threads);
            const positions = [...feed.positions(threads)];
            // What wrk-load.lua sends: thread i goes on from its position, past its stripe's end from its start.
            taken.forEach((count, i) => {
              for (let n = 0; n < count; n++) sent.push(stripes[i]![(positions[i]! + n) % stripes[i]!.length]!);
            });
            reported += feed.advance(taken);
          }
          const seen = new Set<string>();
          let repeats = 0;
          for (const token of sent) {
            if (seen.has(token)) repeats += 1;
            seen.add(token);
          }
          expect(reported).toBe(repeats);
          expect(feed.reused).toBe(repeats);
        },
      ),
    );
  });

  it('take() (autocannon) walks the pool in order, then counts every further request as reused', () => {
    const feed = new TokenFeed('once', tokens(5));
    expect(Array.from({ length: 5 }, () => feed.take())).toEqual(tokens(5));
    expect(feed.reused).toBe(0);
    expect([feed.take(), feed.take()]).toEqual(['t0', 't1']);
    expect(feed.reused).toBe(2);
  });

  it('is walked with one thread count', () => {
    const feed = new TokenFeed('once', tokens(10));
    feed.positions(2);
    expect(() => feed.positions(3)).toThrow();
    expect(() => new TokenFeed('once', tokens(2)).positions(3)).toThrow();
  });
});

describe('TokenFeed rotate (shape b)', () => {
  it('take() sends every user once per cycle, in an order that changes between cycles', () => {
    const users = tokens(16, 'user');
    const feed = new TokenFeed('rotate', users);
    const cycles = Array.from({ length: 20 }, () => Array.from({ length: 16 }, () => feed.take()));
    for (const cycle of cycles) expect([...cycle].sort()).toEqual([...users].sort());
    expect(new Set(cycles.map((c) => c.join())).size).toBeGreaterThan(1);
    expect(feed.reused).toBe(0);
  });
});

interface Seen {
  path: string;
  connection: number;
  authorization: string | undefined;
  body: string;
}

/** An upstream that records the path, Authorization header and body of every request, and which connection carried it. */
function recordingServer(): { server: Server; seen: Seen[] } {
  const seen: Seen[] = [];
  const ids = new WeakMap<object, number>();
  let next = 0;
  const server = createServer((req: IncomingMessage, res) => {
    if (!ids.has(req.socket)) ids.set(req.socket, next++);
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.once('end', () => {
      seen.push({ path: req.url ?? '', connection: ids.get(req.socket)!, authorization: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { server, seen };
}

const wrk = findWrk();
const loaders = [
  { name: 'autocannon', run: (target: LoadTarget) => runLoad(target, { connections: 32, durationSec: 0.5 }) },
  ...(wrk ? [{ name: 'wrk', run: (target: LoadTarget) => runWrk(wrk, target, { connections: 32, durationSec: 1 }, 2) }] : []),
];

describe.each(loaders)('the shapes as $name sends them', ({ run }) => {
  const { server, seen: all } = recordingServer();
  let origin = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  // A path per run: requests still in flight when a run ends are not counted in the next.
  const target = (path: string, feed?: TokenFeed): LoadTarget => ({
    name: 'recorder',
    url: `${origin}${path}`,
    headers: { 'content-type': 'application/json', authorization: 'Bearer static-token' },
    pid: process.pid,
    ...(feed ? { tokens: feed } : {}),
  });

  it('shape a: the one token on every request, the POST body intact', async () => {
    const sample = await run(target('/a'));
    const seen = all.filter((s) => s.path === '/a');
    expect(seen.length).toBeGreaterThan(10);
    expect(sample.requests).toBeLessThanOrEqual(seen.length);
    expect(new Set(seen.map((s) => s.authorization))).toEqual(new Set(['Bearer static-token']));
    expect(new Set(seen.map((s) => s.body))).toEqual(new Set([MEASURED_BODY]));
  });

  it('shape b: all 16 users on every connection, rarely the same token twice in a row on one', async () => {
    const users = tokens(16, 'user-');
    await run(target('/b', new TokenFeed('rotate', users)));
    const seen = all.filter((s) => s.path === '/b');
    expect(new Set(seen.map((s) => s.authorization))).toEqual(new Set(users.map((u) => `Bearer ${u}`)));
    const byConnection = new Map<number, typeof seen>();
    for (const request of seen) byConnection.set(request.connection, [...(byConnection.get(request.connection) ?? []), request]);
    let repeats = 0;
    for (const requests of byConnection.values()) {
      expect(new Set(requests.map((r) => r.authorization)).size).toBeGreaterThan(requests.length > 64 ? 8 : 1);
      requests.forEach((r, i) => (repeats += i > 0 && r.authorization === requests[i - 1]!.authorization ? 1 : 0));
    }
    // A random order repeats about 1 in 16; a fixed order lined up with the connections would repeat always.
    expect(repeats / seen.length).toBeLessThan(0.25);
  });

  it('shape c: no token twice across consecutive runs while the pool lasts, and reuse reported once it runs out', async () => {
    const feed = new TokenFeed('once', tokens(200_000, 'fresh-'));
    const first = await run(target('/c1', feed));
    const second = await run(target('/c2', feed));
    expect(first.tokensReused).toBe(0);
    expect(second.tokensReused).toBe(0);
    const sent = all.filter((s) => s.path === '/c1' || s.path === '/c2').map((s) => s.authorization);
    expect(sent.length).toBeGreaterThan(10);
    expect(new Set(sent).size).toBe(sent.length);

    const small = new TokenFeed('once', tokens(8, 'small-'));
    const exhausted = await run(target('/c3', small));
    expect(exhausted.tokensReused).toBeGreaterThanOrEqual(all.filter((s) => s.path === '/c3').length - 8);
  });
});
