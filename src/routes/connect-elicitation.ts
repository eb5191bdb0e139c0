// The answer to a request whose principal has no working grant at a user_oauth
// route's upstream (DESIGN §8.1): a URL elicitation to the gateway's connect
// page, in the form the client's protocol revision reads. 2025-11-25: JSON-RPC
// error -32042 (URLElicitationRequiredError) with the URL; 2026-07-28: an
// InputRequiredResult whose input request is a URL elicitation (the
// multi-round-trip form: the client retries the request once connected);
// older revisions: a JSON-RPC error whose message names the URL. The link is
// the only thing it carries: nothing of any token.
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';
import { UpstreamAccountRequired } from '../upstream-auth/user-oauth.js';

/** MCP 2025-11-25: URLElicitationRequiredError. */
export const URL_ELICITATION_REQUIRED = -32042;
/** Revisions before URL elicitation: a server error whose message the user reads. */
const CONNECT_REQUIRED_LEGACY = -32001;

const MESSAGE = 'Connect your account at this MCP server to continue';

type JsonRpcId = string | number | null;

/** A 200 whose body is the JSON-RPC answer for the request's id. */
export class ConnectElicitation extends GatewayError {
  override readonly name = 'ConnectElicitation';

  constructor(
    private readonly payload: object,
    readonly id: JsonRpcId,
  ) {
    super(200, 'unauthorized', MESSAGE);
  }

  override body(): string {
    return JSON.stringify({ jsonrpc: '2.0', id: this.id, ...this.payload });
  }
}

/** The elicitation for a credential's UpstreamAccountRequired; anything else is returned as it was. */
export function asConnectElicitation(err: unknown, req: IncomingMessage, body: Buffer): unknown {
  if (!(err instanceof UpstreamAccountRequired)) return err;
  const { id, initializeVersion } = readRequest(body);
  // `initialize` carries no header yet: the version it asks for is the client's.
  const header = req.headers['mcp-protocol-version'];
  const version = typeof header === 'string' ? header : initializeVersion;
  return new ConnectElicitation(connectAnswer(err, version), id);
}

/** The JSON-RPC answer (error or result) carrying the connect link, as `version` reads it (an aggregated route's per message). */
export function connectAnswer(err: UpstreamAccountRequired, version: string | undefined): { error: { code: number; message: string; data: unknown } } | { result: Record<string, unknown> } {
  const elicitation = { mode: 'url', elicitationId: err.elicitationId, url: err.url, message: MESSAGE };
  if (version === undefined || version < '2025-11-25') return { error: { code: CONNECT_REQUIRED_LEGACY, message: `${MESSAGE}: open ${err.url}`, data: { url: err.url } } };
  if (version < '2026-07-28') return { error: { code: URL_ELICITATION_REQUIRED, message: MESSAGE, data: { elicitations: [elicitation] } } };
  return { result: { resultType: 'input_required', inputRequests: { connect: { method: 'elicitation/create', params: elicitation } } } };
}

/** The id of a single JSON-RPC request body (null for a batch, a notification, not JSON), and the version an `initialize` asks for. */
function readRequest(body: Buffer): { id: JsonRpcId; initializeVersion?: string } {
  let message: unknown;
  try {
    message = JSON.parse(body.toString('utf8'));
  } catch {
    return { id: null };
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return { id: null };
  const { id, method, params } = message as { id?: unknown; method?: unknown; params?: { protocolVersion?: unknown } };
  const version = method === 'initialize' && typeof params?.protocolVersion === 'string' ? params.protocolVersion : undefined;
  return { id: typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null, initializeVersion: version };
}
