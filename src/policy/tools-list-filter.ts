// `filter_tools_list`: removes from `tools/list` results the tools the caller
// may not call (by the same rules that judge `tools/call`). It never switches
// off: every answer on a filtering route is read, and every response in it
// that carries a tool list is filtered, whatever its id and whichever request
// it came with (a client's ids, repeated across requests or not, a bridge that
// routes answers by id, a sloppy server's answer to a notification decide
// nothing). A JSON answer is one bounded body,
// rewritten whole; in an event stream every event passes as soon as it is
// complete, rewritten when it holds a tool list. An answer that cannot be read,
// or that another reader could read differently (a duplicate member, `Tools`
// beside `tools`), is cut, never passed unfiltered.
// What a filtering route answers depends on who asks, so every tool list it
// passes is marked `cacheScope: "private"` (MCP 2026-07-28, SEP-2549: shared
// intermediaries must not cache it) and the HTTP answer `Cache-Control: private`.
// The answer to the tools/list request this exchange forwarded, whole, also
// teaches the route its tools' Mcp-Param headers (tools-list-answers.ts).
import { isSuccess, type BodyTransform, type ResponseTransform } from '../proxy/response-transform.js';
import { MAX_NAME_LENGTH, nameFault } from './json-rpc.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';
import { SseEventTransform } from './sse-event-transform.js';
import { formatSseEvent, type SseEvent } from './sse-events.js';
import { parseStrictJson } from './strict-json.js';
import type { ToolsListAnswers } from './tools-list-answers.js';
import type { LearnTools } from './tools-list-learner.js';

export interface ToolsListFilterOptions {
  /** May the caller call the tool with this name? */
  mayCall(toolName: string): boolean;
  /** Upper bound of a JSON body or one event held in memory. */
  maxBytes: number;
  /** Told the tool list answering one of `asked` as the upstream sent it, before filtering. */
  learn?: LearnTools;
  /** The tools/list requests of this exchange (none on a GET stream): only their answers teach. */
  asked?: ToolsListAnswers;
}

const EMPTY = Buffer.alloc(0);
/** Nesting bound for answers: as deep as a tool's input schema may reasonably go. */
const MAX_ANSWER_DEPTH = 256;
/**
 * An answer (or event data) with none of these cannot hold a member that any
 * reader takes for `tools`: escapes (`\u0074ools`) and non-ASCII (`toolſ`,
 * fullwidth) can. Everything else passes without being parsed.
 */
// eslint-disable-next-line no-control-regex -- the class is everything outside ASCII
const MIGHT_LIST_TOOLS = /tools|\\u|[^\x00-\x7f]/i;

const RESPONSE_MEMBERS = readNames('jsonrpc', 'id', 'method', 'result', 'error', 'params');
const RESULT_MEMBERS = readNames('tools', 'cacheScope');
/** SEP-2549's value for a result that only its caller may be served from a cache. */
const PRIVATE = 'private';
const TOOL_MEMBERS = readNames('name');

export function toolsListFilter(options: ToolsListFilterOptions): ResponseTransform {
  return (headers, status) => {
    if (!isSuccess(status)) return undefined;
    const encoding = joinedHeader(headers['content-encoding']);
    const type = (joinedHeader(headers['content-type']) ?? '').trimStart().toLowerCase();
    // As clients look (the MCP SDKs test `includes`, event stream first): a
    // `text/plain, application/json` answer is JSON to them, so to the filter.
    const isSse = type.includes('text/event-stream');
    const isJson = !isSse && type.includes('json');
    if (!isSse && !isJson) return undefined;
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return refuse(`a ${encoding}-encoded body cannot be filtered`);
    return isSse ? new SseFilter(options) : new JsonFilter(options);
  };
}

/** A header's value as one string, repeated ones joined as Node joins them. */
const joinedHeader = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);

function refuse(why: string): BodyTransform {
  const fail = (): Buffer => {
    throw new Error(why);
  };
  return { push: fail, end: fail };
}

/** Reads an answer as strictly as a request; anything ambiguous throws (the answer is cut). */
function readAnswer(text: string): unknown {
  try {
    return parseStrictJson(text, { maxDepth: MAX_ANSWER_DEPTH });
  } catch (err) {
    throw new Error(`the answer cannot be read one way only: ${(err as Error).message}`);
  }
}

/**
 * Removes the tools the caller may not call from every tool list in a
 * JSON-RPC payload and marks each such result private; true when it changed.
 */
function filterPayload(payload: unknown, options: ToolsListFilterOptions): boolean {
  const messages = Array.isArray(payload) ? payload : [payload];
  let changed = false;
  for (const message of messages) {
    if (typeof message !== 'object' || message === null) continue;
    const result = checked(message, RESPONSE_MEMBERS, 'a message').result;
    if (typeof result !== 'object' || result === null) continue;
    const tools = checked(result, RESULT_MEMBERS, 'a result').tools;
    if (!Array.isArray(tools)) continue;
    if (options.learn && options.asked?.take(message)) options.learn(tools);
    // A tool without a string name cannot be judged, and one whose name a call would be refused
    // for (`shell` + U+200B beside a rule on `shell`) cannot be called: neither is shown.
    const kept = tools.filter((tool: unknown) => {
      const name = typeof tool === 'object' && tool !== null ? checked(tool, TOOL_MEMBERS, 'a tool').name : undefined;
      return typeof name === 'string' && name.length <= MAX_NAME_LENGTH && nameFault(name) === undefined && options.mayCall(name);
    });
    if (kept.length !== tools.length) {
      (result as { tools: unknown[] }).tools = kept;
      changed = true;
    }
    // Private even when nothing was removed: another caller's list may be shorter.
    if ((result as { cacheScope?: unknown }).cacheScope !== PRIVATE) {
      (result as { cacheScope: string }).cacheScope = PRIVATE;
      changed = true;
    }
  }
  return changed;
}

function checked(object: object, names: Parameters<typeof checkMemberNames>[1], where: string): Record<string, unknown> {
  try {
    checkMemberNames(object, names, where);
  } catch (err) {
    if (err instanceof AmbiguousMemberError) throw new Error(`the answer cannot be read one way only: ${err.message}`);
    throw err;
  }
  return object as Record<string, unknown>;
}

/** application/json: one JSON-RPC response (or batch of them), held whole, bounded. */
class JsonFilter implements BodyTransform {
  readonly perCaller = true;
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
    const text = body.toString('utf8');
    if (!MIGHT_LIST_TOOLS.test(text)) return body;
    const payload = readAnswer(text);
    return filterPayload(payload, this.options) ? Buffer.from(JSON.stringify(payload), 'utf8') : body;
  }
}

/** text/event-stream: whole events in, those holding a tool list rewritten, every other one passed on as is. */
class SseFilter extends SseEventTransform {
  constructor(private readonly options: ToolsListFilterOptions) {
    super(options.maxBytes);
  }

  protected rewriteEvent(event: SseEvent, raw: Buffer): Buffer {
    // Clients dispatch only `message` events (no `event:` field, or that one) to JSON-RPC.
    if ((event.type !== '' && event.type !== 'message') || event.data === undefined) return raw;
    if (!MIGHT_LIST_TOOLS.test(event.data)) return raw;
    const payload = readAnswer(event.data);
    if (!filterPayload(payload, this.options)) return raw;
    event.data = JSON.stringify(payload);
    return formatSseEvent(event);
  }
}
