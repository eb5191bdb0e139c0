// Reads the JSON-RPC message(s) of a POST body for the policy: what each
// message asks for (method, and the tool, resource or prompt it names). The
// body itself is forwarded byte for byte; this only looks at it.
import { GatewayError } from '../errors/gateway-error.js';
import { AmbiguousMemberError, checkMemberNames, foldName, readNames } from './member-names.js';
import { nonCanonicalReason } from './resource-uri.js';
import { JsonReadingError, parseStrictJson } from './strict-json.js';

export type JsonRpcId = string | number | null;

/** One JSON-RPC message as parsed: only the members the policy reads are typed. */
export interface JsonRpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
  [member: string]: unknown;
}

/** What one client message asks the server to do. */
export interface Operation {
  method: string;
  /** `tools/call` params.name, `resources/read` params.uri, `prompts/get` params.name. */
  name?: string;
  /** `tools/call` and `prompts/get` params.arguments, when an object: what a rule's `when` reads. */
  arguments?: Readonly<Record<string, unknown>>;
  /** On an aggregated route, the upstream the operation is sent to, when it goes to one (routed-upstream.ts). */
  upstream?: string;
}

export interface ParsedRequest {
  /** A JSON array body (2025-03-26 batch). */
  batch: boolean;
  messages: JsonRpcMessage[];
}

/** The member of `params` that names what a method acts on. */
export const NAME_MEMBER: Readonly<Record<string, 'name' | 'uri'>> = {
  'tools/call': 'name',
  'resources/read': 'uri',
  'prompts/get': 'name',
};

/** The kind of name a method carries, as rules spell it (`tool`, `uri`, `prompt`). */
export const NAME_KIND: Readonly<Record<string, 'tool' | 'uri' | 'prompt'>> = {
  'tools/call': 'tool',
  'resources/read': 'uri',
  'prompts/get': 'prompt',
};

/** Most resource URIs one `subscriptions/listen` may name: each is judged as a read, like a batch's messages. */
export const MAX_SUBSCRIBED_URIS = 100;

/** A batch longer than this is refused before any rule is evaluated (MCP clients send a handful). */
export const MAX_BATCH_MESSAGES = 100;

/**
 * Longest method, tool name, prompt name or resource URI the policy reads, in
 * UTF-16 code units. Tool names are short (the MCP spec suggests at most 128
 * characters) and URLs beyond a few KiB are refused by most HTTP servers; each
 * rule's glob runs over the name, so an unbounded one is unbounded work.
 */
export const MAX_NAME_LENGTH = 4096;

/** Deepest nesting read: far beyond what MCP messages use, far below the stack of any reader. */
const MAX_JSON_DEPTH = 128;

// Invalid UTF-8 is refused rather than decoded to U+FFFD: the upstream might
// decode the same bytes to another name than the one the policy judged. A BOM
// is refused too (ignoreBOM keeps it for the parser to see): Python skips it,
// Go and JSON.parse do not.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Members the gateway reads in a message, and in its params (`_meta` and `arguments` for the upstream's sake). */
const MESSAGE_MEMBERS = readNames('jsonrpc', 'id', 'method', 'params', 'result', 'error');
const PARAMS_MEMBERS = readNames('name', 'uri', '_meta', 'arguments', 'notifications');
/** Members read in `subscriptions/listen` params.notifications. */
const NOTIFICATIONS_MEMBERS = readNames('resourceSubscriptions');

/** Controls (a C upstream stops at NUL) and anything outside visible ASCII have no place in a method. */
const METHOD_CHARACTERS = /^[\x21-\x7e]+$/;
/**
 * What no name may hold: C0, DEL and C1 controls (a C upstream stops at NUL, CR
 * and LF end a header line, C1 NEL ends a line to some readers), format
 * characters (bidi overrides and isolates, zero-width joiners, BOM, soft
 * hyphen), other default-ignorables (variation selectors, tags), line and
 * paragraph separators, surrogates and noncharacters: each is a name that
 * reads as another (or as nothing) to a reader that strips, splits or shows it.
 */
const UNFIT_IN_NAME = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}\p{Cs}\p{Noncharacter_Code_Point}]/u;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
/** White space around a tool or prompt name: an upstream that trims would call another tool than the one judged. */
const OUTER_SPACE = /^\s|\s$/;

/** The MCP methods by folded spelling: another spelling of one of them is refused, not passed as "some other method". */
const KNOWN_METHODS = readNames(
  'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read',
  'resources/subscribe', 'resources/unsubscribe', 'subscriptions/listen', 'server/discover', 'prompts/list', 'prompts/get', 'completion/complete', 'logging/setLevel',
  'sampling/createMessage', 'elicitation/create', 'roots/list', 'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel',
  'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/message',
  'notifications/resources/updated', 'notifications/resources/list_changed', 'notifications/tools/list_changed',
  'notifications/prompts/list_changed', 'notifications/roots/list_changed', 'notifications/elicitation/complete',
  'notifications/tasks/status',
);

const notJsonRpc = (why: string) => new GatewayError(400, 'invalid_request', `The body is not JSON-RPC: ${why}`);
const ambiguous = (why: string) => new GatewayError(400, 'invalid_request', `The body could be read in more than one way: ${why}`);
const overLimit = (why: string) => new GatewayError(400, 'invalid_request', `The body is over a limit of the gateway: ${why}`);

/**
 * Parses a POST body; a body that is not one JSON-RPC message or a non-empty
 * array of them, that other JSON readers could read differently, or that is
 * over a bound (batch length, name length, nesting) is a 400.
 */
export function parseJsonRpcBody(body: Buffer): ParsedRequest {
  if (body.length === 0) throw notJsonRpc('the body is empty');
  let value: unknown;
  try {
    value = parseStrictJson(utf8.decode(body), { maxDepth: MAX_JSON_DEPTH, maxRootItems: MAX_BATCH_MESSAGES });
  } catch (err) {
    if (!(err instanceof JsonReadingError)) throw notJsonRpc('not JSON (UTF-8)');
    if (err.fault === 'ambiguous') throw ambiguous(err.message);
    if (err.fault === 'limit') throw overLimit(err.message === `more than ${MAX_BATCH_MESSAGES} items` ? `a batch of more than ${MAX_BATCH_MESSAGES} messages` : err.message);
    throw notJsonRpc(`not JSON (${err.message})`);
  }
  const batch = Array.isArray(value);
  const messages: unknown[] = batch ? (value as unknown[]) : [value];
  if (messages.length === 0) throw notJsonRpc('an empty batch');
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (typeof message !== 'object' || message === null || Array.isArray(message)) throw notJsonRpc('a message is not an object');
    checkMessageMembers(message as JsonRpcMessage);
    operationOf(message as JsonRpcMessage);
    subscribedUris(message as JsonRpcMessage);
  }
  if (batch) checkBatchIds(messages as JsonRpcMessage[]);
  return { batch, messages: messages as JsonRpcMessage[] };
}

function checkMessageMembers(message: JsonRpcMessage): void {
  try {
    checkMemberNames(message, MESSAGE_MEMBERS, 'a message');
    const { params } = message;
    if (typeof params === 'object' && params !== null && !Array.isArray(params)) checkMemberNames(params, PARAMS_MEMBERS, 'params');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) throw ambiguous(err.message);
    throw err;
  }
  if ('id' in message && idOf(message) === undefined) throw notJsonRpc('id is not a string, a number or null');
  const { id } = message;
  // 2^53 + 1 is 2^53 here and not in Python; -0 is 0 here and -0.0 elsewhere.
  if (typeof id === 'number' && (Object.is(id, -0) || (Number.isInteger(id) && !Number.isSafeInteger(id)))) {
    throw ambiguous('a numeric id that readers round or sign differently');
  }
}

/**
 * A batch may not repeat an id (by type and value, as idKey compares them):
 * the answers could not be told apart. Requests and the client's responses to
 * server requests are numbered apart, so each is checked on its own.
 */
function checkBatchIds(messages: readonly JsonRpcMessage[]): void {
  const requests = new Set<string>();
  const responses = new Set<string>();
  for (const message of messages) {
    const id = idOf(message);
    if (id === undefined) continue;
    const seen = 'method' in message ? requests : responses;
    const key = idKey(id);
    if (seen.has(key)) throw ambiguous('a batch repeats an id');
    seen.add(key);
  }
}

/** A method that is not an MCP method as spelled: bounded, visible ASCII, and no other spelling of an MCP method. */
function checkOtherMethod(method: string): void {
  if (method.length > MAX_NAME_LENGTH) throw overLimit(`method is longer than ${MAX_NAME_LENGTH} characters`);
  if (!METHOD_CHARACTERS.test(method)) throw notJsonRpc('method is empty or holds characters other than visible ASCII');
  const meant = KNOWN_METHODS.byFold.get(foldName(method));
  if (meant !== undefined) throw ambiguous(`a method that differs from "${meant}" only by case`);
}

/**
 * What a message asks for; undefined for a message without `method` (the
 * client's response to a server request). A request without `id` (a
 * notification) is still judged: some servers run a `tools/call` sent without
 * an id, so leaving it out would be a way around the rules.
 */
export function operationOf(message: JsonRpcMessage): Operation | undefined {
  if (!('method' in message)) return undefined;
  const { method } = message;
  if (typeof method !== 'string') throw notJsonRpc('method is not a string');
  if (!KNOWN_METHODS.exact.has(method)) checkOtherMethod(method);
  const member = NAME_MEMBER[method];
  if (member === undefined) return { method };
  const params = message.params;
  const name = typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[member] : undefined;
  if (typeof name !== 'string') throw notJsonRpc(`${method} without a string params.${member}`);
  if (member === 'uri') return withArguments(params, { method, name: checkedUri(name, 'params.uri') });
  checkName(name, `params.${member}`);
  const why = nameFault(name);
  if (why !== undefined) throw ambiguous(`params.${member} ${why}`);
  return withArguments(params, { method, name });
}

/** The operation with `params.arguments` when it is an object: what a rule's `when` reads. */
function withArguments(params: unknown, operation: Operation): Operation {
  const args = (params as { arguments?: unknown }).arguments;
  return typeof args === 'object' && args !== null && !Array.isArray(args) ? { ...operation, arguments: args as Record<string, unknown> } : operation;
}

const NO_URIS: readonly string[] = Object.freeze([]);

/**
 * The resource URIs a message subscribes to: `subscriptions/listen`
 * (2026-07-28) names them in params.notifications.resourceSubscriptions,
 * `resources/subscribe` (earlier revisions) one in params.uri. An update tells
 * its subscriber when, and often what, a resource changed, so the policy
 * judges each URI as a `resources/read` of it (evaluate.ts); each is held to
 * the rules of a read's URI here.
 */
export function subscribedUris(message: JsonRpcMessage): readonly string[] {
  const { method, params } = message;
  if (method !== 'subscriptions/listen' && method !== 'resources/subscribe') return NO_URIS;
  const members = typeof params === 'object' && params !== null && !Array.isArray(params) ? (params as Record<string, unknown>) : undefined;
  // Without a URI it watches nothing the policy could judge: the upstream refuses it (2026-07-28 removed the method).
  if (method === 'resources/subscribe') return typeof members?.uri === 'string' ? [checkedUri(members.uri, 'params.uri')] : NO_URIS;
  const notifications = members?.notifications;
  if (notifications === undefined) return NO_URIS;
  if (typeof notifications !== 'object' || notifications === null || Array.isArray(notifications)) throw notJsonRpc('params.notifications is not an object');
  try {
    checkMemberNames(notifications, NOTIFICATIONS_MEMBERS, 'params.notifications');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) throw ambiguous(err.message);
    throw err;
  }
  const uris = (notifications as Record<string, unknown>).resourceSubscriptions;
  if (uris === undefined) return NO_URIS;
  if (!Array.isArray(uris)) throw notJsonRpc('params.notifications.resourceSubscriptions is not an array');
  if (uris.length > MAX_SUBSCRIBED_URIS) throw overLimit(`more than ${MAX_SUBSCRIBED_URIS} resourceSubscriptions`);
  return uris.map((uri) => {
    if (typeof uri !== 'string') throw notJsonRpc('a resourceSubscriptions entry is not a string');
    return checkedUri(uri, 'a resourceSubscriptions entry');
  });
}

/** A tool or prompt name, or a URI, the policy reads: bounded, and no control character. */
function checkName(name: string, where: string): void {
  if (name.length > MAX_NAME_LENGTH) throw overLimit(`${where} is longer than ${MAX_NAME_LENGTH} characters`);
  // Most names are printable ASCII: none of those is unfit.
  if (!PRINTABLE_ASCII.test(name) && UNFIT_IN_NAME.test(name)) throw ambiguous(`${where} holds a control, format, invisible or non-character code point`);
}

/**
 * Why a tool or prompt name could read as another name (or as nothing) to
 * some reader, or undefined when it cannot. The tools/list filter hides the
 * tools whose names a call would be refused for.
 */
export function nameFault(name: string): string | undefined {
  if (!PRINTABLE_ASCII.test(name)) {
    if (UNFIT_IN_NAME.test(name)) return 'holds a control, format, invisible or non-character code point';
    // `é` and `e` + U+0301 are one name to a server that normalises and two to the rules.
    if (name !== name.normalize('NFC')) return 'is not in Unicode NFC';
  }
  return OUTER_SPACE.test(name) ? 'begins or ends with white space' : undefined;
}

/** A resource URI in its one canonical spelling (resource-uri.ts), else a 400. */
function checkedUri(uri: string, where: string): string {
  checkName(uri, where);
  const why = nonCanonicalReason(uri);
  if (why !== undefined) throw ambiguous(`${where} is not a resource URI in canonical form: ${why}`);
  return uri;
}

/** The `id` of a message, when it is a valid JSON-RPC id. */
export function idOf(message: JsonRpcMessage): JsonRpcId | undefined {
  const { id } = message;
  return typeof id === 'string' || typeof id === 'number' || id === null ? id : undefined;
}

/** A key that keeps `1` and `"1"` apart (JSON-RPC ids are compared by type and value). */
export function idKey(id: JsonRpcId): string {
  return typeof id === 'string' ? `s:${id}` : `${typeof id}:${String(id)}`;
}
