// An authorization request between /authorize and the code: kept server-side
// (the browser only carries a random id), bound to the browser that started
// it, single-use at each step, and gone after ten minutes.
import { pendingAuthorizationKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { hashSecret, randomToken } from '../helpers/secrets.js';

export const INTERACTION_TTL_MS = 10 * 60_000;

/** A validated authorization request. */
export interface AuthorizationRequest {
  clientId: string;
  /** As the client sent it (a loopback port may differ from the registered entry): the code goes here. */
  redirectUri: string;
  /** The registered entry it matched: what consent is remembered for. */
  registeredRedirectUri: string;
  /** Whether redirect_uri was in the request (then /token must repeat it). */
  redirectUriSent: boolean;
  state?: string;
  codeChallenge: string;
  /** `dpop_jkt` (RFC 9449 §10): the code will be redeemed only with a DPoP proof of this key. */
  dpopJkt?: string;
  /** The route's canonical resource URI: the token's audience. */
  resource: string;
  scopes: string[];
}

/** `connect`: approved and signed in, waiting for the user's connection at a user_oauth route's upstream AS. */
export type InteractionStage = 'consent' | 'login' | 'connect';

export interface Interaction {
  id: string;
  stage: InteractionStage;
  request: AuthorizationRequest;
  /** sha256 of the browser binding cookie: only that browser can continue. */
  browser: string;
  createdAt: number;
  /** Scratch space for a login method; stored as it is, so never a secret (the oidc login derives its verifier and nonce from the id). */
  login?: Record<string, string>;
}

export class Interactions {
  constructor(
    private readonly store: Store,
    private readonly ttlMs = INTERACTION_TTL_MS,
  ) {}

  async create(stage: InteractionStage, request: AuthorizationRequest, browserId: string, login?: Record<string, string>): Promise<Interaction> {
    const interaction: Interaction = { id: randomToken(32), stage, request, browser: hashSecret(browserId), createdAt: Date.now(), ...(login && { login }) };
    // The id (the IdP `state` of a login) only as the key's hash: a store dump cannot continue an interaction.
    const { id, ...stored } = interaction;
    await this.store.set(pendingAuthorizationKey(id), JSON.stringify(stored), this.ttlMs);
    return interaction;
  }

  /** Reads without consuming (to render a page again). */
  async peek(id: string): Promise<Interaction | undefined> {
    if (!id) return undefined;
    const value = await this.store.get(pendingAuthorizationKey(id));
    return value === undefined ? undefined : { ...(JSON.parse(value) as Omit<Interaction, 'id'>), id };
  }

  /** Consumes: of concurrent callers exactly one gets it. */
  async take(id: string): Promise<Interaction | undefined> {
    if (!id) return undefined;
    const value = await this.store.take(pendingAuthorizationKey(id));
    return value === undefined ? undefined : { ...(JSON.parse(value) as Omit<Interaction, 'id'>), id };
  }
}

export const belongsTo = (interaction: Interaction, browserId: string | undefined): boolean =>
  browserId !== undefined && interaction.browser === hashSecret(browserId);
