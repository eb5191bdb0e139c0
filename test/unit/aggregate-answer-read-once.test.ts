// An aggregated route's upstream answer read once (issue 23): an answer that
// comes as an event stream is taken from the live reader of that stream (the
// one that passes progress on as it comes), never from a whole body (an event
// stream is not kept); a stream whose answer event lacks its closing blank
// line is finished by that reader; a JSON body is read from the body. A forwarder written here stands in
// for the upstream. Over generated answers (notifications before the answer,
// event stream or JSON, the last blank line or not, a JSON answer's value
// handed over as stdio's are): the answer is the one the upstream sent, and
// each event's data is parsed once, a handed-over value never.
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import type { AnswerValueSink, Forwarder } from '../../src/proxy/forwarder.js';
import { UpstreamLink } from '../../src/proxy/aggregate/upstream-link.js';

const AUTH = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [] } as unknown as AuthContext;
const HELLO = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } };

interface Shape {
  notifications: number;
  stream: boolean;
  closed: boolean;
  /** A JSON answer whose value the forwarder hands over (forwarder.ts AnswerValueSink), as stdio's do. */
  kept: boolean;
}

/** The upstream: initialize as JSON, no GET stream, the tools/list answer in the shape asked. */
function upstream(shape: () => Shape): Forwarder {
  return {
    forward(req: IncomingMessage, res: ServerResponse, ctx) {
      if (req.method !== 'POST') return Promise.resolve(void res.writeHead(405).end());
      const text = ctx.body.toString();
      const id = /"id":(\d+)/.exec(text)?.[1];
      if (id === undefined) return Promise.resolve(void res.writeHead(202).end());
      if (text.includes('"initialize"')) {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'up-1' }).end(`{"jsonrpc":"2.0","id":${id},"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}}}}`);
        return Promise.resolve();
      }
      const { notifications, stream, closed, kept } = shape();
      const answer = `{"jsonrpc":"2.0","id":${id},"result":{"tools":[{"name":"t${id}"}]}}`;
      if (!stream && kept) {
        // As the stdio forwarder's answers: the value it serialised handed over with the text.
        res.writeHead(200, { 'content-type': 'application/json' });
        (res as unknown as AnswerValueSink).keepAnswerValue({ jsonrpc: '2.0', id: Number(id), result: { tools: [{ name: `t${id}` }] } });
        return Promise.resolve(void res.end(answer));
      }
      if (!stream) return Promise.resolve(void res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < notifications; i++) res.write(`event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":${i}}}\n\n`);
      res.end(`event: message\ndata: ${answer}${closed ? '\n\n' : ''}`);
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
}

afterEach(() => vi.restoreAllMocks());

describe("an aggregated route's upstream answer", () => {
  it('is the answer the upstream sent, each event parsed once, whatever its shape', async () => {
    let shape: Shape = { notifications: 0, stream: true, closed: true, kept: false };
    const link = new UpstreamLink({ name: 'u', forwarder: upstream(() => shape), headersFor: () => ({}), timeoutMs: 2_000, maxBytes: 64 * 1024, perSession: false }, AUTH, HELLO);
    await link.open();
    await fc.assert(
      fc.asyncProperty(fc.record({ notifications: fc.integer({ min: 0, max: 3 }), stream: fc.boolean(), closed: fc.boolean(), kept: fc.boolean() }), async (s) => {
        shape = s;
        const parse = vi.spyOn(JSON, 'parse');
        const { answer } = await link.request('tools/list', undefined, undefined, AUTH);
        const parses = parse.mock.calls.length;
        parse.mockRestore();
        expect(answer.result?.tools).toEqual([{ name: expect.stringMatching(/^t\d+$/) as unknown }]);
        // An event stream: each event once, live (an unclosed last one too, when the stream ends).
        // A JSON body once, unless its value was handed over: then never.
        const expected = !s.stream ? (s.kept ? 0 : 1) : s.notifications + 1;
        expect(parses).toBe(expected);
      }),
      { numRuns: 40 },
    );
    link.close();
  });
});
