/**
 * A real OAuth 2.1 / OIDC authorization server (oidc-provider v9) standing in for
 * Keycloak / Auth0 / Entra in integration tests. Issues RFC 9068 JWT access tokens
 * whose `aud` is the RFC 8707 `resource` that was asked for.
 *
 * - dynamic client registration (public clients, `token_endpoint_auth_method: none`)
 * - PKCE S256 required for every authorization request
 * - headless login + consent: the interaction URL is served by the same HTTP server and
 *   logs `accountId` in and grants everything that was asked for, without any page
 * - client_credentials through a pre-registered confidential client (`mintAccessToken`)
 * - refresh tokens for every client registered with the `refresh_token` grant
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { exportJWK, generateKeyPair, type JSONWebKeySet, type JWK } from 'jose';
import Provider, { errors, type InteractionDetails } from 'oidc-provider';
import { closeServer, listen } from './net.js';

export interface OidcProviderOptions {
  /** Canonical resource URIs (RFC 8707) the AS issues tokens for; any other `resource` is `invalid_target`. */
  resources: string[];
  /** Scopes a token for any of the resources may carry (e.g. `mcp:read`, `mcp:write`). */
  scopes: string[];
  /** Access token lifetime in seconds (default 300). */
  accessTokenTtl?: number;
  /** JWS algorithm of the access tokens (default ES256). */
  alg?: 'ES256' | 'RS256';
  /** Resource used when a request names none (a 2025-03-26 client); default: none → opaque token. */
  defaultResource?: string;
  /** The account that the headless login signs in (default `alice`). */
  accountId?: string;
  /** Extra pre-registered clients (oidc-provider client metadata). */
  clients?: Record<string, unknown>[];
  /** Port to listen on (default: any free port). */
  port?: number;
  /** Extra oidc-provider features (e.g. `backchannelLogout`), merged over the defaults. */
  features?: Record<string, unknown>;
  /** Replaces oidc-provider's outgoing `fetch` (back-channel logout POSTs), e.g. to reach a loopback gateway. */
  fetch?: (url: string, options: RequestInit & { dispatcher?: unknown }) => Promise<Response>;
  /** The claims of an account (default `sub`, `email`, `name`), e.g. to put the user id in another claim. */
  accountClaims?: (sub: string) => Record<string, unknown>;
  /** oidc-provider's `claims` (scope → claim names), replacing the default. */
  claims?: Record<string, string[]>;
  /** Authorization parameters oidc-provider keeps beyond the standard ones (they then appear in `interactions[].params`). */
  extraParams?: string[];
  /** oidc-provider's default (true) leaves a code flow's ID token without profile claims; false puts them in, as Entra ID does. */
  conformIdTokenClaims?: boolean;
}

export interface OidcProviderHandle {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  issuer: string;
  jwksUri: string;
  tokenEndpoint: string;
  /** The public signing keys (what `jwksUri` serves). */
  jwks: JSONWebKeySet;
  /** The private signing key (kid and alg set), for tests that forge what only the IdP could sign. */
  signingJwk: JWK;
  /** The pre-registered confidential client used for client_credentials. */
  confidentialClient: { client_id: string; client_secret: string };
  /** The live set of accepted resources: tests may add one whose port was not known at start. */
  resources: Set<string>;
  provider: Provider;
  /** Every interaction the headless login completed (what it was asked for). */
  interactions: InteractionDetails[];
  /** The raw query of every authorization request, as it arrived (parameters oidc-provider drops included). */
  authorizationRequests: URLSearchParams[];
  /** Errors oidc-provider reported (server_error, grant.error, ...), for debugging failing tests. */
  errors: unknown[];
  /** client_credentials token for `resource` (a JWT with `aud` = resource). */
  mintAccessToken(opts: { resource: string; scope?: string }): Promise<string>;
  close(): Promise<void>;
}

/** A client_credentials access token (JWT, `aud` = `resource`) from the provider's confidential client. */
export async function mintClientCredentialsToken(
  provider: Pick<OidcProviderHandle, 'tokenEndpoint' | 'confidentialClient'>,
  { resource, scope }: { resource: string; scope?: string },
): Promise<string> {
  const { client_id, client_secret } = provider.confidentialClient;
  const body = new URLSearchParams({ grant_type: 'client_credentials', resource });
  if (scope) body.set('scope', scope);
  const res = await fetch(provider.tokenEndpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString('base64')}` },
    body,
  });
  const json = (await res.json()) as { access_token?: string; error?: string; error_description?: string };
  if (!res.ok || !json.access_token) {
    throw new Error(`client_credentials failed: ${res.status} ${json.error} ${json.error_description ?? ''}`);
  }
  return json.access_token;
}

export async function startOidcProvider(opts: OidcProviderOptions): Promise<OidcProviderHandle> {
  const alg = opts.alg ?? 'ES256';
  const ttl = opts.accessTokenTtl ?? 300;
  const accountId = opts.accountId ?? 'alice';
  const resources = new Set(opts.resources);
  const scope = opts.scopes.join(' ');

  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = randomUUID();
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
  const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };

  const server = createServer();
  const port = await listen(server, opts.port ?? 0);
  const issuer = `http://127.0.0.1:${port}`;
  const confidentialClient = { client_id: 'harness-confidential', client_secret: randomBytes(24).toString('base64url') };

  const provider = new Provider(issuer, {
    jwks: { keys: [privateJwk] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    // oidc-provider only accepts scopes it knows as "static" scopes in DCR `scope` metadata,
    // and the MCP SDK registers with the resource's scopes, so they are listed here too.
    scopes: ['openid', 'offline_access', ...opts.scopes],
    clients: [
      {
        ...confidentialClient,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      ...(opts.clients ?? []),
    ],
    clientDefaults: { id_token_signed_response_alg: alg },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // no `resource` on the request: a single granted/default resource is used
        defaultResource: (_ctx: unknown, _client: unknown, oneOf?: string | string[]) =>
          (Array.isArray(oneOf) && oneOf.length === 1 ? oneOf[0] : oneOf) ?? opts.defaultResource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => {
          if (!resources.has(resource)) throw new errors.InvalidTarget();
          return { scope, audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg } } };
        },
      },
      ...opts.features,
    },
    // refresh tokens for clients registered with the refresh_token grant, without offline_access
    issueRefreshToken: (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) =>
      client.grantTypeAllowed('refresh_token'),
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    findAccount: (_ctx: unknown, sub: string) => ({
      accountId: sub,
      claims: () => ({ sub, ...(opts.accountClaims ? opts.accountClaims(sub) : { email: `${sub}@example.test`, name: sub }) }),
    }),
    claims: opts.claims ?? { openid: ['sub'], email: ['email'], profile: ['name'] },
    ...(opts.extraParams && { extraParams: opts.extraParams }),
    ...(opts.conformIdTokenClaims !== undefined && { conformIdTokenClaims: opts.conformIdTokenClaims }),
    clientBasedCORS: () => true,
    ...(opts.fetch && { fetch: opts.fetch }),
    ttl: {
      AccessToken: ttl,
      ClientCredentials: ttl,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 24 * 3600,
    },
  });

  const errs: unknown[] = [];
  for (const event of ['server_error', 'grant.error', 'registration_create.error', 'authorization.error']) {
    provider.on(event, (_ctx: unknown, err: unknown) => errs.push(err));
  }

  const interactions: InteractionDetails[] = [];
  // Logs `accountId` in, then grants exactly what the client asked for (scopes + resource).
  const interact = async (req: IncomingMessage, res: ServerResponse) => {
    const details = await provider.interactionDetails(req, res);
    interactions.push(details);
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
      return;
    }
    const grant =
      (details.grantId ? await provider.Grant.find(details.grantId) : undefined) ??
      new provider.Grant({ accountId: details.session?.accountId ?? accountId, clientId: details.params.client_id });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
    if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(missingResourceScopes ?? {})) {
      grant.addResourceScope(resource, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  };

  // Composed at the first request, so middleware a test adds with provider.use() after start-up applies.
  let callback: ReturnType<Provider['callback']> | undefined;
  const authorizationRequests: URLSearchParams[] = [];
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', issuer);
    if (url.pathname === '/auth') authorizationRequests.push(url.searchParams);
    if (!req.url?.startsWith('/interaction/')) return (callback ??= provider.callback())(req, res);
    interact(req, res).catch((err: unknown) => {
      errs.push(err);
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`interaction failed: ${String(err)}`);
    });
  });

  const handle: OidcProviderHandle = {
    issuer,
    jwksUri: provider.urlFor('jwks'),
    tokenEndpoint: provider.urlFor('token'),
    jwks: { keys: [publicJwk] },
    signingJwk: privateJwk,
    confidentialClient,
    resources,
    provider,
    interactions,
    authorizationRequests,
    errors: errs,
    mintAccessToken: (o) => mintClientCredentialsToken(handle, o),
    close: () => closeServer(server),
  };
  return handle;
}
