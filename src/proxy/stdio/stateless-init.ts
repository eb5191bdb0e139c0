// Clients of 2026-07-28 have no session and send no `initialize`; the servers
// a stdio route starts (written for earlier revisions) need one. So each
// principal gets one process of its own, which the gateway initializes itself
// (the handshake's answer is kept from the client) before the first request
// reaches it; later requests of that principal go to the same process.
import { GatewayError } from '../../errors/gateway-error.js';
import type { JsonRpcId, Message } from './messages.js';
import type { Answer, StdioSession } from './stdio-session.js';

/** The newest revision that still has the handshake; a server that knows only older ones answers with its own. */
export const HANDSHAKE_PROTOCOL_VERSION = '2025-11-25';

const CLIENT_INFO = { name: 'mcp-auth-gateway', version: '1' };

/** The gateway's own initialize, answered into a promise. */
class HandshakeAnswer implements Answer {
  outstanding = 0;
  readonly streaming = false;

  constructor(
    private readonly resolve: () => void,
    private readonly reject: (err: GatewayError) => void,
  ) {}

  respond(message: Message): void {
    if ('error' in message) this.reject(new GatewayError(502, 'bad_gateway', 'Upstream refused initialize'));
    else this.resolve();
  }

  relay(): boolean {
    return false;
  }

  fail(error: GatewayError, _waiting: JsonRpcId[]): void {
    this.reject(error);
  }
}

/** Sends initialize and notifications/initialized; rejects with 504 after `timeoutMs` (the caller stops the process). */
export function initializeStateless(session: StdioSession, timeoutMs: number): Promise<void> {
  const handshake = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new GatewayError(504, 'gateway_timeout', 'Upstream did not answer initialize in time')), timeoutMs);
    timer.unref();
    const settle = (fn: () => void) => {
      clearTimeout(timer);
      fn();
    };
    const answer = new HandshakeAnswer(
      () => settle(resolve),
      (err) => settle(() => reject(err)),
    );
    session.send(
      [{ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: HANDSHAKE_PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO } }],
      answer,
    );
  });
  return handshake.then(() => session.send([{ jsonrpc: '2.0', method: 'notifications/initialized' }], undefined));
}
