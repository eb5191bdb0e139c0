// An answer still open lives no longer than the authorization that let it
// through. A GET event stream may stay open for hours (idle streams are not
// cut by request timeouts), delivering the server's notifications and its
// requests to the client: it ends when the token that opened it expires
// (the client reconnects with a fresh one), and so does a `subscriptions/listen`
// POST's stream, long-lived like it (long-lived-request.ts); any open answer
// ends when the token's grant is revoked (J52). Any other POST's answer is not
// cut at expiry: a long tool call started with a valid token may finish.
import type { ServerResponse } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { TokenVerifier } from '../auth/verifier.js';
import { SlotSet } from './slot-set.js';

/** How often open answers are looked at: a revoked grant's streams end within this after the replica learns of it. */
const SWEEP_MS = 1_000;

interface Opened {
  auth: AuthContext;
  verifier: Pick<TokenVerifier, 'usable'>;
  /** Epoch ms after which the answer is cut; Infinity: only a revocation cuts it. */
  endsAt: number;
}

/** Not a Map keyed by response (one entry per request: slot-set.ts says why); each response carries its own Opened. */
const open = new SlotSet<ServerResponse>();
const OPENED = Symbol('opened');
type Watched = ServerResponse & { [OPENED]?: Opened };
let sweep: NodeJS.Timeout | undefined;

/** Watches `res` until it closes: destroyed (as if its client had left) once its authorization ends (its token's expiry too, when `longLived`). */
export function endWithAuthorization(res: ServerResponse, longLived: boolean, auth: AuthContext, verifier: Pick<TokenVerifier, 'usable'>): void {
  if (res.destroyed || res.writableEnded) return;
  (res as Watched)[OPENED] = { auth, verifier, endsAt: longLived ? auth.expiresAt * 1000 : Infinity };
  open.add(res);
  // One function for every response, not a closure and a once() wrapper each: this runs per request.
  res.on('close', forgetClosed);
  sweep ??= setInterval(sweepOpen, SWEEP_MS).unref();
}

function forgetClosed(this: ServerResponse): void {
  open.delete(this);
  (this as Watched)[OPENED] = undefined;
}

function sweepOpen(): void {
  // Stopped by the first sweep that finds nothing open, not by each response that closes: one
  // request at a time would otherwise start and clear an interval per request.
  if (open.size === 0) {
    clearInterval(sweep);
    sweep = undefined;
    return;
  }
  const now = Date.now();
  for (const res of open) {
    const { auth, verifier, endsAt } = (res as Watched)[OPENED]!;
    // A revoked grant is a 401; a revocation log out of reach (503) cuts nothing.
    if (endsAt <= now || verifier.usable?.(auth)?.status === 401) {
      open.delete(res);
      res.destroy();
    }
  }
}
