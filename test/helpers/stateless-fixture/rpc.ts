// What every part of the stateless fixture server shares: the JSON shape, the
// error it answers with (HTTP status and JSON-RPC error together), and the
// completed-result envelope of the 2026-07-28 wire.
export type Json = Record<string, unknown>;

/** A refusal: the HTTP status and the JSON-RPC error the server answers with. */
export class RpcError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** JSON-RPC -32020: the routing or parameter headers do not match the body, or a required one is missing. */
export const headerMismatch = (message: string) => new RpcError(400, -32020, message);
export const invalidParams = (message: string) => new RpcError(400, -32602, `Invalid params: ${message}`);

/** A `complete` result; `cacheable` adds the SEP-2549 hints (ttlMs, cacheScope) of list and read answers. */
export const complete = (result: Json, cacheable = false): Json => ({ ...result, resultType: 'complete', ...(cacheable ? { ttlMs: 0, cacheScope: 'public' } : {}) });

export const text = (value: string): Json => complete({ content: [{ type: 'text', text: value }] });
