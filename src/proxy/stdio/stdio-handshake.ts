// The gateway's own opening of a stdio process, for the per-principal process
// of 2026-07-28 clients (../stateless-init.ts says why and how): the era probe
// (server/discover), then, for a legacy server only, initialize.
import type { GatewayError } from '../../errors/gateway-error.js';
import { HandshakeWait, handshakeRequest, INITIALIZED_NOTIFICATION, isModernAnswer, ProbeWait, probeRequest } from '../stateless-init.js';
import type { JsonRpcId, Message } from './messages.js';
import type { Answer, StdioSession } from './stdio-session.js';

/** Where the process's answer to one of the gateway's own requests goes: never to a client. */
class GatewayAnswer implements Answer {
  outstanding = 0;
  readonly streaming = false;

  constructor(private readonly wait: { answer(message: Message): void; fail(error: GatewayError): void }) {}

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

/**
 * Probes the process with server/discover: a modern server is left as it is (its answer kept from
 * any client); any other answer, or none within `timeoutMs`, and the gateway sends initialize and
 * notifications/initialized. Rejects with 502, or 504 after `timeoutMs` (the caller stops the process).
 */
export async function initializeStdio(session: StdioSession, timeoutMs: number): Promise<void> {
  const probe = new ProbeWait(timeoutMs);
  const probeAnswer = new GatewayAnswer(probe);
  session.send([probeRequest(0)], probeAnswer);
  const answer = await probe.done;
  if (answer !== undefined && isModernAnswer(answer)) return;
  // No answer: the probe is forgotten (and cancelled), so it holds nothing in the session.
  if (answer === undefined) session.abandon(probeAnswer, 'no answer to server/discover');
  const wait = new HandshakeWait(timeoutMs);
  session.send([handshakeRequest(0)], new GatewayAnswer(wait));
  await wait.done;
  session.send([INITIALIZED_NOTIFICATION], undefined);
}
