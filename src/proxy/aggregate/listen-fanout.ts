// A client's `subscriptions/listen` fanned out to the upstreams of its
// aggregated session (DESIGN §8.2, 2026-07-28): every upstream that is up is
// opened (an upstream of a session-based revision sends its list changes on its
// session's GET stream, which the session passes to its listens); each upstream
// of 2026-07-28 gets a listen of its own for this client listen, asking for the
// same list changes and the watched URIs it serves (reopened while the client's
// lasts, reopened-listen.ts); a watched URI served by an upstream of a
// session-based revision is subscribed to on the principal's session there
// (listen-watches.ts). Once each upstream acknowledged or accepted (or its
// timeout passed) the client's listen is acknowledged, naming the URIs honoured.
import type { AggregateMethods, RequestContext, SessionUpstream } from './aggregate-methods.js';
import type { ListenStream } from './listen-stream.js';
import type { ListenWatches } from './listen-watches.js';
import { upstreamFilter } from './subscription-filter.js';

const RESOURCES_CHANGED = 'notifications/resources/list_changed';

export interface ListenedSession {
  upstreams: readonly SessionUpstream[];
  methods: AggregateMethods;
  watches: ListenWatches;
}

export async function fanOutListen(listen: ListenStream, session: ListenedSession, ctx: RequestContext): Promise<void> {
  const served = session.upstreams.filter((u) => !u.health.down);
  await Promise.all(served.map((u) => u.link.open(ctx.span).then(() => u.health.served(), (err: unknown) => u.health.failedWith('initialize', err))));
  const watched = await watchedByUpstream(listen, session, ctx);
  const honoured: string[] = [];
  await Promise.all(
    served
      .filter((u) => !u.health.down)
      .map(async (u) => {
        const uris = watched.get(u) ?? [];
        honoured.push(...(u.link.speaksModern ? await listenedAt(u, uris, listen, session) : await subscribedAt(u, uris, listen, session.watches, ctx)));
      }),
  );
  listen.acknowledge(honoured);
}

/** An upstream of 2026-07-28: a listen of the gateway's own for this one, asking for what it serves; the URIs honoured. */
async function listenedAt(u: SessionUpstream, uris: readonly string[], listen: ListenStream, session: ListenedSession): Promise<readonly string[]> {
  const name = u.health.name;
  listen.watch(name, uris);
  const deliver = (method: string, params: Record<string, unknown> | undefined) => {
    // Who serves which URI is learnt again, as for a list change on a GET stream.
    if (method === RESOURCES_CHANGED) session.methods.forgetResources();
    listen.deliver(name, method, params);
  };
  // Reopened after it ended: what the upstream said meanwhile is lost, so the client is told to look again.
  const reopened = () => {
    session.methods.forgetResources();
    listen.missed(name);
  };
  const own = await u.link.subscribe(upstreamFilter(listen.filter, uris), deliver, reopened).catch(() => undefined);
  if (own === undefined) return [];
  listen.hold(own);
  await own.ready;
  return uris;
}

/** An upstream of a session-based revision: the watched URIs it serves, subscribed on the principal's session there; those it accepted. */
async function subscribedAt(u: SessionUpstream, uris: readonly string[], listen: ListenStream, watches: ListenWatches, ctx: RequestContext): Promise<readonly string[]> {
  if (uris.length === 0) return [];
  const held = await watches.watch(uris, ctx);
  listen.onEnd(() => watches.unwatch(held, ctx));
  listen.watch(u.health.name, held);
  return held;
}

/** The watched URIs by the upstream that serves each in this session (a URI no upstream serves is not honoured). */
async function watchedByUpstream(listen: ListenStream, session: ListenedSession, ctx: RequestContext): Promise<Map<SessionUpstream, string[]>> {
  const watched = new Map<SessionUpstream, string[]>();
  for (const uri of listen.filter.uris) {
    if (listen.ended) break;
    const owner = await session.methods.ownerOf(uri, ctx);
    if (owner === undefined) continue;
    watched.set(owner, [...(watched.get(owner) ?? []), uri]);
  }
  return watched;
}
