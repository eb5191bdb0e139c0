// The session-less (2026-07-28) requests of one user share one upstream
// session (sse-sessions.ts): two apps may use the same JSON-RPC id at once,
// or a call the id of an open listen. So on such a session each request goes
// upstream under an id of the gateway's own, unique across the gateway (and
// its progress token with it), and what the upstream says of it comes back
// under the client's own id and token (as on stdio routes). A session of its
// own (initialize) is one client's: its bytes go as sent.
import { isRecord, isRequestMessage, progressTokenOf, SUBSCRIPTION_ID, idKey, type ClientMessages, type ClientRequest } from './messages.js';

type Message = Record<string, unknown>;

let lastId = 0;
/** An id no other request of this gateway carries upstream. */
const nextUpstreamId = (): number => ++lastId;

/** `params` with `_meta` members set. */
function withMeta(message: Message, meta: Message): Message {
  const params = isRecord(message.params) ? message.params : {};
  return { ...message, params: { ...params, _meta: { ...(isRecord(params._meta) ? params._meta : {}), ...meta } } };
}

/** One request under a fresh upstream id (and its progress token, if it asked for progress, too). */
function renameRequest(message: Message): { message: Message; request: ClientRequest } {
  const id = message.id as string | number;
  const upstreamId = nextUpstreamId();
  const key = idKey(upstreamId)!;
  const token = progressTokenOf(message);
  if (token === undefined) return { message: { ...message, id: upstreamId }, request: { key, id, upstreamId } };
  const renamed = withMeta({ ...message, id: upstreamId }, { progressToken: upstreamId });
  return { message: renamed, request: { key, id, upstreamId, progressKey: key, progressToken: token } };
}

/**
 * `messages` as the upstream of a shared session sees them: each request under
 * a fresh id; a cancellation names the upstream id of the request it means
 * (`upstreamIdOf`: the one request of this session under that client id), and
 * one that names none is dropped (forwarded, its id could be another request's).
 */
export function renamed(messages: ClientMessages, upstreamIdOf: (clientId: unknown) => string | number | undefined): ClientMessages {
  const requests: ClientRequest[] = [];
  const all: Message[] = [];
  for (const message of messages.all) {
    if (isRequestMessage(message)) {
      const one = renameRequest(message);
      requests.push(one.request);
      all.push(one.message);
    } else if (message.method === 'notifications/cancelled') {
      const params = isRecord(message.params) ? message.params : {};
      const upstreamId = upstreamIdOf(params.requestId);
      if (upstreamId !== undefined) all.push({ ...message, params: { ...params, requestId: upstreamId } });
    } else {
      all.push(message);
    }
  }
  return { ...messages, requests, all, renamed: true };
}

/**
 * What the upstream said of `request`, named as the client knows it: the
 * upstream's own bytes when they already are (a session that does not
 * rename), else with `member` set back to the client's id or token.
 */
export function forClient(json: string, parsed: Message, request: ClientRequest, member: 'id' | 'progressToken' | 'subscriptionId'): string {
  if (member === 'id') return request.id === request.upstreamId ? json : JSON.stringify({ ...parsed, id: request.id });
  if (member === 'subscriptionId') return request.id === request.upstreamId ? json : JSON.stringify(withMeta(parsed, { [SUBSCRIPTION_ID]: request.id }));
  const params = parsed.params as Message;
  const token = request.progressToken;
  return token === undefined || token === params.progressToken ? json : JSON.stringify({ ...parsed, params: { ...params, progressToken: token } });
}
