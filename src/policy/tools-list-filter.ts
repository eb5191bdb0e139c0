// `filter_tools_list`: removes from `tools/list` results the tools the caller
// may not call (by the same rules that judge `tools/call`). A JSON answer is
// one bounded body, rewritten whole; in an event stream only the event that
// answers the `tools/list` request is rewritten, every other event passes as
// soon as it is complete, and once every awaited answer has gone by the rest
// of the stream passes untouched. An answer that cannot be read is cut, never
// passed unfiltered.
import type { BodyTransform, ResponseTransform } from '../proxy/forward.js';
import { idKey, idOf, type JsonRpcMessage } from './json-rpc.js';
import { SseEventSplitter, formatSseEvent, parseSseEvent } from './sse-events.js';

/** Which responses carry the tool lists to filter. */
export type ToolsListAnswers =
  /** The ids (idKey) of the `tools/list` requests in the POST body. */
  | { ids: ReadonlySet<string> }
  /** Any response with a tool list: a GET stream (a resumed POST stream may deliver answers there). */
  | { any: true };

export interface ToolsListFilterOptions {
  answers: ToolsListAnswers;
  /** May the caller call the tool with this name? */
  mayCall(toolName: string): boolean;
  /** Upper bound of a JSON body or one event held in memory. */
  maxBytes: number;
}

const EMPTY = Buffer.alloc(0);

export function toolsListFilter(options: ToolsListFilterOptions): ResponseTransform {
  return (headers) => {
    const encoding = single(headers['content-encoding']);
    const type = (single(headers['content-type']) ?? '').trimStart().toLowerCase();
    const isSse = type.startsWith('text/event-stream');
    const isJson = type.startsWith('application/json');
    if (!isSse && !isJson) return undefined;
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return refuse(`a ${encoding}-encoded body cannot be filtered`);
    return isSse ? new SseFilter(options) : new JsonFilter(options);
  };
}

const single = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);

function refuse(why: string): BodyTransform {
  const fail = (): Buffer => {
    throw new Error(why);
  };
  return { push: fail, end: fail };
}

/** Rewrites the matching responses in a parsed JSON-RPC payload; returns the ids it answered. */
function filterPayload(payload: unknown, options: ToolsListFilterOptions): { changed: boolean; answered: string[] } {
  const messages = Array.isArray(payload) ? payload : [payload];
  let changed = false;
  const answered: string[] = [];
  for (const message of messages) {
    if (typeof message !== 'object' || message === null || 'method' in message) continue;
    const id = idOf(message as JsonRpcMessage);
    if (id === undefined) continue;
    const key = idKey(id);
    if ('ids' in options.answers) {
      if (!options.answers.ids.has(key)) continue;
      answered.push(key);
    }
    const result = (message as { result?: unknown }).result;
    if (typeof result !== 'object' || result === null) continue;
    const tools = (result as { tools?: unknown }).tools;
    if (!Array.isArray(tools)) continue;
    // A tool without a string name cannot be judged: it is not shown.
    const kept = tools.filter((tool: unknown) => {
      const name = typeof tool === 'object' && tool !== null ? (tool as { name?: unknown }).name : undefined;
      return typeof name === 'string' && options.mayCall(name);
    });
    if (kept.length !== tools.length) {
      (result as { tools: unknown[] }).tools = kept;
      changed = true;
    }
  }
  return { changed, answered };
}

/** application/json: one JSON-RPC response (or batch of them), held whole, bounded. */
class JsonFilter implements BodyTransform {
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly options: ToolsListFilterOptions) {}

  push(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > this.options.maxBytes) throw new Error(`a JSON answer exceeds ${this.options.maxBytes} bytes`);
    this.chunks.push(chunk);
    return EMPTY;
  }

  end(): Buffer {
    const body = Buffer.concat(this.chunks, this.size);
    if (body.length === 0) return body;
    let payload: unknown;
    try {
      payload = JSON.parse(body.toString('utf8'));
    } catch {
      throw new Error('the JSON answer does not parse');
    }
    const { changed } = filterPayload(payload, this.options);
    return changed ? Buffer.from(JSON.stringify(payload), 'utf8') : body;
  }
}

/** text/event-stream: whole events in, the awaited answers rewritten, the rest passed on. */
class SseFilter implements BodyTransform {
  private readonly splitter: SseEventSplitter;
  private readonly awaiting: Set<string> | undefined;
  /** Every awaited answer has gone by: bytes pass untouched from now on. */
  private done = false;

  constructor(private readonly options: ToolsListFilterOptions) {
    this.splitter = new SseEventSplitter(options.maxBytes);
    this.awaiting = 'ids' in options.answers ? new Set(options.answers.ids) : undefined;
  }

  push(chunk: Buffer): Buffer {
    if (this.done) return chunk;
    const out: Buffer[] = [];
    for (const raw of this.splitter.push(chunk)) {
      out.push(this.done ? raw : this.rewrite(raw));
      if (this.awaiting?.size === 0) this.done = true;
    }
    if (this.done) out.push(this.splitter.rest());
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  end(): Buffer {
    // An event cut short is passed as it came: no client dispatches it.
    return this.splitter.rest();
  }

  private rewrite(raw: Buffer): Buffer {
    const event = parseSseEvent(raw);
    if ((event.type !== '' && event.type !== 'message') || event.data === undefined) return raw;
    let payload: unknown;
    try {
      payload = JSON.parse(event.data);
    } catch {
      return raw;
    }
    const { changed, answered } = filterPayload(payload, this.options);
    for (const key of answered) this.awaiting?.delete(key);
    if (!changed) return raw;
    event.data = JSON.stringify(payload);
    return formatSseEvent(event);
  }
}
