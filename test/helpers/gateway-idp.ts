/**
 * A real OpenID Connect IdP (oidc-provider) set up as the upstream login of a gateway's own
 * authorization server: the gateway is a confidential client with a static id whose callback is
 * registered before the gateway starts; the tests choose who signs in and see what the IdP issues.
 */
import { randomBytes } from 'node:crypto';
import { startOidcProvider, type OidcProviderHandle, type OidcProviderOptions } from './oidc-provider.js';

/** Where the gateway receives the IdP's authorization response. */
export const IDP_CALLBACK_PATH = '/authorize/login/oidc/callback';

export interface IdpClient {
  client_id: string;
  client_secret: string;
}

/** The gateway's client at the IdP, with a fresh secret. */
export function newIdpClient(): IdpClient {
  return { client_id: 'mcp-gateway', client_secret: randomBytes(24).toString('base64url') };
}

/** What the tests read of oidc-provider beyond the harness's typings: a `grant.success` context. */
export interface TokenEndpointContext {
  body: { access_token: string; refresh_token?: string; id_token?: string };
  oidc: { params?: Record<string, unknown> };
}

/** The IdP's AccessToken model, to learn whose token a value is. */
export const accessTokens = (handle: OidcProviderHandle) =>
  (handle.provider as unknown as { AccessToken: { find(value: string): Promise<{ accountId?: string } | undefined> } }).AccessToken;

/** Where the gateway receives the IdP's back-channel logout tokens. */
export const IDP_BACKCHANNEL_LOGOUT_PATH = '/authorize/login/oidc/backchannel-logout';

export interface GatewayIdpOptions {
  /** Register the gateway's back-channel logout URI (session required, so ID tokens carry `sid`). */
  backchannelLogout?: boolean;
  /**
   * What the IdP does with an RFC 8707 `resource` (the gateway sends the client's by default):
   * `ignored` (default: as Keycloak or Google, which know no such parameter), or `refused` with
   * `invalid_target` (as Entra ID does: AADSTS9010010).
   */
  resource?: 'ignored' | 'refused';
  /** More gateways (their origins) registered as redirect URIs of the same client. */
  moreGatewayOrigins?: string[];
  /** Passed on to startOidcProvider (claims, extra parameters). */
  provider?: Pick<OidcProviderOptions, 'accountClaims' | 'claims' | 'extraParams' | 'conformIdTokenClaims' | 'features'>;
}

/**
 * An IdP whose one client is the gateway at `gatewayOrigin`, issuing access tokens that live
 * `accessTokenTtl` seconds.
 */
export function startGatewayIdp(gatewayOrigin: string, client: IdpClient, accessTokenTtl: number, opts: GatewayIdpOptions = {}): Promise<OidcProviderHandle> {
  const origins = [gatewayOrigin, ...(opts.moreGatewayOrigins ?? [])];
  return startOidcProvider({
    // With resource indicators on and no resource known, every `resource` is invalid_target.
    resources: [],
    scopes: [],
    accessTokenTtl,
    ...opts.provider,
    features: {
      ...(opts.resource !== 'refused' && { resourceIndicators: { enabled: false } }),
      ...(opts.backchannelLogout && { backchannelLogout: { enabled: true } }),
      ...opts.provider?.features,
    },
    // The gateway under test listens on loopback, which oidc-provider's SSRF guard refuses to POST to.
    ...(opts.backchannelLogout && { fetch: (url, { dispatcher: _loopbackGuard, ...init }) => fetch(url, init) }),
    clients: [
      {
        ...client,
        redirect_uris: origins.map((o) => `${o}${IDP_CALLBACK_PATH}`),
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        ...(opts.backchannelLogout && { backchannel_logout_uri: `${gatewayOrigin}${IDP_BACKCHANNEL_LOGOUT_PATH}`, backchannel_logout_session_required: true }),
      },
    ],
  });
}

/** The login result the headless IdP login ends with: an account, or an error such as access_denied. */
export type IdpLoginOutcome = { accountId: string } | { error: string; error_description: string };

/** The helper's headless login signs in one fixed account: let `choose` decide per flow instead. */
export function chooseIdpLogin(idp: OidcProviderHandle, choose: () => IdpLoginOutcome): void {
  const finish = idp.provider.interactionFinished.bind(idp.provider);
  idp.provider.interactionFinished = ((req, res, result, options) => {
    if (!('login' in result)) return finish(req, res, result, options);
    const outcome = choose();
    return finish(req, res, 'accountId' in outcome ? { ...result, login: { accountId: outcome.accountId } } : outcome, options);
  }) as typeof idp.provider.interactionFinished;
}

/** Calls `seen` with everything the IdP's token endpoint hands out. */
export function onIdpTokens(idp: OidcProviderHandle, seen: (ctx: TokenEndpointContext) => void): void {
  idp.provider.on('grant.success', (event: unknown) => seen(event as TokenEndpointContext));
}

/** Revokes the gateway's refresh token at the IdP (RFC 7009, as the gateway's client): its session there ends. Returns the status. */
export async function revokeAtIdp(idp: OidcProviderHandle, client: IdpClient, refreshToken: string): Promise<number> {
  const res = await fetch(`${idp.issuer}/token/revocation`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}` },
    body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }),
  });
  return res.status;
}
