// Requests in flight on one route, per user (issuer, subject: all its clients
// one share, DESIGN.md §8.3). Every POST counts, whatever its answer: JSON, an
// event stream that lasts as long as a long tool runs, or a stdio child's
// answer. Each holds a client socket (and on HTTP routes an upstream
// connection) until its answer ends, so without a share one user's long
// `tools/call`s took every file descriptor of the gateway. Counted per
// replica, from admission until the client's response closes (answer ended or
// client gone); beyond the share, 429 before anything is forwarded.
import type { ServerResponse } from 'node:http';
import { tooManyRequests, type GatewayError } from '../errors/gateway-error.js';

/** POSTs one user may have in flight on one route at once (per replica): `limits.max_requests_in_flight_per_user`'s default. */
export const REQUESTS_IN_FLIGHT_PER_USER = 64;
/** What a refused client is told to wait: one of its own requests must end first. */
const RETRY_AFTER_MS = 1_000;

/** The counting alone, with no response: what the property test drives. */
export class InFlightCounts {
  private readonly held = new Map<string, number>();

  constructor(readonly perUser: number) {}

  /** One more for `user`; false, and nothing counted, when it holds its share already. */
  take(user: string): boolean {
    const held = this.held.get(user) ?? 0;
    if (held >= this.perUser) return false;
    this.held.set(user, held + 1);
    return true;
  }

  release(user: string): void {
    const left = (this.held.get(user) ?? 1) - 1;
    if (left > 0) this.held.set(user, left);
    else this.held.delete(user);
  }

  of(user: string): number {
    return this.held.get(user) ?? 0;
  }
}

export class InFlightShare {
  private readonly counts: InFlightCounts;

  constructor(perUser = REQUESTS_IN_FLIGHT_PER_USER) {
    this.counts = new InFlightCounts(perUser);
  }

  /** Counts a request of `user` until `res` closes; the 429 to answer (nothing counted) when the user holds its share. */
  admit(user: string, res: ServerResponse): GatewayError | undefined {
    if (!this.counts.take(user)) {
      return tooManyRequests(`At most ${this.counts.perUser} requests in flight per user on this route; wait for one to end`, RETRY_AFTER_MS);
    }
    // 'close' comes once the answer is written or the client has gone, whichever is first. One
    // listener for every response, not a closure and a once() wrapper each: this runs per request.
    (res as Held)[HELD] = { counts: this.counts, user };
    res.on('close', releaseHeld);
    return undefined;
  }
}

const HELD = Symbol('in-flight share');
type Held = ServerResponse & { [HELD]?: { counts: InFlightCounts; user: string } };

function releaseHeld(this: Held): void {
  const held = this[HELD];
  if (held === undefined) return;
  this[HELD] = undefined;
  held.counts.release(held.user);
}
