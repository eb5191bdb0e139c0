// Which requests must carry the 2026-07-28 request headers (basic/transports/
// streamable-http, "Standard Request Headers" and "Custom Headers"): those whose
// `MCP-Protocol-Version` names that revision or a later one. Clients of older
// revisions know nothing of them, so for those only the headers present are
// held to the body.
import type { IncomingHttpHeaders } from 'node:http';

const FIRST_REVISION_WITH_REQUEST_HEADERS = '2026-07-28';
const REVISION = /^\d{4}-\d{2}-\d{2}$/;

export function requiresRequestHeaders(headers: Readonly<IncomingHttpHeaders>): boolean {
  const revision = headers['mcp-protocol-version'];
  return typeof revision === 'string' && REVISION.test(revision) && revision >= FIRST_REVISION_WITH_REQUEST_HEADERS;
}
