// The two readings a legacy SSE upstream gets from the gateway: its event
// stream, split however the network splits it, and its `endpoint` event, which
// must stay on the SSE URL's origin [X-sse-endpoint] whatever it says.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventStreamReader, EventTooLargeError, type StreamEvent } from '../../src/proxy/sse/event-stream-reader.js';
import { pinnedEndpoint } from '../../src/proxy/sse/endpoint-url.js';

const readAll = (chunks: Buffer[], max = 1 << 20): StreamEvent[] => {
  const reader = new EventStreamReader(max);
  return chunks.flatMap((c) => reader.push(c));
};

/** Splits `bytes` at the given cut points (any byte offset, mid-UTF-8 and mid-CRLF included). */
const cut = (bytes: Buffer, at: number[]): Buffer[] => {
  const points = [...new Set(at.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    parts.push(bytes.subarray(from, p));
    from = p;
  }
  parts.push(bytes.subarray(from));
  return parts;
};

describe('EventStreamReader', () => {
  it('reads endpoint and message events, multi-line data, comments and every line ending', () => {
    const text = ': hello\r\nevent: endpoint\r\ndata: /message?sessionId=1\r\n\r\nevent: message\ndata: {"a":\ndata: 1}\n\nid: 4\rdata:x\r\r';
    expect(readAll([Buffer.from(text)])).toEqual([
      { type: 'endpoint', data: '/message?sessionId=1' },
      { type: 'message', data: '{"a":\n1}' },
      { type: 'message', data: 'x' },
    ]);
  });

  it('gives the same events however the bytes are split', () => {
    const event = fc.record({
      type: fc.constantFrom('', 'message', 'endpoint', 'ping'),
      data: fc.array(fc.string({ unit: 'binary' }).map((s) => s.replace(/[\r\n]/g, '')), { minLength: 1, maxLength: 3 }),
      eol: fc.constantFrom('\n', '\r\n', '\r'),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), fc.array(fc.nat(), { maxLength: 12 }), (events, at) => {
        const text = events.map(({ type, data, eol }) => (type ? `event: ${type}${eol}` : '') + data.map((d) => `data: ${d}${eol}`).join('') + eol).join('');
        const expected = events.map(({ type, data }) => ({ type: type || 'message', data: data.join('\n') }));
        expect(readAll(cut(Buffer.from(text), at))).toEqual(expected);
      }),
    );
  });

  it('takes a CR ending a chunk as a line end at once, and an LF opening the next as the rest of it', () => {
    const reader = new EventStreamReader(1000);
    expect(reader.push(Buffer.from('data: a\r\r'))).toEqual([{ type: 'message', data: 'a' }]);
    expect(reader.push(Buffer.from('\n'))).toEqual([]);
    expect(reader.push(Buffer.from('\ndata: b\n\n'))).toEqual([{ type: 'message', data: 'b' }]);
  });

  it('refuses an event over its bound, with or without line ends', () => {
    expect(() => readAll([Buffer.from(`data: ${'x'.repeat(200)}\n`)], 100)).toThrow(EventTooLargeError);
    expect(() => readAll([Buffer.from('x'.repeat(60)), Buffer.from('x'.repeat(60))], 100)).toThrow(EventTooLargeError);
    expect(() => readAll(Array.from({ length: 30 }, () => Buffer.from('data: 12345\n')), 100)).toThrow(EventTooLargeError);
  });
});

describe('pinnedEndpoint [X-sse-endpoint]', () => {
  const sse = new URL('http://127.0.0.1:3001/sse');

  it('resolves relative endpoints against the SSE URL', () => {
    expect(pinnedEndpoint('/message?sessionId=abc', sse)).toBe('/message?sessionId=abc');
    expect(pinnedEndpoint('messages/?session_id=1', sse)).toBe('/messages/?session_id=1');
    expect(pinnedEndpoint(' http://127.0.0.1:3001/m?x=1#frag ', sse)).toBe('/m?x=1');
  });

  it.each([
    'http://127.0.0.1:3002/message',
    'https://127.0.0.1:3001/message',
    'http://localhost:3001/message',
    '//evil.example/message',
    'http://127.0.0.1:3001@evil.example/message',
    'http://user:pw@127.0.0.1:3001/message',
    'javascript:alert(1)',
    'file:///etc/passwd',
    '',
  ])('refuses %j', (endpoint) => {
    expect(pinnedEndpoint(endpoint, sse)).toBeUndefined();
  });

  it('never yields a target off the SSE URL origin, whatever the endpoint says', () => {
    const piece = fc.constantFrom('/', '//', '\\', '@', ':', '.', '..', '?', '#', '%2f', 'evil.example', '127.0.0.1', '3001', 'http:', 'https:', ' ', '\t');
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.webUrl(), fc.array(piece, { maxLength: 8 }).map((p) => p.join(''))), (endpoint) => {
        const pinned = pinnedEndpoint(endpoint, sse);
        if (pinned === undefined) return;
        expect(pinned.startsWith('/')).toBe(true);
        // What the pool requests: this path on the SSE origin, nowhere else.
        expect(new URL(sse.origin + pinned).origin).toBe(sse.origin);
      }),
      { numRuns: 2000 },
    );
  });
});
