// A client's `subscriptions/listen` fanned out to the upstreams of its
// aggregated session (DESIGN §8.2, 2026-07-28): every upstream that is up is
// opened (an upstream of a session-based revision sends its list changes on its
// session's GET stream, which the session passes to its listens); each upstream
// of 2026-07-28 gets a listen of its own for this client listen, asking for the
// same list changes and the watched URIs it serves; once each acknowledged (or
// its timeout passed) the client's listen is acknowledged, naming the URIs
// honoured (those served by an upstream of 2026-07-28; others are not watched).
import type { AggregateMethods, RequestContext, SessionUpstream } from './aggregate-methods.js';
import type { ListenStream } from './listen-stream.js';
import { upstreamFilter } from './subscription-filter.js';

const RESOURCES_CHANGED = 'notifications/resources/list_changed';

export interface ListenedSession {
  upstreams: readonly SessionUpstream[];
  methods: AggregateMethods;
}

export async function fanOutListen(listen: ListenStream, session: ListenedSession, ctx: RequestContext): Promise<void> {
  const served = session.upstreams.filter((u) => !u.health.down);
  await Promise.all(served.map((u) => u.link.open(ctx.span).then(() => u.health.served(), (err: unknown) => u.health.failedWith('initialize', err))));
  const watched = await watchedByUpstream(listen, session, ctx);
  const modern = served.filter((u) => !u.health.down && u.link.speaksModern);
  const honoured: string[] = [];
  await Promise.all(
    modern.map(async (u) => {
      const uris = watched.get(u) ?? [];
      listen.watch(u.health.name, uris);
      const own = await u.link
        .subscribe(upstreamFilter(listen.filter, uris), (method, params) => {
          // Who serves which URI is learnt again, as for a list change on a GET stream.
          if (method === RESOURCES_CHANGED) session.methods.forgetResources();
          listen.deliver(u.health.name, method, params);
        })
        .catch(() => undefined);
      if (own === undefined) return;
      honoured.push(...uris);
      listen.hold(own);
      await own.ready;
    }),
  );
  listen.acknowledge(honoured);
}

/** The watched URIs by the upstream of 2026-07-28 that serves each in this session (the others' are not honoured). */
async function watchedByUpstream(listen: ListenStream, session: ListenedSession, ctx: RequestContext): Promise<Map<SessionUpstream, string[]>> {
  const watched = new Map<SessionUpstream, string[]>();
  for (const uri of listen.filter.uris) {
    if (listen.ended) break;
    const owner = await session.methods.ownerOf(uri, ctx);
    if (owner === undefined || !owner.link.speaksModern) continue;
    watched.set(owner, [...(watched.get(owner) ?? []), uri]);
  }
  return watched;
}
