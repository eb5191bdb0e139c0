// `user_oauth`: the principal's own access token at the upstream's AS, from the
// grant they connected (DESIGN §8.1). No grant, or one that cannot be
// refreshed: UpstreamAccountRequired, which the route answers with the
// connect link (a URL elicitation). The token never appears in an error.
import { translateKnown } from '../errors/translate.js';
import { GatewayError } from '../errors/gateway-error.js';
import { upstreamCredentialFailed } from './credential-error.js';
import type { AuthContext } from '../auth/principal.js';
import type { UpstreamAccountSource, UpstreamCredential } from './upstream-credential.js';

/** The principal has no working grant at this route's upstream: the user must connect at `url`. */
export class UpstreamAccountRequired extends Error {
  constructor(
    readonly url: string,
    readonly elicitationId: string,
  ) {
    super('the upstream account must be connected');
    this.name = 'UpstreamAccountRequired';
  }
}

export function userOAuthCredential(accounts: UpstreamAccountSource | undefined): UpstreamCredential {
  if (!accounts) throw new Error('user_oauth needs the built-in authorization server with account: { enabled: true } and account_tokens');
  const fetched = async (auth: AuthContext, signal?: AbortSignal): Promise<Record<string, string>> => {
    try {
      return { authorization: `Bearer ${await accounts.accessTokenFor(auth, signal)}` };
    } catch (err) {
      if (err instanceof UpstreamAccountRequired || err instanceof GatewayError) throw err;
      throw translateKnown(err, { storeUnavailable: 'The token store is temporarily unavailable' }) ?? upstreamCredentialFailed(err);
    }
  };
  return {
    // Synchronous for a grant kept in process (every request of a user but one every few seconds): no promise, no await.
    headersFor(auth, signal) {
      const kept = accounts.keptAccessTokenFor?.(auth);
      return kept === undefined ? fetched(auth, signal) : { authorization: `Bearer ${kept}` };
    },
    async rejected(auth, injected) {
      const token = injected.authorization?.replace(/^Bearer /, '');
      // One refresh, or the grant forgotten: the retry then carries the new token, or gets the connect link.
      if (token) await accounts.refused(auth, token);
    },
  };
}
