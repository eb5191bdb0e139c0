/**
 * [J47] One reading of every body, as properties. Bodies are built as text from
 * members spelled exactly, in another case, with Go's special folds (ſ, K),
 * fullwidth, escaped, and repeated, in any order, alone or in batches. Whatever
 * the gateway's reader accepts must read the same to:
 * - in-process references: a first-wins reader, a last-wins reader, and a
 *   case-insensitive (folding) reader;
 * - real readers: Python's json and Go's encoding/json, as processes.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJsonRpcBody, type ParsedRequest } from '../../../src/policy/json-rpc.js';
import { comparable, gatewayReading, startJsonReaders, type JsonReader } from '../../helpers/json-readers.js';
import { fuzz } from './harness.js';

/** Spellings of each member: the exact one first. Keys are written raw into the JSON text. */
const SPELLINGS = {
  jsonrpc: ['jsonrpc', 'JSONRPC', 'jsonRpc'],
  id: ['id', 'Id', 'ID', 'ıd', '\\u0069d'],
  method: ['method', 'Method', 'METHOD', 'ｍethod', 'metho\\u0064', 'me\\u200bthod', 'method\\u0000'],
  params: ['params', 'Params', 'paramſ', 'PARAMS', 'para\\u006ds'],
  name: ['name', 'Name', 'NAME', 'ｎame', 'n\\u0061me', 'na\\u00adme'],
  uri: ['uri', 'URI', 'Uri', '\\u0075ri'],
  arguments: ['arguments', 'Arguments'],
} as const;

const METHODS = ['tools/call', 'tools/list', 'resources/read', 'prompts/get', 'ping', 'Tools/Call', 'x-vendor/op'];
const NAMES = ['echo', 'shell', 'file:///secret/a', 'admin_x', 'ſhell', 'SHELL'];

const spelling = <K extends keyof typeof SPELLINGS>(key: K) =>
  fc.oneof({ weight: 4, arbitrary: fc.constant(SPELLINGS[key][0]) }, { weight: 2, arbitrary: fc.constantFrom(...SPELLINGS[key]) });

const member = (key: string, value: string) => `"${key}":${value}`;
const object = (members: string[]) => `{${members.join(',')}}`;

/** Some members in a random order: the exact core of a message, then (sometimes) variants and repeats. */
const shuffled = (core: string[], extras: string[]) =>
  fc.shuffledSubarray([...core, ...extras], { minLength: core.length + extras.length, maxLength: core.length + extras.length });
const sometimes = <T>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: fc.constant([] as T[]) }, { weight: 2, arbitrary: fc.array(arbitrary, { minLength: 1, maxLength: 2 }) });
const value = fc.constantFrom(...NAMES).map((v) => JSON.stringify(v));

const paramsText = fc
  .tuple(
    fc.constantFrom('name', 'uri'),
    value,
    sometimes(
      fc.oneof(
        fc.tuple(spelling('name'), value).map(([k, v]) => member(k, v)),
        fc.tuple(spelling('uri'), value).map(([k, v]) => member(k, v)),
        spelling('arguments').map((k) => member(k, '{"a":1}')),
      ),
    ),
  )
  .chain(([key, v, extras]) => shuffled([member(key, v), member('arguments', '{}')], extras))
  .map(object);

const messageText = fc
  .tuple(
    fc.constantFrom(...METHODS),
    fc.option(fc.constantFrom('1', '2', '"1"', '"a"', 'null'), { nil: undefined }),
    fc.option(paramsText, { nil: undefined }),
    sometimes(
      fc.oneof(
        spelling('jsonrpc').map((k) => member(k, '"2.0"')),
        fc.tuple(spelling('id'), fc.constantFrom('1', '2', '"1"', '"a"', 'null')).map(([k, v]) => member(k, v)),
        fc.tuple(spelling('method'), fc.constantFrom(...METHODS)).map(([k, v]) => member(k, JSON.stringify(v))),
        fc.tuple(spelling('params'), paramsText).map(([k, v]) => member(k, v)),
      ),
    ),
  )
  .chain(([method, id, params, extras]) =>
    shuffled([member('jsonrpc', '"2.0"'), member('method', JSON.stringify(method)), ...(id ? [member('id', id)] : []), ...(params ? [member('params', params)] : [])], extras),
  )
  .map(object);

const body = fc.oneof(messageText, fc.array(messageText, { minLength: 1, maxLength: 4 }).map((messages) => `[${messages.join(',')}]`));

function gatewayRead(text: string): ParsedRequest | undefined {
  try {
    return parseJsonRpcBody(Buffer.from(text));
  } catch {
    return undefined;
  }
}

// --- in-process references ---------------------------------------------------

type Members = Array<[string, unknown]>;

/** A JSON reader that keeps every member in order (duplicates included). */
function membersOf(text: string): unknown {
  // JSON.parse with a reviver cannot see duplicates: rewrite each object as a list of pairs first.
  let at = 0;
  const ws = () => {
    while (/\s/.test(text[at] ?? '')) at++;
  };
  const value = (): unknown => {
    ws();
    const c = text[at];
    if (c === '{') {
      at++;
      const pairs: Members = [];
      ws();
      if (text[at] === '}') return at++, { pairs };
      for (;;) {
        ws();
        const key = value() as string;
        ws();
        at++; // ':'
        pairs.push([key, value()]);
        ws();
        if (text[at++] === '}') return { pairs };
      }
    }
    if (c === '[') {
      at++;
      const items: unknown[] = [];
      ws();
      if (text[at] === ']') return at++, items;
      for (;;) {
        items.push(value());
        ws();
        if (text[at++] === ']') return items;
      }
    }
    const start = at;
    if (c === '"') {
      at++;
      while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
      at++;
    } else while (at < text.length && !/[,}\]\s]/.test(text[at]!)) at++;
    return JSON.parse(text.slice(start, at)) as unknown;
  };
  return value();
}

type Pick = (pairs: Members, name: string) => unknown;
const firstWins: Pick = (pairs, name) => pairs.find(([k]) => k === name)?.[1];
const lastWins: Pick = (pairs, name) => pairs.findLast(([k]) => k === name)?.[1];
/** Go's rule: an exact match wins, else the last case-insensitive one (with ſ → s, K → k). */
const goFold = (s: string) => s.replaceAll('ſ', 's').replaceAll('\u212a', 'k').toLowerCase();
const caseInsensitive: Pick = (pairs, name) => lastWins(pairs, name) ?? pairs.findLast(([k]) => goFold(k) === goFold(name))?.[1];

function referenceReading(text: string, pick: Pick) {
  const tree = membersOf(text);
  const messages = (Array.isArray(tree) ? tree : [tree]) as Array<{ pairs: Members }>;
  return messages.map((m) => {
    const params = pick(m.pairs, 'params') as { pairs: Members } | undefined;
    const method = pick(m.pairs, 'method');
    const id = pick(m.pairs, 'id');
    return {
      method,
      name: params && (method === 'tools/call' || method === 'prompts/get') ? pick(params.pairs, 'name') : undefined,
      uri: params && method === 'resources/read' ? pick(params.pairs, 'uri') : undefined,
      id,
    };
  });
}

function ownReading(request: ParsedRequest) {
  return request.messages.map((m) => {
    const params = m.params as Record<string, unknown> | undefined;
    return {
      method: m.method,
      name: params && (m.method === 'tools/call' || m.method === 'prompts/get') ? params.name : undefined,
      uri: params && m.method === 'resources/read' ? params.uri : undefined,
      id: m.id,
    };
  });
}

describe('[J47] accepted ⇒ first-wins, last-wins and case-insensitive readers agree with the gateway (in process)', () => {
  const tally = { accepted: 0, refused: 0 };
  fuzz(
    'one reading: accepted bodies read the same first-wins, last-wins and case-insensitively',
    () =>
      fc.property(body, (text) => {
        const request = gatewayRead(text);
        if (!request) {
          tally.refused++;
          return;
        }
        tally.accepted++;
        const own = ownReading(request);
        expect(referenceReading(text, firstWins)).toEqual(own);
        expect(referenceReading(text, lastWins)).toEqual(own);
        expect(referenceReading(text, caseInsensitive)).toEqual(own);
      }),
    { numRuns: 3000 },
  );
  it('the generator makes both kinds of body (the property is not vacuous)', () => {
    expect(tally.accepted).toBeGreaterThan(100);
    expect(tally.refused).toBeGreaterThan(100);
  });
});

describe('[J47] accepted ⇒ Python json and Go encoding/json read what the gateway judged', () => {
  let python: JsonReader;
  let go: JsonReader | undefined;
  const tally = { accepted: 0, refused: 0, goDisagreedOnRefused: 0 };

  beforeAll(async () => {
    ({ python, go } = await startJsonReaders());
  }, 180_000);
  afterAll(async () => {
    await Promise.all([python?.close(), go?.close()]);
  });

  fuzz(
    'one reading: accepted bodies read the same to Python json and Go encoding/json',
    () =>
      fc.asyncProperty(body, async (text) => {
        const request = gatewayRead(text);
        const bytes = Buffer.from(text);
        const readers = [python, ...(go ? [go] : [])];
        const answers = await Promise.all(readers.map((r) => r.read(bytes)));
        if (!request) {
          tally.refused++;
          const own = JSON.stringify(gatewayReadingLoose(text));
          if (go && answers.at(-1)!.ok && JSON.stringify(comparable(answers.at(-1)!)) !== own) tally.goDisagreedOnRefused++;
          return;
        }
        tally.accepted++;
        const expected = gatewayReading(request);
        for (const [i, answer] of answers.entries()) {
          // A reader that fails is a refusal further on, not another reading.
          if (answer.ok) expect(comparable(answer), `${readers[i]!.name}: ${text}`).toEqual(expected);
        }
      }),
    { numRuns: 400, timeoutMs: 180_000 },
  );

  it('the generator makes bodies that Go would have read differently, and the gateway refused them', () => {
    expect(tally.accepted).toBeGreaterThan(20);
    if (go) expect(tally.goDisagreedOnRefused).toBeGreaterThan(5);
  });
});

/** What JSON.parse (last wins, case-sensitive) makes of a body the gateway refused: the reading it would have judged before. */
function gatewayReadingLoose(text: string) {
  try {
    const value = JSON.parse(text) as unknown;
    const messages = (Array.isArray(value) ? value : [value]) as ParsedRequest['messages'];
    return gatewayReading({ batch: Array.isArray(value), messages });
  } catch {
    return undefined;
  }
}
