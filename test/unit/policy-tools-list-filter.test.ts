import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SseEventSplitter, parseSseEvent } from '../../src/policy/sse-events.js';
import { toolsListFilter, type ToolsListAnswers } from '../../src/policy/tools-list-filter.js';
import { idKey } from '../../src/policy/json-rpc.js';
import type { BodyTransform } from '../../src/proxy/forward.js';

const TOOLS = [{ name: 'echo' }, { name: 'delete_repo' }, { name: 'shell' }, { description: 'no name' }, { name: 42 }];
const toolsList = (id: unknown, tools: unknown[] = TOOLS) => ({ jsonrpc: '2.0', id, result: { tools, nextCursor: 'c2' } });
const allowed = new Set(['echo', 'delete_repo']);
const mayCall = (name: string) => allowed.has(name);

function transformFor(contentType: string, answers: ToolsListAnswers = { ids: new Set([idKey(1)]) }, maxBytes = 1 << 20, encoding?: string): BodyTransform {
  const t = toolsListFilter({ answers, mayCall, maxBytes })({ 'content-type': contentType, ...(encoding && { 'content-encoding': encoding }) });
  if (!t) throw new Error('no transform');
  return t;
}

/** Feeds `input` cut at `cuts`, returns every output chunk. */
function feed(t: BodyTransform, input: Buffer, cuts: number[] = []): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < input.length)].sort((a, b) => a - b).concat(input.length)) {
    out.push(t.push(input.subarray(at, cut)));
    at = cut;
  }
  out.push(t.end());
  return out;
}

const sse = (...events: string[]) => Buffer.from(events.join(''));
const msg = (value: unknown, extra = '') => `event: message\n${extra}data: ${JSON.stringify(value)}\n\n`;

describe('SseEventSplitter', () => {
  it('returns whole events only, byte for byte, whatever the chunking (LF, CRLF, CR)', () => {
    const stream = Buffer.from('data: a\n\n: ping\r\n\r\nevent: x\rdata: b\r\rid: 7\r\ndata: {"k":"é"}\r\n\r\ndata: tail');
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 12 }), (cuts) => {
        const splitter = new SseEventSplitter(1 << 20);
        const events: Buffer[] = [];
        let at = 0;
        for (const cut of [...cuts].sort((a, b) => a - b).concat(stream.length)) {
          events.push(...splitter.push(stream.subarray(at, cut)));
          at = cut;
        }
        const rest = splitter.rest();
        expect(Buffer.concat([...events, rest]).equals(stream)).toBe(true);
        expect(events.map((e) => parseSseEvent(e).data)).toEqual(['a', undefined, 'b', '{"k":"é"}']);
        // The LF of a CRLF cut from its CR travels with the next event: same bytes, no extra event.
        expect(rest.toString().replace(/^\n/, '')).toBe('data: tail');
      }),
      { numRuns: 2000 },
    );
  });

  it('bounds what it holds back', () => {
    const splitter = new SseEventSplitter(100);
    expect(() => splitter.push(Buffer.from(`data: ${'x'.repeat(200)}`))).toThrow(/exceeds 100 bytes/);
  });
});

describe('tools/list filter: JSON', () => {
  it('removes the tools the caller may not call (and unnamed ones), keeps everything else', () => {
    const body = Buffer.from(JSON.stringify(toolsList(1)));
    for (const cuts of [[], [1], [5, 17, 30]]) {
      const out = JSON.parse(Buffer.concat(feed(transformFor('application/json'), body, cuts)).toString());
      expect(out).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'echo' }, { name: 'delete_repo' }], nextCursor: 'c2' } });
    }
  });

  it('holds the body back until it is whole', () => {
    const t = transformFor('application/json; charset=utf-8');
    expect(t.push(Buffer.from('{"jsonrpc":"2.0",')).length).toBe(0);
  });

  it('leaves other ids and unchanged answers byte for byte', () => {
    const other = Buffer.from(` ${JSON.stringify(toolsList(2))} `);
    expect(Buffer.concat(feed(transformFor('application/json'), other)).equals(other)).toBe(true);
    const fine = Buffer.from(JSON.stringify(toolsList(1, [{ name: 'echo' }])));
    expect(Buffer.concat(feed(transformFor('application/json'), fine)).equals(fine)).toBe(true);
    // "1" is not 1.
    const stringId = Buffer.from(JSON.stringify(toolsList('1')));
    expect(Buffer.concat(feed(transformFor('application/json'), stringId)).equals(stringId)).toBe(true);
  });

  it('filters the tools/list answer inside a batch answer', () => {
    const body = Buffer.from(JSON.stringify([{ jsonrpc: '2.0', id: 0, result: {} }, toolsList(1)]));
    const out = JSON.parse(Buffer.concat(feed(transformFor('application/json'), body)).toString());
    expect(out[1].result.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'delete_repo']);
  });

  it('fails closed: unreadable, oversized or encoded answers throw', () => {
    expect(() => feed(transformFor('application/json'), Buffer.from('{"jsonrpc":'))).toThrow(/does not parse/);
    expect(() => feed(transformFor('application/json', undefined, 10), Buffer.from(JSON.stringify(toolsList(1))))).toThrow(/exceeds/);
    expect(() => feed(transformFor('application/json', undefined, 1 << 20, 'gzip'), Buffer.from('x'))).toThrow(/gzip/);
  });

  it('does not touch other content types', () => {
    expect(toolsListFilter({ answers: { any: true }, mayCall, maxBytes: 10 })({ 'content-type': 'text/plain' })).toBeUndefined();
  });
});

describe('tools/list filter: event stream', () => {
  const progress = msg({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } });
  const answer = msg(toolsList(1), 'id: ev-9\n');
  const later = msg({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'shell' }] } });

  it('rewrites only the awaited answer, passes other events at once, then passes everything untouched', () => {
    const t = transformFor('text/event-stream');
    // An event passes as soon as it is complete.
    expect(t.push(Buffer.from(progress)).toString()).toBe(progress);
    // Half an answer is held back.
    expect(t.push(Buffer.from(answer.slice(0, 40))).length).toBe(0);
    const rewritten = t.push(Buffer.from(answer.slice(40) + later.slice(0, 10))).toString();
    const event = parseSseEvent(Buffer.from(rewritten.slice(0, rewritten.indexOf('\n\n') + 2)));
    expect(event.otherLines).toEqual(['event: message', 'id: ev-9']);
    expect(JSON.parse(event.data!).result.tools).toEqual([{ name: 'echo' }, { name: 'delete_repo' }]);
    // Answered: the rest of the stream (even a second "answer") passes as is.
    expect(rewritten.endsWith(later.slice(0, 10))).toBe(true);
    expect(t.push(Buffer.from(later.slice(10))).toString()).toBe(later.slice(10));
  });

  it('gives the same bytes whatever the chunking', () => {
    const stream = sse(progress, ': keepalive\n\n', answer, progress);
    const whole = Buffer.concat(feed(transformFor('text/event-stream'), stream)).toString();
    expect(whole).not.toContain('shell');
    expect(whole.startsWith(progress + ': keepalive\n\n')).toBe(true);
    expect(whole.endsWith(progress)).toBe(true);
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 10 }), (cuts) => {
        expect(Buffer.concat(feed(transformFor('text/event-stream'), stream, cuts)).toString()).toBe(whole);
      }),
      { numRuns: 500 },
    );
  });

  it('passes events of other types, unparseable data and other ids untouched', () => {
    const stream = sse(`event: other\ndata: ${JSON.stringify(toolsList(1))}\n\n`, 'data: not json\n\n', msg(toolsList(2)));
    expect(Buffer.concat(feed(transformFor('text/event-stream'), stream)).equals(stream)).toBe(true);
  });

  it('on a GET stream filters any tool list (a resumed answer)', () => {
    const stream = sse(msg(toolsList('resumed')), msg(toolsList(5)));
    const out = Buffer.concat(feed(transformFor('text/event-stream', { any: true }), stream)).toString();
    expect(out).not.toContain('shell');
    expect(out.match(/delete_repo/g)).toHaveLength(2);
  });

  it('fails closed on an event that grows past the bound', () => {
    const t = transformFor('text/event-stream', undefined, 64);
    expect(() => t.push(Buffer.from(answer.slice(0, -2)))).toThrow(/exceeds/);
  });
});
