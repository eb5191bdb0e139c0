// The session caps of one aggregated route (DESIGN §8.3): a slot is taken
// synchronously when an initialize is admitted, before any await, so
// concurrent initializes cannot all pass the check; and a user's slots are
// counted by issuer and subject, so more clients do not multiply their share.
// At a bound, room is made as on a stdio or SSE route (session-admission.ts,
// [K66]): only from the claimer's own idle sessions, never another user's.
import { userKey, type AuthContext } from '../../auth/principal.js';
import { GatewayError } from '../../errors/gateway-error.js';

export class SessionSlots {
  private total = 0;
  private readonly perUser = new Map<string, number>();

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerUser: number,
  ) {}

  /**
   * Takes a slot for this user or throws 503; the key returned gives it back. At a bound,
   * `makeRoom(user)` may end one of the user's own idle sessions (giving its slot back at once).
   */
  take(auth: Pick<AuthContext, 'issuer' | 'subject'>, makeRoom: (user: string) => void = () => undefined): string {
    const user = userKey(auth);
    if (this.full(user)) makeRoom(user);
    const mine = this.perUser.get(user) ?? 0;
    if (this.full(user)) {
      throw new GatewayError(503, 'temporarily_unavailable', 'Too many sessions on this route', { headers: { 'retry-after': '30' } });
    }
    this.total++;
    this.perUser.set(user, mine + 1);
    return user;
  }

  private full(user: string): boolean {
    return this.total >= this.maxTotal || (this.perUser.get(user) ?? 0) >= this.maxPerUser;
  }

  give(user: string): void {
    const mine = this.perUser.get(user) ?? 0;
    if (mine === 0) return;
    this.total--;
    if (mine === 1) this.perUser.delete(user);
    else this.perUser.set(user, mine - 1);
  }
}
