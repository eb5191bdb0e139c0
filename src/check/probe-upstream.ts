// `check --online` for an upstream: an MCP `initialize` POST to exactly the
// configured URL, as the gateway would forward one, so a wrong host, port or
// path (the server's 404 page) shows before the first client does.
import type { RouteConfig } from '../config/types.js';
import { redactUrl } from '../config/urls.js';
import { error, ok, warn, type Finding } from './findings.js';
import { describeStatus, probe, type ProbeAnswer } from './http-probe.js';
import { probeStdio } from './probe-stdio.js';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'mcp-auth-gateway check --online', version: '1' } },
});

export async function probeUpstream(route: RouteConfig): Promise<Finding> {
  // Started once for the handshake, as a session's process would be.
  if (route.stdio) return probeStdio(route);
  const where = redactUrl(route.upstream);
  // An initialize POST means nothing to a legacy SSE URL (GET only): said plainly rather than judged wrongly.
  if (route.sse) return warn('upstream', `${where}: a legacy HTTP+SSE upstream; check --online does not probe its event stream`);
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  // A static credential is sent as the gateway sends it; the other kinds need a token endpoint or a user, so none is sent.
  const auth = route.upstreamAuth;
  if (auth.kind === 'static') headers[auth.header] = auth.value;
  let answer: ProbeAnswer;
  try {
    answer = await probe(route.upstream, { method: 'POST', headers, body: INITIALIZE });
  } catch (err) {
    return error('upstream', `${where}: ${(err as Error).message}`);
  }
  await closeSession(route.upstream, headers, answer);
  return judge(where, answer, auth.kind);
}

function judge(where: string, answer: ProbeAnswer, authKind: RouteConfig['upstreamAuth']['kind']): Finding {
  const { status } = answer;
  const said = `${where} answered initialize with ${describeStatus(answer)}`;
  if (status >= 200 && status < 300) return ok('upstream', `${said}${serverName(answer)}`);
  if (status === 404) return error('upstream', `${said}: is the path right? The gateway forwards to exactly this URL (an MCP endpoint usually ends in /mcp)`);
  if (status === 405) return error('upstream', `${said}: POST is refused, so this is not a Streamable HTTP MCP endpoint`);
  if (status === 401 || status === 403) {
    if (authKind === 'none' || authKind === 'static') return error('upstream', `${said}: it refuses the credential the gateway would send (upstream_auth ${authKind})`);
    return warn('upstream', `${said}: reachable; check sends no ${authKind} credential, the gateway will`);
  }
  if (status >= 300 && status < 400) return error('upstream', `${said}: the gateway does not follow redirects`);
  if (status >= 500) return error('upstream', said);
  return warn('upstream', `${said}: reachable, but it refused an MCP initialize`);
}

/** ` (server-everything 2025-06-18)` from a JSON answer; an event stream is not read. */
function serverName(answer: ProbeAnswer): string {
  const result = (answer.json as { result?: { serverInfo?: { name?: unknown }; protocolVersion?: unknown } } | undefined)?.result;
  const name = typeof result?.serverInfo?.name === 'string' ? printable(result.serverInfo.name.slice(0, 80)) : undefined;
  if (name === undefined) return '';
  return typeof result?.protocolVersion === 'string' ? ` (${name}, protocol ${printable(result.protocolVersion.slice(0, 20))})` : ` (${name})`;
}

/** The probe opened a session: end it, as a client would (MCP Streamable HTTP, session management). */
async function closeSession(url: string, headers: Record<string, string>, answer: ProbeAnswer): Promise<void> {
  const session = answer.headers.get('mcp-session-id');
  if (session === null) return;
  await probe(url, { method: 'DELETE', headers: { ...headers, 'mcp-session-id': session } }, false).catch(() => undefined);
}

/** The upstream wrote it: no control characters reach the operator's terminal. */
const printable = (text: string) => text.replace(/[^\x20-\x7E]/g, '?');
