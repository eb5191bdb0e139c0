// One connection to a route's upstream AS: authorization code + PKCE S256,
// `state` bound to the browser and the principal (kept, sealed, in the store
// and taken once by the callback), RFC 9207 `iss` checked where the AS sends
// or promises it, the exact redirect URI of this route, `resource` unless the
// route says not to send it. The callback's grant is saved for the principal
// the flow was started for, never for whoever finishes it, and only by the
// callback of the route that started it (a state is refused at another
// route's callback before any token request). The pending connection is
// stored after its principal's tag, so the memory store bounds each
// principal's pending connections on its own.
import * as oauth from 'oauth4webapi';
import { hashKeyPart, upstreamConnectKey } from '../../store/key-names.js';
import { ownedValue } from '../../store/owned-value.js';
import type { Store } from '../../store/store.js';
import type { AccountTokenCipher } from './account-token-cipher.js';
import type { GrantOwner, UpstreamGrants } from './upstream-grants.js';
import { checkTokenSizes } from './upstream-answers.js';
import { grantFrom } from './upstream-tokens.js';
import { safeReason, UpstreamAsError, type UpstreamServer } from './upstream-server.js';

/** A user has this long at the upstream AS to sign in and approve. */
const CONNECT_TTL_MS = 10 * 60_000;

interface PendingConnect {
  owner: GrantOwner;
  browserId: string;
  codeVerifier: string;
  /** Where the browser goes once connected (the client's redirect after a consent); undefined: the connected page. */
  returnTo?: string;
}

export interface ConnectFlowOptions {
  /** The route whose callback this is: a state made for another route is refused. */
  routePath: string;
  server: UpstreamServer;
  grants: UpstreamGrants;
  store: Store;
  cipher: AccountTokenCipher;
  redirectUri: string;
  resource: string;
}

/** The callback is not the answer to a connection this browser started (unknown, used or expired state, another browser). */
export class ConnectCallbackRefused extends Error {
  override readonly name = 'ConnectCallbackRefused';
}

export class ConnectFlow {
  constructor(private readonly o: ConnectFlowOptions) {}

  /** The authorization request to send the browser to. */
  async start(owner: GrantOwner, browserId: string, returnTo?: string): Promise<string> {
    const { server, client, scopes } = await this.o.server.resolve();
    if (!server.authorization_endpoint) throw new UpstreamAsError('the upstream authorization server names no authorization endpoint');
    const state = oauth.generateRandomState();
    const codeVerifier = oauth.generateRandomCodeVerifier();
    const key = upstreamConnectKey(state);
    const pending: PendingConnect = { owner, browserId, codeVerifier, ...(returnTo && { returnTo }) };
    const tag = hashKeyPart(`${owner.issuer}\n${owner.subject}`);
    await this.o.store.set(key, ownedValue(tag, this.o.cipher.seal(key, JSON.stringify(pending))), CONNECT_TTL_MS);
    const url = new URL(server.authorization_endpoint);
    url.searchParams.set('client_id', client.client_id);
    url.searchParams.set('redirect_uri', this.o.redirectUri);
    url.searchParams.set('response_type', 'code');
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(codeVerifier));
    url.searchParams.set('code_challenge_method', 'S256');
    for (const [name, value] of Object.entries(this.o.server.resourceParameter(this.o.resource))) url.searchParams.set(name, value);
    return url.href;
  }

  /** Redeems the callback for the principal its `state` was made for; ConnectCallbackRefused or UpstreamAsError otherwise. */
  async finish(callback: URLSearchParams, browserId: string | undefined): Promise<{ owner: GrantOwner; returnTo?: string }> {
    const state = callback.get('state');
    if (!state || !browserId) throw new ConnectCallbackRefused('no state or no browser');
    const key = upstreamConnectKey(state);
    const stored = await this.o.store.take(key);
    const sealed = stored?.slice(stored.indexOf('\n') + 1); // after the owner part (owned-value.ts)
    const text = sealed === undefined ? undefined : this.o.cipher.open(key, sealed);
    if (text === undefined) throw new ConnectCallbackRefused('unknown, used or expired state');
    const pending = JSON.parse(text) as PendingConnect;
    if (pending.browserId !== browserId) throw new ConnectCallbackRefused('started in another browser');
    // Another route's state: its verifier is never sent to this route's AS, its grant never made here.
    if (pending.owner.routePath !== this.o.routePath) throw new ConnectCallbackRefused("started for another route's upstream");
    const resolved = await this.o.server.resolve();
    let tokens: oauth.TokenEndpointResponse;
    try {
      const params = oauth.validateAuthResponse(resolved.server, resolved.client, callback, state);
      const options = { ...this.o.server.requestOptions(resolved.insecure), additionalParameters: this.o.server.resourceParameter(this.o.resource) };
      const response = await oauth.authorizationCodeGrantRequest(resolved.server, resolved.client, resolved.auth, params, this.o.redirectUri, pending.codeVerifier, options);
      tokens = checkTokenSizes(await oauth.processAuthorizationCodeResponse(resolved.server, resolved.client, response));
    } catch (err) {
      // The AS forgot the gateway's dynamic registration: the next connection registers again.
      if (err instanceof oauth.ResponseBodyError && err.error === 'invalid_client') await this.o.server.forgetRegistration(resolved.client.client_id);
      throw new UpstreamAsError(safeReason(err), { owner: pending.owner, returnTo: pending.returnTo });
    }
    const now = Date.now();
    await this.o.grants.save(pending.owner, grantFrom(tokens, { scopes: resolved.scopes.slice(), connectedAt: now, asIssuer: resolved.server.issuer, resource: this.o.resource }));
    return { owner: pending.owner, returnTo: pending.returnTo };
  }
}
