// 2026-07-28 routing headers: `Mcp-Method` and `Mcp-Name` mirror the body so
// intermediaries can route without parsing it. The policy judges the body;
// a header that contradicts it is refused (400, JSON-RPC -32020), so nothing
// in front of or behind the gateway can act on a different operation than
// the one that was authorised.
import { GatewayError } from '../errors/gateway-error.js';
import { idOf, NAME_MEMBER, operationOf, type ParsedRequest } from './json-rpc.js';

/** JSON-RPC error code of a header that does not match the body (MCP 2026-07-28). */
export const HEADER_MISMATCH = -32020;

/** A 400 like any other refusal, but its body is the JSON-RPC error MCP clients read. */
export class HeaderMismatchError extends GatewayError {
  override readonly name = 'HeaderMismatchError';

  constructor(
    message: string,
    /** The request's JSON-RPC id, or null. */
    readonly id: string | number | null,
  ) {
    super(400, 'invalid_request', message);
  }

  override body(): string {
    return JSON.stringify({ jsonrpc: '2.0', id: this.id, error: { code: HEADER_MISMATCH, message: this.message } });
  }
}

// Values that are not plain visible ASCII travel as `=?base64?<base64 of UTF-8>?=`.
const BASE64_VALUE = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;

/** The header's value as the client meant it; undefined when it cannot be decoded. */
export function decodeHeaderValue(raw: string): string | undefined {
  if (!raw.startsWith('=?base64?')) return raw;
  const encoded = BASE64_VALUE.exec(raw)?.[1];
  if (encoded === undefined || encoded.length % 4 !== 0) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(encoded, 'base64'));
  } catch {
    return undefined;
  }
}

/**
 * Throws HeaderMismatchError when `Mcp-Method` or `Mcp-Name` is present and
 * differs from the body. Absent headers are fine (older revisions send none).
 */
export function checkMcpHeaders(headers: Readonly<Record<string, string | string[] | undefined>>, request: ParsedRequest): void {
  const methodHeader = headers['mcp-method'];
  const nameHeader = headers['mcp-name'];
  if (methodHeader === undefined && nameHeader === undefined) return;

  const first = request.messages[0]!;
  const id = request.batch ? null : (idOf(first) ?? null);
  const fail = (message: string) => {
    throw new HeaderMismatchError(message, id);
  };
  // The headers describe one message; a batch cannot match them.
  if (request.batch) fail('Mcp-Method and Mcp-Name describe a single message, not a batch');
  // Node joins repeated headers with ", ": never a valid single value here.
  if (Array.isArray(methodHeader) || Array.isArray(nameHeader)) fail('Mcp-Method and Mcp-Name may appear once');

  const operation = operationOf(first);
  if (methodHeader !== undefined && methodHeader !== operation?.method) {
    fail('Mcp-Method header does not match the method in the body');
  }
  // Mcp-Name is judged only where policy reads a name; other methods (the
  // tasks extension's taskId, say) are the upstream's to validate.
  if (nameHeader !== undefined && operation?.method !== undefined && NAME_MEMBER[operation.method] !== undefined) {
    const name = decodeHeaderValue(nameHeader as string);
    if (name === undefined) fail('Mcp-Name header is not a valid encoded value');
    if (operation?.name === undefined || name !== operation.name) fail('Mcp-Name header does not match the name in the body');
  }
}
