// Reads the JSON-RPC message(s) of a POST body for the policy: what each
// message asks for (method, and the tool, resource or prompt it names). The
// body itself is forwarded byte for byte; this only looks at it.
import { GatewayError } from '../errors/gateway-error.js';

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

// Invalid UTF-8 is refused rather than decoded to U+FFFD: the upstream might
// decode the same bytes to another name than the one the policy judged.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

const notJsonRpc = (why: string) => new GatewayError(400, 'invalid_request', `The body is not JSON-RPC: ${why}`);

/** Parses a POST body; a body that is not one JSON-RPC message or a non-empty array of them is a 400. */
export function parseJsonRpcBody(body: Buffer): ParsedRequest {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(body));
  } catch {
    throw notJsonRpc(body.length === 0 ? 'the body is empty' : 'not JSON (UTF-8)');
  }
  const batch = Array.isArray(value);
  const messages: unknown[] = batch ? (value as unknown[]) : [value];
  if (messages.length === 0) throw notJsonRpc('an empty batch');
  for (const message of messages) {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) throw notJsonRpc('a message is not an object');
    operationOf(message as JsonRpcMessage);
  }
  return { batch, messages: messages as JsonRpcMessage[] };
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
  const member = NAME_MEMBER[method];
  if (member === undefined) return { method };
  const params = message.params;
  const name = typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[member] : undefined;
  if (typeof name !== 'string') throw notJsonRpc(`${method} without a string params.${member}`);
  return { method, name };
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
