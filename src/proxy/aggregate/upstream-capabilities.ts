// What each upstream of an aggregated route announced in its latest
// initialize answer, for `server/discover` (2026-07-28), which has no session
// to open upstream sessions for. An upstream not yet known is asked once: a
// session opened and ended at once (one probe at a time per upstream, its
// answer kept), so discover requests cannot make processes or sessions pile up.
import type { AuthContext } from '../../auth/principal.js';
import type { UpstreamHealth } from './upstream-health.js';
import { UpstreamLink, type AggregateUpstream, type ClientHello } from './upstream-link.js';

export class UpstreamCapabilities {
  private readonly known: (Record<string, unknown> | undefined)[];
  private readonly probes: (Promise<void> | undefined)[];

  constructor(
    private readonly upstreams: readonly AggregateUpstream[],
    private readonly health: readonly UpstreamHealth[],
  ) {
    this.known = upstreams.map(() => undefined);
    this.probes = upstreams.map(() => undefined);
  }

  /** An upstream's initialize answer, from any session's opening. */
  learn(index: number, result: Record<string, unknown> | undefined): void {
    if (result) this.known[index] = result;
  }

  /** Every upstream's latest initialize answer; those not known yet (and not down) asked now. */
  async all(auth: AuthContext, hello: ClientHello): Promise<readonly (Record<string, unknown> | undefined)[]> {
    await Promise.all(this.upstreams.map((u, i) => (this.known[i] || this.health[i]!.down ? undefined : (this.probes[i] ??= this.probe(i, u, auth, hello)))));
    return this.known;
  }

  private async probe(index: number, upstream: AggregateUpstream, auth: AuthContext, hello: ClientHello): Promise<void> {
    const link = new UpstreamLink(upstream, auth, hello);
    try {
      this.learn(index, await link.open());
      this.health[index]!.served();
    } catch (err) {
      // Judged as any initialize is: one caller's missing grant or refused credential never takes the upstream from everyone.
      if (!upstream.perSession) this.health[index]!.failedWith('initialize', err);
    } finally {
      link.close();
      this.probes[index] = undefined;
    }
  }
}
