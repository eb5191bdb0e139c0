import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SseEventSplitter, parseSseEvent } from '../../src/policy/sse-events.js';
import { toolsListFilter } from '../../src/policy/tools-list-filter.js';
import type { BodyTransform } from '../../src/proxy/response-transform.js';

const TOOLS = [{ name: 'echo' }, { name: 'delete_repo' }, { name: 'shell' }, { description: 'no name' }, { name: 42 }];
const toolsList = (id: unknown, tools: unknown[] = TOOLS) => ({ jsonrpc: '2.0', id, result: { tools, nextCursor: 'c2' } });
const allowed = new Set(['echo', 'delete_repo']);
const mayCall = (name: string) => allowed.has(name);

function transformFor(contentType: string, maxBytes = 1 << 20, encoding?: string): BodyTransform {
  const t = toolsListFilter({ mayCall, maxBytes })({ 'content-type': contentType, ...(encoding && { 'content-encoding': encoding }) });
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
        // The comment before any field goes on its own, then the blank line that followed it.
        expect(events.map((e) => parseSseEvent(e).data)).toEqual(['a', undefined, undefined, 'b', '{"k":"é"}']);
        // The LF of a CRLF cut from its CR travels with the next event: same bytes, no extra event.
        expect(rest.toString().replace(/^\n/, '')).toBe('data: tail');
      }),
      { numRuns: 2000 },
    );
  });

  it('hands on a keep-alive comment before any field at once, whatever the line ends and chunking; a comment inside an event stays with it', () => {
    const lineEnd = fc.constantFrom('\n', '\r\n', '\r');
    const piece = fc.oneof(
      lineEnd.map((end) => ({ keepAlive: true, text: `:${end}` })),
      fc.tuple(lineEnd, fc.constantFrom('', ' ping')).map(([end, note]) => ({ keepAlive: true, text: `:${note}${end}` })),
      lineEnd.map((end) => ({ keepAlive: false, text: `data: x${end}: inside${end}data: y${end}${end}` })),
    );
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 8 }), (pieces) => {
        const splitter = new SseEventSplitter(1 << 20);
        const out: Buffer[] = [];
        let sent = '';
        for (const { keepAlive, text } of pieces) {
          out.push(...splitter.push(Buffer.from(text)));
          sent += text;
          const given = Buffer.concat(out).toString();
          // A lone CR may still become CRLF: only that LF may wait. A whole event is out anyway.
          if (keepAlive || text.endsWith('\n')) expect(sent.startsWith(given) && sent.length - given.length <= 1, JSON.stringify({ sent, given })).toBe(true);
        }
        expect(Buffer.concat([...out, splitter.rest()]).toString()).toBe(sent);
        // The comment inside an event never leaves before the event's data.
        for (const event of out) if (event.includes('inside')) expect(parseSseEvent(event).data).toBe('x\ny');
      }),
      { numRuns: 1000 },
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
      expect(out).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'echo' }, { name: 'delete_repo' }], nextCursor: 'c2', cacheScope: 'private' } });
    }
  });

  it('holds the body back until it is whole', () => {
    const t = transformFor('application/json; charset=utf-8');
    expect(t.push(Buffer.from('{"jsonrpc":"2.0",')).length).toBe(0);
  });

  it('[J48] filters a tool list whatever its id; leaves unchanged answers byte for byte', () => {
    for (const id of [2, '1', null, 'x'.repeat(50), undefined]) {
      const out = JSON.parse(Buffer.concat(feed(transformFor('application/json'), Buffer.from(JSON.stringify(toolsList(id))))).toString());
      expect(out.result.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'delete_repo']);
    }
    const fine = Buffer.from(` ${JSON.stringify({ ...toolsList(1, [{ name: 'echo' }]), result: { tools: [{ name: 'echo' }], cacheScope: 'private' } })} `);
    expect(Buffer.concat(feed(transformFor('application/json'), fine)).equals(fine)).toBe(true);
  });

  it('marks every tool list it passes cacheScope "private", even one it left whole, and says its answers are per caller', () => {
    for (const cacheScope of [undefined, 'public', 'PUBLIC', 7]) {
      const answer = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'echo' }], ttlMs: 60000, ...(cacheScope === undefined ? {} : { cacheScope }) } };
      const out = JSON.parse(Buffer.concat(feed(transformFor('application/json'), Buffer.from(JSON.stringify(answer)))).toString());
      expect(out.result).toEqual({ tools: [{ name: 'echo' }], ttlMs: 60000, cacheScope: 'private' });
    }
    expect(transformFor('application/json').perCaller).toBe(true);
    expect(transformFor('text/event-stream').perCaller).toBe(true);
    // A second spelling of cacheScope could be read by a client instead of the one set: cut.
    const twice = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{"tools":[],"cacheScope":"public","CacheScope":"public"}}');
    expect(() => feed(transformFor('application/json'), twice)).toThrow(/one way/);
  });

  it('filters the tools/list answer inside a batch answer', () => {
    const body = Buffer.from(JSON.stringify([{ jsonrpc: '2.0', id: 0, result: {} }, toolsList(1)]));
    const out = JSON.parse(Buffer.concat(feed(transformFor('application/json'), body)).toString());
    expect(out[1].result.tools.map((t: { name: string }) => t.name)).toEqual(['echo', 'delete_repo']);
  });

  it('fails closed: unreadable, oversized or encoded answers throw', () => {
    expect(() => feed(transformFor('application/json'), Buffer.from('{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"shell"}'))).toThrow(/cannot be read/);
    // What holds no tool list passes as it came, parsed or not: no reader finds a tool list in it.
    const plain = Buffer.from('{"jsonrpc":');
    expect(Buffer.concat(feed(transformFor('application/json'), plain)).equals(plain)).toBe(true);
    expect(() => feed(transformFor('application/json', 10), Buffer.from(JSON.stringify(toolsList(1))))).toThrow(/exceeds/);
    expect(() => feed(transformFor('application/json', 1 << 20, 'gzip'), Buffer.from('x'))).toThrow(/gzip/);
  });

  it('does not touch other content types', () => {
    expect(toolsListFilter({ mayCall, maxBytes: 10 })({ 'content-type': 'text/plain' })).toBeUndefined();
  });
});

describe('tools/list filter: event stream', () => {
  const progress = msg({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } });
  const answer = msg(toolsList(1), 'id: ev-9\n');
  const later = msg({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'shell' }] } });

  it('[J48] rewrites every event holding a tool list, passes other events at once, never switches off', () => {
    const t = transformFor('text/event-stream');
    // An event passes as soon as it is complete.
    expect(t.push(Buffer.from(progress)).toString()).toBe(progress);
    // Half an answer is held back.
    expect(t.push(Buffer.from(answer.slice(0, 40))).length).toBe(0);
    const rewritten = t.push(Buffer.from(answer.slice(40) + later.slice(0, 10))).toString();
    const event = parseSseEvent(Buffer.from(rewritten));
    expect(event.otherLines).toEqual(['event: message', 'id: ev-9']);
    expect(JSON.parse(event.data!).result.tools).toEqual([{ name: 'echo' }, { name: 'delete_repo' }]);
    // A second answer for the same id (or any other) is filtered too.
    const second = t.push(Buffer.from(later.slice(10))).toString();
    expect(JSON.parse(parseSseEvent(Buffer.from(second)).data!).result.tools).toEqual([]);
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

  it('[J48] passes events of other types and plain events untouched; filters every id, GET streams included', () => {
    const plain = sse(`event: other\ndata: ${JSON.stringify(toolsList(1))}\n\n`, 'data: not json\n\n', ': comment\n\n');
    expect(Buffer.concat(feed(transformFor('text/event-stream'), plain)).equals(plain)).toBe(true);
    const out = Buffer.concat(feed(transformFor('text/event-stream'), sse(msg(toolsList(2)), msg(toolsList('resumed')), msg(toolsList(null))))).toString();
    expect(out).not.toContain('shell');
    expect(out.match(/delete_repo/g)).toHaveLength(3);
  });

  it('[J48] cuts an answer another reader could read differently, rather than pass it unfiltered', () => {
    const variants = [
      'data: {"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"shell"}]}}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"result":{"Tools":[{"name":"shell"}]}}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"result":{"tool\u017f":[{"name":"shell"}]}}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"Result":{"tools":[{"name":"shell"}]}}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"Name":"shell"}]}}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"shell"}]},"x":NaN}\n\n',
      'data: {"jsonrpc":"2.0","id":1,"result":{"\\u0074ools":[{"name":"shell"}]},"x":"\\ud800"}\n\n',
    ];
    for (const event of variants) expect(() => feed(transformFor('text/event-stream'), Buffer.from(event)), event).toThrow(/cannot be read/);
    // Escaped member names are read as every reader decodes them.
    const escaped = Buffer.from('data: {"jsonrpc":"2.0","id":1,"result":{"\\u0074ools":[{"name":"shell"},{"name":"echo"}]}}\n\n');
    expect(Buffer.concat(feed(transformFor('text/event-stream'), escaped)).toString()).not.toContain('shell');
  });

  it('[J48] reads the first event past a BOM, as EventSource clients do', () => {
    const stream = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(msg(toolsList(1)))]);
    expect(Buffer.concat(feed(transformFor('text/event-stream'), stream)).toString()).not.toContain('shell');
  });

  it('[J48] reads content types as clients do: JSON or an event stream anywhere in the value', () => {
    const body = Buffer.from(JSON.stringify(toolsList(1)));
    for (const type of ['text/plain, application/json', 'application/problem+json', 'APPLICATION/JSON']) {
      expect(Buffer.concat(feed(transformFor(type), body)).toString(), type).not.toContain('shell');
    }
    expect(Buffer.concat(feed(transformFor('application/json, text/event-stream'), Buffer.from(msg(toolsList(1))))).toString()).not.toContain('shell');
  });

  it('fails closed on an event that grows past the bound', () => {
    const t = transformFor('text/event-stream', 64);
    expect(() => t.push(Buffer.from(answer.slice(0, -2)))).toThrow(/exceeds/);
  });
});
