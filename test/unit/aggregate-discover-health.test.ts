// server/discover on an aggregated route probes an upstream not known yet with
// the caller's own credential (upstream-capabilities.ts). What that probe says
// of one caller (no grant yet at a user_oauth entry, a 4xx to its credential)
// must not mark the upstream down for every session of the route: before, any
// user without a grant could, by discover every 5 s, keep a user_oauth entry
// out of everyone's lists and calls. A forwarder written here stands in for
// the upstream (its status is all that matters).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { CallerAnswerError } from '../../src/proxy/aggregate/caller-answer.js';
import { UpstreamCapabilities } from '../../src/proxy/aggregate/upstream-capabilities.js';
import { UpstreamHealth } from '../../src/proxy/aggregate/upstream-health.js';
import type { AggregateUpstream } from '../../src/proxy/aggregate/upstream-link.js';
import type { Forwarder } from '../../src/proxy/forwarder.js';

const AUTH = { issuer: 'https://as.example', subject: 'mallory', clientId: 'c', scopes: [] } as unknown as AuthContext;
const HELLO = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't' } };

/** An upstream answering every request with `status` (and a JSON error body). */
const answering = (status: number): Forwarder => ({
  forward(_req: IncomingMessage, res: ServerResponse) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'no' }));
    return Promise.resolve();
  },
  close: () => Promise.resolve(),
});

function probed(upstream: Partial<AggregateUpstream>) {
  const u: AggregateUpstream = { name: 'u', forwarder: answering(200), headersFor: () => ({}), timeoutMs: 2_000, maxBytes: 64 * 1024, perSession: false, ...upstream };
  const health = new UpstreamHealth('/r/mcp', 'u');
  return { health, caps: new UpstreamCapabilities([u], [health]) };
}

describe('server/discover probing an aggregated upstream with one caller’s credential', () => {
  it('a caller without a grant at the entry (its connect link) leaves the upstream up for everyone', async () => {
    const { health, caps } = probed({ headersFor: () => Promise.reject(new CallerAnswerError(() => ({ result: {} }))) });
    await caps.all(AUTH, HELLO);
    expect(health.down).toBe(false);
  });

  it.each([401, 403, 429])('an HTTP %i to this caller leaves the upstream up for everyone', async (status) => {
    const { health, caps } = probed({ forwarder: answering(status) });
    await caps.all(AUTH, HELLO);
    expect(health.down).toBe(false);
  });

  it('an upstream that says it is unavailable (503) is marked down, as before', async () => {
    const { health, caps } = probed({ forwarder: answering(503) });
    await caps.all(AUTH, HELLO);
    expect(health.down).toBe(true);
  });
});
