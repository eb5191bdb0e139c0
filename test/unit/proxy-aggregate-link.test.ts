// How an aggregated route reads an upstream's answer (proxy/aggregate/upstream-link.ts
// through captured-exchange.ts): the answer to its own request id is found in a
// JSON body or anywhere in an event stream, whatever else the stream holds
// (a property over generated streams); a corpus of misbehaving answers each
// ends as an AggregateUpstreamError (the upstream is then left out), never as
// another exception and never as a result.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext } from '../../src/auth/principal.js';
import type { Forwarder } from '../../src/proxy/forwarder.js';
import { AggregateUpstreamError } from '../../src/proxy/aggregate/captured-exchange.js';
import { UpstreamLink } from '../../src/proxy/aggregate/upstream-link.js';

const AUTH: AuthContext = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [] } as unknown as AuthContext;
const HELLO = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't' } };

type Answer = (id: number, method: string) => { status?: number; type?: string; body: string } | 'hang' | 'destroy';

/** A forwarder that answers initialize properly and every later request as `answer` says. */
function fakeUpstream(answer: Answer): Forwarder {
  return {
    forward(req: IncomingMessage, res: ServerResponse, ctx) {
      // The session's GET stream (list_changed): this upstream has none.
      if (req.method === 'GET') return Promise.resolve(void res.writeHead(405).end());
      const message = JSON.parse(ctx.body.toString()) as { id?: number; method: string };
      if (message.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} } } }));
      } else if (message.id === undefined) res.writeHead(202).end();
      else {
        const a = answer(message.id, message.method);
        if (a === 'destroy') res.destroy();
        else if (a !== 'hang') {
          res.writeHead(a.status ?? 200, { 'content-type': a.type ?? 'application/json' });
          res.end(a.body);
        }
      }
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
}

const link = (answer: Answer, timeoutMs = 1_000) => new UpstreamLink({ name: 'u', forwarder: fakeUpstream(answer), headersFor: () => ({}), timeoutMs, maxBytes: 64 * 1024, perSession: false }, AUTH, HELLO);

describe('the answer to its own id, in JSON or an event stream', () => {
  it('property: found among other events (notifications, answers to other ids, comments, any line ending)', async () => {
    const noise = fc.oneof(
      fc.constant(': keep-alive'),
      fc.constant('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'),
      fc.nat(50).map((n) => `data: {"jsonrpc":"2.0","id":${n + 1000},"result":{"other":true}}`),
      fc.constant('event: message\ndata: not json'),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(noise, { maxLength: 5 }), fc.array(noise, { maxLength: 5 }), fc.constantFrom('\n', '\r\n'), async (before, after, eol) => {
        const l = link((id) => ({ type: 'text/event-stream', body: [...before, `id: 7\ndata: {"jsonrpc":"2.0","id":${id},"result":{"tools":[{"name":"x"}]}}`, ...after].map((e) => e.replaceAll('\n', eol)).join(eol + eol) + eol + eol }));
        expect((await l.request('tools/list', undefined, undefined, AUTH)).answer).toEqual({ result: { tools: [{ name: 'x' }] } });
      }),
      { numRuns: 60 },
    );
  });

  it("the upstream's own JSON-RPC error is an answer, passed on", async () => {
    const l = link((id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } }) }));
    expect((await l.request('prompts/list', undefined, undefined, AUTH)).answer).toEqual({ error: { code: -32601, message: 'Method not found' } });
  });
});

describe('misbehaving upstreams: an AggregateUpstreamError, never a result', () => {
  const corpus: [string, Answer][] = [
    ['500', () => ({ status: 500, body: 'oops' })],
    ['404 (the session forgotten)', () => ({ status: 404, body: '{}' })],
    ['not JSON', () => ({ body: '<html>' })],
    ['an answer to another id', (id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id: id + 1, result: {} }) })],
    ['a result that is not an object', (id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id, result: [1] }) })],
    ['an error without a code', (id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id, error: { message: 'x' } }) })],
    ['an event stream without the answer', () => ({ type: 'text/event-stream', body: 'data: {"jsonrpc":"2.0","method":"x"}\n\n' })],
    ['a body over max_body_bytes', (id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id, result: { pad: 'x'.repeat(70_000) } }) })],
    ['an answer cut off', () => 'destroy'],
    ['no answer in time', () => 'hang'],
  ];
  it.each(corpus)('%s', async (_name, answer) => {
    await expect(link(answer, 200).request('tools/call', { name: 'x' }, 'x', AUTH)).rejects.toBeInstanceOf(AggregateUpstreamError);
  });
});

describe("each request carries its own auth (issue 5 of the round-3 review: a credential may be per request)", () => {
  it('property: the credential headers of every request come from that request\'s token, not the first one\'s', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.stringMatching(/^[A-Za-z0-9]{8,20}$/), { minLength: 1, maxLength: 6 }), async (tokens) => {
        const seen: string[] = [];
        const forwarder = fakeUpstream((id) => ({ body: JSON.stringify({ jsonrpc: '2.0', id, result: {} }) }));
        const recording: Forwarder = { forward: (req, res, ctx) => (seen.push(`${ctx.injected?.authorization ?? ''}|${ctx.auth.token}`), forwarder.forward(req, res, ctx)), close: forwarder.close };
        const l = new UpstreamLink({ name: 'u', forwarder: recording, headersFor: (auth) => ({ authorization: `Bearer x-${auth.token}` }), timeoutMs: 1_000, maxBytes: 64 * 1024, perSession: false }, { ...AUTH, token: 'first' }, HELLO);
        for (const token of tokens) {
          const before = seen.length;
          await l.request('tools/call', { name: 'x' }, 'x', { ...AUTH, token });
          // The request itself (the last exchange of this call; initialize and initialized come first once).
          expect(seen.slice(before).at(-1)).toBe(`Bearer x-${token}|${token}`);
        }
      }),
      { numRuns: 30 },
    );
  });
});
