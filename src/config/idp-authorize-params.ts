// `login.extra_authorize_params`: what an operator may add to the gateway's
// authorization request at its IdP (Google's access_type, Auth0's audience,
// Entra's domain_hint, …), and what never: the parameters the gateway sets
// itself, whose value carries the request's security (state, PKCE, nonce,
// redirect URI) or would replace or reshape the request (a request object,
// a response mode the callback does not read, a DPoP key it does not hold).

/** Set by the gateway, or not to be set at all; compared without case (an IdP may read `Scope` as `scope`). */
export const GATEWAY_AUTHORIZE_PARAMS = [
  'client_id',
  'client_secret',
  'redirect_uri',
  'response_type',
  'response_mode',
  'scope',
  'state',
  'nonce',
  'code_challenge',
  'code_challenge_method',
  'resource',
  'request',
  'request_uri',
  'dpop_jkt',
] as const;

const RESERVED = new Set<string>(GATEWAY_AUTHORIZE_PARAMS);

/** Whether `name` is one the gateway sets itself (or forbids): refused in extra_authorize_params. */
export const isGatewayAuthorizeParam = (name: string): boolean => RESERVED.has(name.toLowerCase());
