// How far the user's consent to an authorization request has got, carried in
// the request itself through the interactions (consent page → login → code).
// The user is known only after the login; a consent remembered by the browser
// lets the login start without the page, and is checked against the signed-in
// user's own consents before any code is issued.
import type { AuthorizationRequest } from './interactions.js';

export interface ConsentState {
  /**
   * 'page': approved on the consent page in this flow (by whoever then signs in);
   * 'browser': this browser approved it before, for some user — the signed-in user's own consent is still to be found.
   */
  consent?: 'page' | 'browser';
  /** Set when the consent page is shown after the login: who signed in, and the grant their login is bound to. */
  signedIn?: { subject: string; grantId: string };
  /** user_oauth: the detour to the upstream AS was offered (taken or not); the code comes next. */
  upstreamChecked?: boolean;
}

export type ConsentedRequest = AuthorizationRequest & ConsentState;

export function withConsent(request: AuthorizationRequest, state: ConsentState): ConsentedRequest {
  const { consent: _consent, signedIn: _signedIn, upstreamChecked: _checked, ...plain } = request as ConsentedRequest;
  return { ...plain, ...state };
}

export const consentState = (request: AuthorizationRequest): ConsentState => request as ConsentedRequest;
