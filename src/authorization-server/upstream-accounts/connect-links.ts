// Connect links: the URL a URL elicitation names when a principal has no
// working grant for a route. A link names the principal and route it was made
// for (in the store, under a random id), lives ten minutes and is taken once;
// at most one link per principal and route is live, so a client calling in a
// loop makes no more than one.
import { randomBytes } from 'node:crypto';
import { ACCOUNT_PATHS } from '../../config/reserved-paths.js';
import { connectLinkKey, connectLinkOfKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { endpointUrl } from '../context.js';
import type { GrantOwner } from './upstream-grants.js';

export const CONNECT_LINK_TTL_MS = 10 * 60_000;

export class ConnectLinks {
  constructor(
    private readonly store: Store,
    private readonly issuer: string,
  ) {}

  /** The live link of this principal and route, or a new one. */
  async linkFor(owner: GrantOwner): Promise<{ url: string; id: string }> {
    const indexKey = connectLinkOfKey(owner.issuer, owner.subject, owner.routePath);
    const live = await this.store.get(indexKey);
    if (live !== undefined && (await this.store.get(connectLinkKey(live))) !== undefined) return this.#link(live);
    const id = randomBytes(32).toString('base64url');
    await this.store.set(connectLinkKey(id), JSON.stringify(owner), CONNECT_LINK_TTL_MS);
    if (live !== undefined) await this.store.delete(indexKey);
    if (await this.store.setIfAbsent(indexKey, id, CONNECT_LINK_TTL_MS)) return this.#link(id);
    // Another request made one at the same moment: theirs is the one link; ours goes.
    await this.store.delete(connectLinkKey(id));
    const winner = await this.store.get(indexKey);
    return this.#link(winner ?? id);
  }

  /** The principal and route the link was made for; undefined when unknown, used or expired. Takes it: a link works once. */
  async take(id: string): Promise<GrantOwner | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const text = await this.store.take(connectLinkKey(id));
    if (text === undefined) return undefined;
    const owner = JSON.parse(text) as GrantOwner;
    await this.store.delete(connectLinkOfKey(owner.issuer, owner.subject, owner.routePath));
    return owner;
  }

  #link(id: string) {
    const url = new URL(endpointUrl(this.issuer, ACCOUNT_PATHS.connect));
    url.searchParams.set('link', id);
    return { url: url.href, id };
  }
}
