// The session-less calls of one principal that asked its client something
// (session-less-call.ts), each held until its outcome reaches the client
// (DESIGN §8.2, MRTR). A round that ended with questions gets a `requestState`
// of the gateway's: random (192 bits), used once, known only to the session of
// the principal it was given to, so another principal's retry, a replay or a
// guess names nothing here. The gateway's states begin with STATE_PREFIX; any
// other `requestState` is an upstream of 2026-07-28's own and passes to it as
// it is. At most MAX_ASKING_CALLS calls of a session hold questions at once
// (beyond, an upstream's request during another call is refused, as one the
// client cannot take); a call whose retry never comes ends with its upstream
// request (`upstream_timeout`), and its outcome, unclaimed, is dropped
// KEEP_UNCLAIMED_MS later.
import { randomBytes } from 'node:crypto';
import type { SessionLessCall } from './session-less-call.js';

export const MAX_ASKING_CALLS = 8;
export const KEEP_UNCLAIMED_MS = 30_000;
const STATE_PREFIX = 'mag.';

/** Whether a retry's `requestState` is one the gateway gives (else it is an upstream's own). */
export function isGatewayState(state: unknown): state is string {
  return typeof state === 'string' && state.startsWith(STATE_PREFIX);
}

export class InputRounds {
  /** Calls that asked their client something, until their outcome reached it (or they were dropped). */
  private readonly asking = new Set<SessionLessCall>();
  /** Calls awaiting the client's retry, by the state its last round gave it. */
  private readonly waiting = new Map<string, SessionLessCall>();

  /** Whether `call` may hold questions: it does already, or there is room for one more call. */
  admit(call: SessionLessCall): boolean {
    if (this.asking.has(call)) return true;
    if (this.asking.size >= MAX_ASKING_CALLS) return false;
    this.asking.add(call);
    return true;
  }

  /** A round of `call` ended with questions: the state its client's retry names. */
  suspend(call: SessionLessCall): string {
    const state = `${STATE_PREFIX}${randomBytes(24).toString('base64url')}`;
    this.waiting.set(state, call);
    call.onSettled(() => {
      const timer = setTimeout(() => {
        if (this.waiting.get(state) !== call) return;
        this.waiting.delete(state);
        this.asking.delete(call);
      }, KEEP_UNCLAIMED_MS);
      timer.unref();
    });
    return state;
  }

  /** The call awaiting a retry with `state`, left waiting. */
  peek(state: string): SessionLessCall | undefined {
    return this.waiting.get(state);
  }

  /** The call awaiting a retry with `state`, now taken by that retry (the state is spent). */
  take(state: string): SessionLessCall | undefined {
    const call = this.waiting.get(state);
    this.waiting.delete(state);
    return call;
  }

  /** `call`'s outcome reached its client, or its client left: its place is free. */
  done(call: SessionLessCall): void {
    this.asking.delete(call);
  }

  /** The session ended: every call still held is cancelled at its upstream. */
  endAll(): void {
    for (const call of this.asking) call.abort('the session ended');
    this.asking.clear();
    this.waiting.clear();
  }
}
