/**
 * An aggregated route's link to an upstream that forgets its sessions (proxy/aggregate/upstream-link.ts
 * with upstream-listener.ts): the link joins it afresh when its GET stream says the session is
 * gone, tells the new session again what the client asked (onRejoined → retell), and never more
 * often than the listener's waits allow, even when the upstream forgets every session at once
 * (404 to everything but initialize: a retold request that fails must not open yet another
 * session, which would loop without a wait). A stdio entry's session (perSession) is never joined
 * afresh in the background.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import type { Forwarder } from '../../src/proxy/forwarder.js';
import { UpstreamLink } from '../../src/proxy/aggregate/upstream-link.js';

const AUTH: AuthContext = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [] } as unknown as AuthContext;
const HELLO = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't' } };

/** Answers initialize with a new session id each time, and 404 to everything else (its GET stream too). */
function forgetfulUpstream() {
  const seen = { initialize: 0, get: 0, retold: [] as string[] };
  let sessions = 0;
  const forwarder: Forwarder = {
    forward(req: IncomingMessage, res: ServerResponse, ctx) {
      if (req.method === 'GET') return (seen.get++, Promise.resolve(void res.writeHead(404).end()));
      if (req.method === 'DELETE') return Promise.resolve(void res.writeHead(200).end());
      const m = JSON.parse(ctx.body.toString()) as { id?: number; method: string };
      if (m.method === 'initialize') {
        seen.initialize++;
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': `s${++sessions}` });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} } } }));
      } else if (m.method === 'notifications/initialized') res.writeHead(202).end();
      else {
        seen.retold.push(m.method);
        res.writeHead(404).end();
      }
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
  return { forwarder, seen };
}

const link = (forwarder: Forwarder, perSession = false) => new UpstreamLink({ name: 'u', forwarder, headersFor: () => ({}), timeoutMs: 1_000, maxBytes: 64 * 1024, perSession }, AUTH, HELLO);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('an upstream that forgets every session', () => {
  it('is joined afresh only after the listener’s waits (0.5 s, then 1 s, …), and what is retold to it never opens another session', async () => {
    const { forwarder, seen } = forgetfulUpstream();
    const l = link(forwarder);
    let rejoined = 0;
    l.onRejoined = () => {
      rejoined++;
      l.retell([{ method: 'logging/setLevel', params: { level: 'info' } }, { method: 'resources/subscribe', params: { uri: 'file:///x' } }]);
    };
    await l.open();
    await sleep(2_500);
    l.close();
    // Rejoins at 0.5 s and 1.5 s (the next at 3.5 s): never more, however fast the upstream answers.
    expect(seen.initialize).toBeGreaterThanOrEqual(2);
    expect(seen.initialize).toBeLessThanOrEqual(3);
    expect(rejoined).toBe(seen.initialize - 1);
    // Each new session was told again both, once; their 404s opened nothing.
    expect(seen.retold.length).toBeLessThanOrEqual(2 * rejoined);
    const after = seen.initialize;
    await sleep(1_500);
    expect(seen.initialize).toBe(after); // closed: nothing more
  });

  it("a stdio entry's session (its own process) is not joined afresh in the background", async () => {
    const { forwarder, seen } = forgetfulUpstream();
    const l = link(forwarder, true);
    await l.open();
    await sleep(1_500);
    expect(seen.initialize).toBe(1);
    expect(seen.get).toBe(1);
    l.close();
  });
});
