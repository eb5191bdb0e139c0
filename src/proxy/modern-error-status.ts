// 2026-07-28's Streamable HTTP binds some JSON-RPC errors to an HTTP status: a
// method the server does not implement is 404 with -32601, an unsupported
// protocol version 400 with -32022, a header mismatch 400 with -32020. A modern
// HTTP server answers so itself; for a 2026-07-28 client of a stdio or legacy
// SSE upstream, which answers in JSON-RPC only, the gateway applies the binding.
import type { IncomingHttpHeaders } from 'node:http';

const FIRST_MODERN_REVISION = '2026-07-28';
const REVISION = /^\d{4}-\d{2}-\d{2}$/;

const STATUS_OF_CODE: ReadonlyMap<number, number> = new Map([
  [-32601, 404],
  [-32022, 400],
  [-32020, 400],
]);

/** The HTTP status of a single answer to a 2026-07-28 request, when the binding names one. */
export function modernErrorStatus(message: Record<string, unknown>): number | undefined {
  const error = message.error;
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' ? STATUS_OF_CODE.get(code) : undefined;
}

/** Whether a request speaks 2026-07-28 or later (its `MCP-Protocol-Version`): older clients read a 404 as a lost session. */
export function isModernRequest(headers: Readonly<IncomingHttpHeaders>): boolean {
  const revision = headers['mcp-protocol-version'];
  return typeof revision === 'string' && REVISION.test(revision) && revision >= FIRST_MODERN_REVISION;
}
