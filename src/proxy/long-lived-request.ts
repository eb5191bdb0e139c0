// Which requests open a stream meant to stay open: a GET (the server's stream
// of a session) and a POST of MCP 2026-07-28's `subscriptions/listen` (its
// answer is an event stream of notifications for as long as the client likes).
// Both hold a client socket and an upstream connection indefinitely, so both
// count in a user's stream share and both end when their token expires; any
// other POST's answer ends with that answer (a long tool call may finish).
const LISTEN = 'subscriptions/listen';
const LISTEN_BYTES = Buffer.from('listen');
/** A `\u` escape can spell any letter of the method: such a body is parsed too. */
const UNICODE_ESCAPE = Buffer.from('\\u');

export function opensLongLivedStream(method: string | undefined, body: Buffer): boolean {
  if (method === 'GET') return true;
  if (method !== 'POST') return false;
  // Most bodies name no listen at all: no parse for them (this runs per request).
  if (!body.includes(LISTEN_BYTES) && !body.includes(UNICODE_ESCAPE)) return false;
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    // Not JSON: the policy or the upstream refuses it; nothing is held open.
    return false;
  }
  return (Array.isArray(value) ? value : [value]).some(isListen);
}

function isListen(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { method?: unknown }).method === LISTEN;
}
