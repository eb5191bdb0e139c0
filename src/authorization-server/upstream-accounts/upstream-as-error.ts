// The one error of a route's upstream AS client (user_oauth).
import type { GrantOwner } from './upstream-grants.js';

/** A request to the upstream AS or the upstream failed; the message is safe to log (nothing the AS sent). */
export class UpstreamAsError extends Error {
  override readonly name = 'UpstreamAsError';
  constructor(
    message: string,
    /** A callback that failed: whose connection it was and where the browser was to go back to. */
    readonly after?: { owner: GrantOwner; returnTo?: string },
  ) {
    super(message);
  }
}
