/**
 * A request of an aggregated session on an upstream session the upstream no longer knows
 * (proxy/aggregate/upstream-link.ts, docs/aggregation.md "An upstream that forgot the session"):
 * 404, or 400 confirmed by a `ping` on the same session answered 400 or 404, joins the upstream
 * afresh and sends the request once more there; a 400 whose ping is answered is a plain bad
 * request (the caller's error, no new session); a stdio entry's session is never joined afresh
 * by this; the retried request failing again is that failure (no loop).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import type { Forwarder } from '../../src/proxy/forwarder.js';
import { AggregateUpstreamError } from '../../src/proxy/aggregate/captured-exchange.js';
import { UpstreamLink } from '../../src/proxy/aggregate/upstream-link.js';

const AUTH = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [] } as unknown as AuthContext;
const HELLO = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't' } };

interface Script {
  /** The status of a tools/call on the first session (the later sessions answer it). */
  call: number;
  /** The status of a ping on the first session. */
  ping: number;
  /** The later sessions answer tools/call with this status (default 200). */
  callAfter?: number;
}

/** An upstream whose first session answers as scripted; sessions opened later answer everything. */
function upstream(script: Script) {
  const seen: string[] = [];
  let sessions = 0;
  const forwarder: Forwarder = {
    forward(req: IncomingMessage, res: ServerResponse, ctx) {
      if (req.method === 'GET') return Promise.resolve(void res.writeHead(405).end());
      if (req.method === 'DELETE') return Promise.resolve(void res.writeHead(200).end());
      const session = req.headers['mcp-session-id'];
      const m = JSON.parse(ctx.body.toString()) as { id?: number; method: string };
      seen.push(`${m.method}${session ? `@${String(session)}` : ''}`);
      const json = (status: number, body: unknown) => void res.writeHead(status, { 'content-type': 'application/json', ...(m.method === 'initialize' && { 'mcp-session-id': `s${++sessions}` }) }).end(JSON.stringify(body));
      if (m.method === 'initialize') json(200, { jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} } } });
      else if (m.method === 'notifications/initialized') res.writeHead(202).end();
      else {
        const status = session === 's1' ? (m.method === 'ping' ? script.ping : script.call) : m.method === 'ping' ? 200 : (script.callAfter ?? 200);
        json(status, status === 200 ? { jsonrpc: '2.0', id: m.id, result: { content: [] } } : { jsonrpc: '2.0', id: m.id ?? null, error: { code: -32000, message: 'Bad Request' } });
      }
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
  return { forwarder, seen };
}

const linkTo = (forwarder: Forwarder, perSession = false) => new UpstreamLink({ name: 'u', forwarder, headersFor: () => ({}), timeoutMs: 2_000, maxBytes: 64 * 1024, perSession }, AUTH, HELLO);

describe('a request on an upstream session the upstream forgot', () => {
  it.each([
    // [call, ping] → joined afresh and sent again?
    { call: 404, ping: 200, rejoins: true, why: '404: MCP says the session is gone' },
    { call: 400, ping: 400, rejoins: true, why: '400 and the ping 400: forgotten (server-everything)' },
    { call: 400, ping: 404, rejoins: true, why: '400 and the ping 404: forgotten' },
    { call: 400, ping: 200, rejoins: false, why: 'a plain bad request: the session answers ping' },
    { call: 400, ping: 500, rejoins: false, why: 'the ping fails otherwise: not known to be forgotten' },
    { call: 403, ping: 400, rejoins: false, why: 'any other refusal is the caller’s' },
  ])('$why', async ({ call, ping, rejoins }) => {
    const { forwarder, seen } = upstream({ call, ping });
    const link = linkTo(forwarder);
    let rejoined = 0;
    link.onRejoined = () => void rejoined++;
    await link.open();
    const asked = link.request('tools/call', { name: 'x' }, 'x', AUTH);
    if (rejoins) {
      expect((await asked).answer.result).toEqual({ content: [] });
      expect(seen.filter((s) => s.startsWith('tools/call'))).toEqual(['tools/call@s1', 'tools/call@s2']);
      expect(seen.filter((s) => s === 'initialize')).toHaveLength(2);
      expect(rejoined).toBe(1);
      expect(link.session).toBe('s2');
    } else {
      await expect(asked).rejects.toMatchObject({ status: call });
      expect(seen.filter((s) => s === 'initialize')).toHaveLength(1);
      expect(rejoined).toBe(0);
      expect(link.session).toBe('s1');
    }
    // A 400 is asked about with one ping on the session that answered it; nothing else is.
    expect(seen.filter((s) => s.startsWith('ping'))).toEqual(call === 400 ? ['ping@s1'] : []);
    link.close();
  });

  it('the request sent again failing again is that failure: one new session per request, never a loop', async () => {
    const { forwarder, seen } = upstream({ call: 400, ping: 400, callAfter: 400 });
    const link = linkTo(forwarder);
    await link.open();
    const err = await link.request('tools/call', { name: 'x' }, 'x', AUTH).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AggregateUpstreamError);
    expect(seen.filter((s) => s === 'initialize')).toHaveLength(2);
    expect(seen.filter((s) => s.startsWith('tools/call'))).toHaveLength(2);
    link.close();
  });

  it("a stdio entry's session (its own process): a 400 is that request's answer, and a 404 opens it afresh at the next request, not this one", async () => {
    for (const call of [400, 404]) {
      const { forwarder, seen } = upstream({ call, ping: 400 });
      const link = linkTo(forwarder, true);
      await link.open();
      await expect(link.request('tools/call', { name: 'x' }, 'x', AUTH)).rejects.toMatchObject({ status: call });
      expect(seen.filter((s) => s === 'initialize' || s.startsWith('ping'))).toEqual(['initialize']);
      link.close();
    }
  });
});
