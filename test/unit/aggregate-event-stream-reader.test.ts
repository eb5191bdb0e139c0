/**
 * The reader of an upstream's GET stream (aggregated routes): whatever way the
 * stream is cut into chunks, and whichever line ending it uses, the same
 * messages come out in order; an unfinished event beyond the bound is
 * dropped, so a hostile upstream cannot grow what the gateway holds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventStreamReader } from '../../src/proxy/aggregate/event-stream-reader.js';

const message = fc.record({ jsonrpc: fc.constant('2.0'), method: fc.constantFrom('notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/message'), params: fc.option(fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 20 })), { nil: undefined }) });

describe('EventStreamReader', () => {
  it('property: any chunking and line ending gives the messages sent, in order (comments and other fields skipped)', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), fc.constantFrom('\n', '\r\n', '\r'), fc.array(fc.nat(), { maxLength: 10 }), (messages, eol, cuts) => {
        const text = messages.map((m) => `: keep-alive${eol}event: message${eol}id: 1${eol}data: ${JSON.stringify(m)}${eol}${eol}`).join('');
        const bytes = Buffer.from(text);
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const seen: unknown[] = [];
        const reader = new EventStreamReader(1_000_000, (m) => seen.push(m));
        let from = 0;
        for (const at of [...points, bytes.length]) {
          reader.push(bytes.subarray(from, at));
          from = at;
        }
        expect(seen).toEqual(JSON.parse(JSON.stringify(messages)));
      }),
    );
  });

  it('drops an unfinished event longer than its bound, then reads the next', () => {
    const seen: unknown[] = [];
    const reader = new EventStreamReader(1_000, (m) => seen.push(m));
    for (let i = 0; i < 100; i++) reader.push(Buffer.from('data: ' + 'x'.repeat(100)));
    reader.push(Buffer.from('\n\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'));
    expect(seen).toEqual([{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }]);
  });

  it('a line trickled a byte at a time past the bound is dropped, and the events after it are read', () => {
    const seen: unknown[] = [];
    const reader = new EventStreamReader(16_384, (m) => seen.push(m));
    const line = Buffer.from(': ' + 'x'.repeat(65_536));
    for (let i = 0; i < line.length; i++) reader.push(line.subarray(i, i + 1));
    reader.push(Buffer.from('\n\ndata: {"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}\n\n'));
    expect(seen).toEqual([{ jsonrpc: '2.0', method: 'notifications/prompts/list_changed' }]);
  });
});
