/**
 * One POST's answer on a stdio route (src/proxy/stdio/post-answer.ts), over a real node:http
 * response: a client that accepts both formats gets an event stream only once there is more than
 * its one response to carry (a related server message before it, or a batch response with more to
 * come); a lone response is one JSON body (issue 23: the event stream cost the gateway and the
 * client more per call). Over generated scripts (requests per POST, batch or not, accepted formats,
 * related messages before or between the responses): the format is the one that rule names, every
 * response and every related message reaches the client once, in order, with nothing else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostAnswer } from '../../src/proxy/stdio/post-answer.js';
import type { Message } from '../../src/proxy/stdio/messages.js';

/** What the process says, in order: a response to the request at `index`, or a message related to the POST. */
type Step = { kind: 'respond'; index: number } | { kind: 'relay' };

interface Script {
  requests: number;
  batch: boolean;
  stream: boolean;
  steps: Step[];
}

let script: Script;
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((_req, res) => {
    const { requests, batch, stream, steps } = script;
    const answer = new PostAnswer({ res, stream, batch, timeoutMs: 10_000, maxUnreadBytes: 1 << 20, done: () => undefined });
    answer.outstanding = requests;
    for (const step of steps) {
      if (step.kind === 'relay') answer.relay({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
      else answer.respond({ jsonrpc: '2.0', id: step.index, result: { n: step.index } });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** The messages of a body, JSON or event stream. */
function messagesOf(type: string, text: string): Message[] {
  if (type === 'text/event-stream') {
    return text
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice('data: '.length)) as Message);
  }
  const parsed = JSON.parse(text) as Message | Message[];
  return Array.isArray(parsed) ? parsed : [parsed];
}

/** Requests answered in some order, related messages anywhere before the last response (a single request: never a batch). */
const scripts: fc.Arbitrary<Script> = fc
  .record({ requests: fc.integer({ min: 1, max: 4 }), batch: fc.boolean(), stream: fc.boolean(), seed: fc.array(fc.nat(), { minLength: 12, maxLength: 12 }) })
  .map(({ requests, batch, stream, seed }) => {
    const order = [...Array(requests).keys()].sort((a, b) => (seed[a]! % 7) - (seed[b]! % 7) || a - b);
    const steps: Step[] = [];
    order.forEach((index, i) => {
      if (seed[4 + i]! % 3 === 0) steps.push({ kind: 'relay' });
      steps.push({ kind: 'respond', index });
    });
    return { requests, batch: batch || requests > 1, stream, steps };
  });

describe('a stdio POST answer: JSON unless more than the one response is to be carried', () => {
  it('a client accepting both gets a lone response as JSON, and an event stream when a related message comes first', async () => {
    script = { requests: 1, batch: false, stream: true, steps: [{ kind: 'respond', index: 0 }] };
    const lone = await fetch(url);
    expect(lone.headers.get('content-type')).toBe('application/json');
    expect(await lone.json()).toEqual({ jsonrpc: '2.0', id: 0, result: { n: 0 } });
    script = { requests: 1, batch: false, stream: true, steps: [{ kind: 'relay' }, { kind: 'respond', index: 0 }] };
    const related = await fetch(url);
    expect(related.headers.get('content-type')).toBe('text/event-stream');
    expect(messagesOf('text/event-stream', await related.text()).map((m) => m.id ?? m.method)).toEqual(['notifications/progress', 0]);
  });

  it('over generated scripts: the format the rule names, every message once and in order, nothing else', async () => {
    await fc.assert(
      fc.asyncProperty(scripts, async (s) => {
        script = s;
        const res = await fetch(url);
        const type = res.headers.get('content-type')!;
        const relayedFirst = s.stream && s.steps[0]!.kind === 'relay';
        const expectStream = s.stream && (relayedFirst || s.requests > 1);
        expect(type).toBe(expectStream ? 'text/event-stream' : 'application/json');
        const text = await res.text();
        // A JSON answer to a batch is an array, to a single request an object.
        if (type === 'application/json') expect(Array.isArray(JSON.parse(text))).toBe(s.batch);
        const got = messagesOf(type, text).map((m) => (m.method !== undefined ? 'relay' : m.id));
        // Related messages reach only an event stream; JSON carries the responses alone.
        const expected = s.steps.filter((st) => s.stream || st.kind === 'respond').map((st) => (st.kind === 'relay' ? 'relay' : st.index));
        expect(got).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });
});
