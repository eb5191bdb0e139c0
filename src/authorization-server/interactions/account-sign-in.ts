// A sign-in to the connected-apps page rides the same login methods as an
// authorization (the dev form, or the IdP round trip with its state, nonce and
// PKCE): an interaction at stage `login` whose request is marked as an account
// sign-in. It names no client, so no code can come of it; the login's
// `complete` is routed to the account page instead (index.ts), which only
// starts a session for the signed-in user. The marker travels in the request
// itself, as consent-state does, so a login method that recreates the
// interaction (oidc: a fresh id as the IdP `state`) keeps it.
import type { AuthorizationRequest } from './interactions.js';

interface AccountSignInMarker {
  accountSignIn: true;
}

/** The request of an account sign-in: no client, no redirect to any client, no scopes. */
export function accountSignInRequest(pageUrl: string): AuthorizationRequest {
  const request: AuthorizationRequest & AccountSignInMarker = {
    clientId: '',
    redirectUri: pageUrl,
    registeredRedirectUri: pageUrl,
    redirectUriSent: false,
    codeChallenge: '',
    resource: '',
    scopes: [],
    accountSignIn: true,
  };
  return request;
}

export const isAccountSignIn = (request: AuthorizationRequest): boolean => (request as Partial<AccountSignInMarker>).accountSignIn === true;
