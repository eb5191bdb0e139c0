/**
 * A 2026-07-28 client's requests, for tests that send them by hand: the per-request metadata in
 * `_meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers mirroring the body, and
 * a reader of the event streams that come back.
 */
export const WIRE_2026 = '2026-07-28';

export interface Wire2026Options {
  /** Sent as `Authorization: Bearer …` when given. */
  token?: string;
  /** Headers set over the defaults; undefined removes one. */
  headers?: Record<string, string | undefined>;
  /** The revision named in the header and `_meta` (default 2026-07-28). */
  version?: string;
  /** `_meta` client capabilities (default: elicitation, sampling and roots). */
  capabilities?: Record<string, unknown>;
  signal?: AbortSignal;
  /** The request's JSON-RPC id (default 1). */
  id?: number | string;
  /** More `_meta` members (a progress token). */
  meta?: Record<string, unknown>;
}

/** POSTs one request (id 1 unless given) of `method` with `params`; the name or URI it acts on goes in `Mcp-Name`. */
export function post2026(url: string, method: string, params: Record<string, unknown> = {}, options: Wire2026Options = {}): Promise<Response> {
  const version = options.version ?? WIRE_2026;
  const name = params.name ?? params.uri;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': version,
    'mcp-method': method,
    ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
    ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
  };
  for (const [key, value] of Object.entries(options.headers ?? {})) {
    if (value === undefined) delete headers[key];
    else headers[key] = value;
  }
  const meta = {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? { elicitation: {}, sampling: {}, roots: {} },
    ...options.meta,
  };
  const body = JSON.stringify({ jsonrpc: '2.0', id: options.id ?? 1, method, params: { ...params, _meta: meta } });
  return fetch(url, { method: 'POST', headers, body, signal: options.signal });
}

/** Reads an event stream until `until` holds for the text so far (the stream stays open). */
export async function readEventsUntil(res: Response, until: (text: string) => boolean): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!until(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended before the condition held:\n${text}`);
    text += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  return text;
}
