// On routes that do not filter `tools/list`, the answers to it are still read
// (not changed) so the route learns its tools' `Mcp-Param-*` headers
// (tool-param-registry.ts), from the answer to the request it forwarded only
// (tools-list-answers.ts). Every byte passes on at once, as it came; an
// answer this reader cannot read, or one over the bound, only teaches
// nothing. Filtering routes learn in the filter (tools-list-filter.ts).
import { isSuccess, type BodyTransform, type ResponseTransform } from '../proxy/response-transform.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';
import { EventTooLargeError, SseEventSplitter, parseSseEvent } from './sse-events.js';
import { JsonReadingError, parseStrictJson } from './strict-json.js';
import type { ToolsListAnswers } from './tools-list-answers.js';

/** Called with the `tools` of every tool list an answer holds. */
export type LearnTools = (tools: readonly unknown[]) => void;

const EMPTY = Buffer.alloc(0);
/** As the filter's: as deep as a tool's input schema may reasonably go. */
const MAX_ANSWER_DEPTH = 256;
const MESSAGE_MEMBERS = readNames('id', 'method', 'result');
const RESULT_MEMBERS = readNames('tools');

/** `asked`: the tools/list requests of this exchange, whose answers alone teach. */
export function toolsListLearner(learn: LearnTools, maxBytes: number, asked: ToolsListAnswers): ResponseTransform {
  return (headers, status) => {
    if (!isSuccess(status)) return undefined;
    const encoding = headers['content-encoding'];
    if (encoding !== undefined && String(encoding).toLowerCase() !== 'identity') return undefined;
    const type = String(headers['content-type'] ?? '').toLowerCase();
    const taught = { learn, asked };
    if (type.includes('text/event-stream')) return new SseLearner(taught, maxBytes);
    return type.includes('json') ? new JsonLearner(taught, maxBytes) : undefined;
  };
}

interface Taught {
  learn: LearnTools;
  asked: ToolsListAnswers;
}

/** Hands `learn` the tool list of each answer to an asked tools/list in a JSON-RPC payload (one response or a batch); an ambiguous result teaches nothing. */
function learnFromPayload(payload: unknown, { learn, asked }: Taught): void {
  for (const message of Array.isArray(payload) ? payload : [payload]) {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) continue;
    try {
      checkMemberNames(message, MESSAGE_MEMBERS, 'a message');
      if (!asked.take(message)) continue;
      const { result } = message as { result?: unknown };
      if (typeof result !== 'object' || result === null) continue;
      checkMemberNames(result, RESULT_MEMBERS, 'a result');
      const { tools } = result as { tools?: unknown };
      if (Array.isArray(tools)) learn(tools);
    } catch (err) {
      if (!(err instanceof AmbiguousMemberError)) throw err;
    }
  }
}

/**
 * What the strict reader would make of `text`, JSON.stringify(value), without reading it: the value
 * itself, unless the text holds what the reader refuses. A JSON.stringify text has no duplicate
 * member and no raw lone surrogate; an escaped one (`\udc00`, a backslash itself escaped as `\\`)
 * or nesting past the bound is refused, as strictly read. So a value teaches exactly what its text would.
 */
function learnFromValue(value: unknown, text: string, taught: Taught): void {
  if (LONE_SURROGATE_ESCAPE.test(text) || deeperThan(value, MAX_ANSWER_DEPTH)) return;
  learnFromPayload(value, taught);
}

/** `\uD800`–`\uDFFF` written as an escape (after an even run of backslashes): JSON.stringify writes a lone surrogate so, and a pair raw. */
const LONE_SURROGATE_ESCAPE = /(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F]/;

/** Whether arrays and objects nest deeper than `max` (the root is depth 1). */
function deeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max === 0) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (deeperThan(value[i], max - 1)) return true;
    return false;
  }
  for (const key in value) if (Object.hasOwn(value, key) && deeperThan((value as Record<string, unknown>)[key], max - 1)) return true;
  return false;
}

function learnFromText(text: string, taught: Taught): void {
  let payload: unknown;
  try {
    payload = parseStrictJson(text, { maxDepth: MAX_ANSWER_DEPTH });
  } catch (err) {
    if (err instanceof JsonReadingError) return;
    throw err;
  }
  learnFromPayload(payload, taught);
}

/** application/json: a copy of the body, up to the bound, read once it is complete. */
class JsonLearner implements BodyTransform {
  private chunks: Buffer[] | undefined = [];
  private size = 0;

  constructor(
    private readonly taught: Taught,
    private readonly maxBytes: number,
  ) {}

  /** An answer the gateway made (an aggregated route's merged list): the value, as its text would teach, up to the same bound. */
  readonly readValue = (value: unknown, text: string): void => {
    if (Buffer.byteLength(text) <= this.maxBytes) learnFromValue(value, text, this.taught);
  };

  push(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > this.maxBytes) this.chunks = undefined;
    this.chunks?.push(chunk);
    return chunk;
  }

  end(): Buffer {
    if (this.chunks && this.size > 0) learnFromText(Buffer.concat(this.chunks, this.size).toString('utf8'), this.taught);
    return EMPTY;
  }
}

/** text/event-stream: each complete `message` event read as it goes by. */
class SseLearner implements BodyTransform {
  private splitter: SseEventSplitter | undefined;
  private first = true;

  constructor(
    private readonly taught: Taught,
    maxBytes: number,
  ) {
    this.splitter = new SseEventSplitter(maxBytes);
  }

  push(chunk: Buffer): Buffer {
    let events: Buffer[] = [];
    try {
      events = this.splitter?.push(chunk) ?? [];
    } catch (err) {
      if (!(err instanceof EventTooLargeError)) throw err;
      // Events can no longer be told apart: the rest of this stream teaches nothing.
      this.splitter = undefined;
    }
    for (const raw of events) this.read(raw);
    return chunk;
  }

  end(): Buffer {
    return EMPTY;
  }

  private read(raw: Buffer): void {
    const bom = this.first && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf;
    this.first = false;
    const event = parseSseEvent(bom ? raw.subarray(3) : raw);
    if ((event.type === '' || event.type === 'message') && event.data !== undefined) learnFromText(event.data, this.taught);
  }
}
