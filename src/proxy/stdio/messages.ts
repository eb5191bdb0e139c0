// The JSON-RPC shapes the stdio bridge tells apart. The policy step has already
// read every client body strictly (one reading); here messages are only sorted.

export type JsonRpcId = string | number;
export type Message = Record<string, unknown>;

export const isObject = (value: unknown): value is Message => typeof value === 'object' && value !== null && !Array.isArray(value);

const isId = (value: unknown): value is JsonRpcId => typeof value === 'string' || typeof value === 'number';

/** A request: a method and an id. */
export const isRequest = (m: Message): boolean => typeof m.method === 'string' && isId(m.id);

/** A response: an id and a result or an error, no method. */
export const isResponse = (m: Message): boolean => m.method === undefined && isId(m.id) && ('result' in m || 'error' in m);

/** A JSON-RPC error response for `id`. */
export const errorResponse = (id: JsonRpcId | null, code: number, message: string): Message => ({ jsonrpc: '2.0', id, error: { code, message } });

/** JSON-RPC's "internal error" range, used for what the gateway says about the process. */
export const UPSTREAM_GONE = -32603;

/** The progress token a request asked for (`params._meta.progressToken`), if any. */
export function progressToken(m: Message): JsonRpcId | undefined {
  const params = m.params;
  if (!isObject(params) || !isObject(params._meta)) return undefined;
  const token = params._meta.progressToken;
  return isId(token) ? token : undefined;
}

/** `message` as JSON text; undefined when it cannot be (nested deeper than JSON.stringify's stack: a child's JSON.parse reads more than it writes back). */
export function serialised(message: unknown): string | undefined {
  try {
    return JSON.stringify(message);
  } catch {
    return undefined;
  }
}
