// What the SSE bridge needs to know of JSON-RPC messages, both ways: which
// requests of a client's POST wait for an answer (by id) and which progress
// tokens they carry; and, of a message from the upstream, whether it answers
// one of them, reports progress on one, or is the server's own. The body was
// already read once, strictly, by the policy step; this parses it again only
// for these few members and forwards the original bytes.
import { GatewayError } from '../../errors/gateway-error.js';

/** A JSON-RPC id as a map key: strings and numbers never collide ("1" is not 1). */
export function idKey(id: unknown): string | undefined {
  if (typeof id === 'string') return `s${id}`;
  if (typeof id === 'number' && Number.isFinite(id)) return `n${id}`;
  return undefined;
}

export interface ClientRequest {
  /** idKey of the id the upstream sees (and answers). */
  key: string;
  /** The client's own id. */
  id: string | number;
  /** The id the upstream sees: the client's own, unless the session renames requests (upstream-ids.ts). */
  upstreamId: string | number;
  /** idKey of the progress token the upstream sees, when the client asked for progress. */
  progressKey?: string;
  /** The client's own progress token. */
  progressToken?: string | number;
}

export interface ClientMessages {
  /** Requests (method and id): each waits for its answer on the upstream stream. */
  requests: ClientRequest[];
  /** An `initialize` request is among them: the start of a session. */
  initialize: boolean;
  /** The body was a JSON array (a 2025-03-26 batch): answered as one, too. */
  batch: boolean;
  /** Every message of the body, parsed (where tracing writes its context before re-serialising). */
  all: Array<Record<string, unknown>>;
  /** The messages are not the client's bytes (upstream-ids.ts): the body is `all`, serialised. */
  renamed?: boolean;
}

export const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A request: a method and an id. */
export const isRequestMessage = (message: Record<string, unknown>): boolean => typeof message.method === 'string' && message.id !== undefined;

/** A JSON-RPC id or progress token: a string or a number. */
export const isRpcId = (value: unknown): value is string | number => idKey(value) !== undefined;

const notJsonRpc = () => new GatewayError(400, 'invalid_request', 'The body is not a JSON-RPC message');

/** The requests of a client's POST body. Throws 400 for a body that is not JSON-RPC. */
export function readClientMessages(body: Buffer): ClientMessages {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw notJsonRpc();
  }
  const batch = Array.isArray(parsed);
  const messages = batch ? (parsed as unknown[]) : [parsed];
  if (messages.length === 0) throw notJsonRpc();
  const requests: ClientRequest[] = [];
  let initialize = false;
  for (const message of messages) {
    if (!isRecord(message)) throw notJsonRpc();
    if (!isRequestMessage(message)) continue;
    const key = idKey(message.id);
    if (key === undefined) throw new GatewayError(400, 'invalid_request', 'A JSON-RPC request id is a string or a number');
    const id = message.id as string | number;
    const token = progressTokenOf(message);
    requests.push({ key, id, upstreamId: id, ...(token !== undefined && { progressKey: idKey(token), progressToken: token }) });
    if (message.method === 'initialize') initialize = true;
  }
  return { requests, initialize, batch, all: messages as Array<Record<string, unknown>> };
}

/** `params._meta.progressToken`, when the message asks for progress. */
export function progressTokenOf(message: Record<string, unknown>): string | number | undefined {
  const meta = isRecord(message.params) && isRecord(message.params._meta) ? message.params._meta : undefined;
  return meta !== undefined && isRpcId(meta.progressToken) ? meta.progressToken : undefined;
}

/** A message from the upstream: an answer to a client's request, progress on one, or the server's own. */
export type UpstreamMessage =
  | { kind: 'answer'; key: string }
  | { kind: 'progress'; progressKey: string }
  | { kind: 'subscription'; subscriptionKey: string }
  | { kind: 'cancelled'; requestKey: string }
  | { kind: 'server' };

/** Where a listen stream's frames name the listen. */
export const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

export function classifyUpstreamMessage(message: unknown): UpstreamMessage {
  if (!isRecord(message)) return { kind: 'server' };
  if (message.method === undefined && ('result' in message || 'error' in message)) {
    const key = idKey(message.id);
    if (key !== undefined) return { kind: 'answer', key };
  }
  // A frame of a `subscriptions/listen` stream (2026-07-28) names its listen by the listen's id.
  if (isRecord(message.params) && isRecord(message.params._meta)) {
    const subscriptionKey = idKey(message.params._meta[SUBSCRIPTION_ID]);
    if (subscriptionKey !== undefined) return { kind: 'subscription', subscriptionKey };
  }
  if (message.method === 'notifications/progress' && isRecord(message.params)) {
    const progressKey = idKey(message.params.progressToken);
    if (progressKey !== undefined) return { kind: 'progress', progressKey };
  }
  // The server gave up on one of the requests it was sent.
  if (message.method === 'notifications/cancelled' && isRecord(message.params)) {
    const requestKey = idKey(message.params.requestId);
    if (requestKey !== undefined) return { kind: 'cancelled', requestKey };
  }
  return { kind: 'server' };
}

/** A JSON-RPC error answer to one of the client's requests that the upstream will now never answer. */
export function errorAnswer(id: string | number, code: number, message: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } });
}

/** Tells the upstream the client gave up on a request (MCP `notifications/cancelled`). */
export function cancelledNotification(id: string | number, reason: string): Buffer {
  return Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } }));
}
