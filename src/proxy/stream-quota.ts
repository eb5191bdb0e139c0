// Open long-lived streams (GET streams and `subscriptions/listen` POSTs,
// long-lived-request.ts) of one route, per user (issuer, subject:
// all its clients one share, DESIGN.md §8.3). Each holds a client socket and
// an upstream connection for as long as the client keeps it, idle or not, so
// one user holding thousands would exhaust descriptors for everyone. Beyond
// the share, 429 with Retry-After; counted per replica, released when the
// client's response closes. (stdio and legacy SSE routes count their listens
// here; their GET streams are bounded by their sessions: one per session.
// An aggregated route counts its sessions' GET streams and its listens.)
import type { ServerResponse } from 'node:http';
import { tooManyRequests } from '../errors/gateway-error.js';
import { writeError } from '../errors/write-error.js';

/** Long-lived streams one user may hold open on one route at once (per replica): `limits.max_get_streams_per_user`'s default. */
export const GET_STREAMS_PER_USER = 16;
/** What a refused client is told to wait: a stream of its own must close first. */
const RETRY_AFTER_MS = 5_000;

export class StreamQuota {
  private readonly open = new Map<string, number>();

  constructor(private readonly perUser = GET_STREAMS_PER_USER) {}

  /** Counts a stream of `user` until `res` closes; false (the client answered 429) when the user holds its share already. */
  admit(user: string, res: ServerResponse): boolean {
    const held = this.open.get(user) ?? 0;
    if (held >= this.perUser) {
      writeError(res, tooManyRequests(`At most ${this.perUser} open streams (GET or subscriptions/listen) per user on this route; close one first`, RETRY_AFTER_MS));
      return false;
    }
    this.open.set(user, held + 1);
    res.once('close', () => {
      const left = (this.open.get(user) ?? 1) - 1;
      if (left > 0) this.open.set(user, left);
      else this.open.delete(user);
    });
    return true;
  }
}
