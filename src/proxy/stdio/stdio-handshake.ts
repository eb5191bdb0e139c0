// The gateway's own initialize on a stdio process, for the per-principal
// process of 2026-07-28 clients (../stateless-init.ts says why and how).
import type { GatewayError } from '../../errors/gateway-error.js';
import { HandshakeWait, handshakeRequest, INITIALIZED_NOTIFICATION } from '../stateless-init.js';
import type { JsonRpcId, Message } from './messages.js';
import type { Answer, StdioSession } from './stdio-session.js';

/** Where the process's answer to the gateway's initialize goes: never to a client. */
class HandshakeAnswer implements Answer {
  outstanding = 0;
  readonly streaming = false;

  constructor(private readonly wait: HandshakeWait) {}

  respond(message: Message): void {
    this.wait.answer(message);
  }

  relay(): boolean {
    return false;
  }

  fail(error: GatewayError, _waiting: JsonRpcId[]): void {
    this.wait.fail(error);
  }
}

/** Sends initialize and notifications/initialized; rejects with 502, or 504 after `timeoutMs` (the caller stops the process). */
export async function initializeStdio(session: StdioSession, timeoutMs: number): Promise<void> {
  const wait = new HandshakeWait(timeoutMs);
  session.send([handshakeRequest(0)], new HandshakeAnswer(wait));
  await wait.done;
  session.send([INITIALIZED_NOTIFICATION], undefined);
}
