// The gateway as its own OAuth 2.1 authorization server: built once per
// configuration load from the GatewayConfig, mounted at the host root.
import { Hono, type Context } from 'hono';
import type { AuthorizationServerConfig, GatewayConfig, RouteConfig } from '../config/types.js';
import { refuseDevLogin } from '../config/dev-login-placement.js';
import { upstreamRoutes } from '../config/upstreams.js';
import { errorResponse } from '../errors/respond.js';
import { toGatewayError } from '../errors/translate.js';
import type { TokenVerifier } from '../auth/verifier.js';
import { createAudit, type Audit } from '../observability/audit.js';
import type { Logger } from '../observability/logger.js';
import { Metrics, type AuthorizationServerMetrics } from '../observability/metrics.js';
import type { StoreClock } from '../store/store-clock.js';
import type { Store } from '../store/store.js';
import type { IdpTokenSource, JwtSigner } from '../upstream-auth/upstream-credential.js';
import { accountRoutes, accountSignIn } from './endpoints/account-apps.js';
import { authorizeRoutes } from './endpoints/authorize.js';
import { AccountSessions } from './interactions/account-sessions.js';
import { isAccountSignIn } from './interactions/account-sign-in.js';
import { UserConsents } from './interactions/user-consents.js';
import { ConnectedApps } from './tokens/connected-apps.js';
import { BrowserBinding } from './interactions/browser-binding.js';
import { createBuiltinVerifier } from './tokens/builtin-verifier.js';
import { ClientMetadataDocuments } from './clients/client-id-metadata-document.js';
import { ClientRegistry } from './clients/client-registry.js';
import { AuthorizationCodes, CODE_TTL_MS } from './tokens/codes.js';
import { createCompletion } from './authorization/complete-authorization.js';
import { SignInShare, signInShareLimit } from './tokens/sign-in-share.js';
import { consentRoutes } from './endpoints/consent.js';
import { ConsentMemory } from './interactions/consent-memory.js';
import type { AsContext } from './context.js';
import { Grants, REFRESH_RETRY_GRACE_MS } from './tokens/grants.js';
import { Interactions } from './interactions/interactions.js';
import { PendingAuthorizationBudget } from './interactions/pending-authorization-budget.js';
import { jwksRoutes } from './endpoints/jwks.js';
import { loadSigningKeys } from './keys/signing-keys.js';
import { devLogin } from './login/dev-login.js';
import { oauth2Login } from './login/oauth2-login.js';
import { oidcLogin } from './login/oidc-login.js';
import type { LoginMethod, LoginMethodFactory, LoginServices } from './login/login-method.js';
import { metadataRoutes } from './endpoints/metadata.js';
import { ACCOUNT_FLOOD_LIMITED_PATH, FLOOD_LIMITED_PATHS, floodLimits } from './endpoints/flood-limits.js';
import { errorPage, guarded } from './pages/respond-page.js';
import { RateLimiter, type RateLimit } from './helpers/rate-limit.js';
import { registerRoutes } from './endpoints/register.js';
import { revokeRoutes } from './endpoints/revoke.js';
import { RevokedGrants } from './tokens/revoked-grants.js';
import { createSafeFetcher, type SafeFetchOptions } from './helpers/safe-fetch.js';
import { tokenRoutes } from './endpoints/token.js';
import { tokenRequestProof } from './tokens/token-dpop.js';
import { dpopMarkerShare, dpopProofClaimer, type DpopClaimRules } from '../auth/dpop-replay.js';
import { proofJtiTtlMs } from '../auth/dpop-proof.js';
import { maxClockSkewMs } from '../config/replica-clocks.js';
import { JwksRegistry } from '../auth/jwks.js';
import { enterpriseIdps, type EnterpriseIdps } from './idp/enterprise-idps.js';
import { createDpopNonces, type DpopNonces } from '../auth/dpop-nonce.js';
import { UpstreamAccounts } from './upstream-accounts/upstream-accounts.js';
import { upstreamConnectRoutes } from './endpoints/upstream-connect.js';
import { connectAtConsent, resumeAfterConnect } from './authorization/connect-at-consent.js';
import { CONNECTED_RESUME_PATH } from '../config/reserved-paths.js';
import type { UpstreamAccountSource } from '../upstream-auth/upstream-credential.js';

export interface AuthorizationServerOptions {
  /** Test only, never from configuration: SSRF guard settings for Client ID Metadata Document fetches (and `allowLoopback` for user_oauth's discovered URLs). */
  safeFetch?: SafeFetchOptions;
  /** Successful registrations per client address; default: `authorization_server.rate_limits.registrations`. */
  registrationRateLimit?: RateLimit;
  /** Where a dev signing key is kept; default `<cwd>/.dev-keys`. */
  devKeyDirectory?: string;
  /** Test only: a shorter authorization code lifetime (default and maximum 60 s). */
  codeTtlMs?: number;
  /** Test only: a shorter grace for a refresh retried after a lost answer (default and maximum 30 s). */
  refreshRetryGraceMs?: number;
  /** Deadline of one request to a user_oauth route's upstream or its AS; default 10 s. */
  upstreamTimeoutMs?: number;
  /** Login methods by `login.kind`; `dev` is built in. */
  loginMethods?: Partial<Record<string, LoginMethodFactory>>;
}

export interface AuthorizationServerDeps {
  store: Store;
  logger: Logger;
  audit?: Audit;
  /** Token, consent and revocation counters (default: counted nowhere). */
  metrics?: AuthorizationServerMetrics;
  /** The gateway's key sets of external issuers, kept across reloads (default: one of its own): the enterprise IdPs' keys. */
  jwks?: JwksRegistry;
  /** The clock DPoP proofs at /token are judged by: the store's, as at the routes (default: this process's). */
  clock?: Pick<StoreClock, 'nowSeconds'>;
  options?: AuthorizationServerOptions;
}

export interface AuthorizationServer {
  /** Metadata, JWKS, /register, /authorize (+ consent and login pages), /token, /revoke. */
  routes: Hono;
  /** Verifies this AS's access tokens for a route (typ at+jwt, aud = the route's resource). */
  builtinVerifier: (route: RouteConfig) => TokenVerifier;
  /** Signs with the AS key (for `upstream_auth: signed`). */
  signer: JwtSigner;
  /** Users' IdP access tokens (for `upstream_auth: idp_token`); only with a third-party login. */
  idpTokens?: IdpTokenSource;
  /** Users' own upstream grants of a `user_oauth` route (with the account page and account_tokens). */
  upstreamAccounts?: (routePath: string) => UpstreamAccountSource | undefined;
  issuer: string;
  /** The DPoP nonces /token hands out; the protected routes hand out the same ones (one nonce per gateway). */
  dpopNonces: DpopNonces;
  close(): Promise<void>;
}

const MIN_REGISTRATION_TTL_MS = 30 * 24 * 3600_000;
const BUILTIN_LOGIN_METHODS: Record<string, LoginMethodFactory> = { dev: devLogin, oidc: oidcLogin, oauth2: oauth2Login };

export async function createAuthorizationServer(config: GatewayConfig, deps: AuthorizationServerDeps): Promise<AuthorizationServer> {
  const asConfig = config.authorizationServer;
  if (!asConfig) throw new Error('the built-in authorization server is not enabled');
  const options = deps.options ?? {};
  const loginFactory = loginMethodFactory(config, asConfig, options);
  const ctx = await createContext(config, asConfig, deps);

  const fetcher = asConfig.clientIdMetadataDocuments ? createSafeFetcher(options.safeFetch) : undefined;
  const clients = new ClientRegistry({
    store: deps.store,
    staticClients: asConfig.clients ?? [],
    documents: fetcher && new ClientMetadataDocuments(fetcher),
    registrationTtlMs: Math.max(MIN_REGISTRATION_TTL_MS, asConfig.refreshTokenTtlMs),
  });
  const codes = new AuthorizationCodes(deps.store, Math.min(options.codeTtlMs ?? CODE_TTL_MS, CODE_TTL_MS));
  const revokedGrants = new RevokedGrants({ store: deps.store, issuer: ctx.issuer, accessTokenTtlMs: asConfig.accessTokenTtlMs, logger: deps.logger, metrics: ctx.metrics });
  // The first read is awaited, so a new replica knows the revocations made before it started.
  await revokedGrants.start();
  const grants = createGrants(ctx, revokedGrants, Math.min(options.refreshRetryGraceMs ?? REFRESH_RETRY_GRACE_MS, REFRESH_RETRY_GRACE_MS));
  const interactions = new Interactions(deps.store);
  const browser = new BrowserBinding(ctx.keys.cookieSecret);
  const account = asConfig.accountPage ? createAccount(ctx, grants, browser) : undefined;
  const upstreamAccounts = account && config.accountTokens ? new UpstreamAccounts(ctx, config.routes.flatMap(upstreamRoutes), config.accountTokens, { timeoutMs: options.upstreamTimeoutMs, allowLoopback: options.safeFetch?.allowLoopback }) : undefined;
  const signInShare = new SignInShare(deps.store, ctx.issuer, signInShareLimit(config.store), asConfig.refreshTokenTtlMs);
  const services = loginServices(ctx, { codes, clients, grants, interactions, browser, signInShare }, account, upstreamAccounts);
  const login = loginFactory(ctx, services);
  const idps = enterpriseIdps(asConfig.enterpriseIdps, deps.jwks ?? new JwksRegistry());
  const parts: EndpointParts = { clients, codes, grants, interactions, browser, consents: new ConsentMemory(ctx.keys.cookieSecret), login, services, account, idps, dpopProofs: tokenProofRules(config, deps), signInShare, upstreamAccounts };

  return {
    routes: mountEndpoints(ctx, parts, options),
    builtinVerifier: createBuiltinVerifier(ctx.issuer, ctx.keys, revokedGrants),
    signer: ctx.keys.signer,
    idpTokens: login.idpTokens,
    upstreamAccounts: upstreamAccounts && ((routePath) => upstreamAccounts.routes.get(routePath)?.tokens),
    issuer: ctx.issuer,
    dpopNonces: ctx.dpopNonces,
    close: async () => {
      revokedGrants.close();
      upstreamAccounts?.close();
      await fetcher?.close();
    },
  };
}

/** DPoP at /token as at the routes: the same share, marker life and clock. */
function tokenProofRules(config: GatewayConfig, { clock }: AuthorizationServerDeps): EndpointParts['dpopProofs'] {
  const nowSeconds = clock ? () => clock.nowSeconds() : () => Math.floor(Date.now() / 1000);
  return { share: dpopMarkerShare(config.store), markerTtlMs: proofJtiTtlMs(maxClockSkewMs(config.store)), nowSeconds };
}

/** The factory of the configured `login.kind`; a dev login is refused on a gateway reachable from elsewhere. */
function loginMethodFactory(config: GatewayConfig, asConfig: AuthorizationServerConfig, options: AuthorizationServerOptions): LoginMethodFactory {
  // Also checked when the configuration is resolved; a config built in code comes here directly.
  const devLoginRefusal = asConfig.login.kind === 'dev' ? refuseDevLogin(config.publicUrl, config.host) : undefined;
  if (devLoginRefusal) throw new Error(devLoginRefusal);
  const loginFactory = { ...BUILTIN_LOGIN_METHODS, ...options.loginMethods }[asConfig.login.kind];
  if (!loginFactory) throw new Error(`authorization_server.login.kind ${asConfig.login.kind} is not available in this build`);
  return loginFactory;
}

async function createContext(config: GatewayConfig, asConfig: AuthorizationServerConfig, deps: AuthorizationServerDeps): Promise<AsContext> {
  const keys = await loadSigningKeys({ configured: asConfig.signingKey, publicUrl: config.publicUrl, devKeyDirectory: deps.options?.devKeyDirectory });
  if (keys.devKeyFile) deps.logger.warn({ file: keys.devKeyFile }, 'built-in authorization server: using a development signing key');
  const resources = new Map<string, RouteConfig>();
  for (const route of config.routes) if (route.token.kind === 'builtin') resources.set(route.resource, route);
  return {
    issuer: asConfig.issuer,
    config: asConfig,
    resources,
    trustProxy: config.trustProxy,
    keys,
    // Every replica derives the same key, so each accepts the others' nonces.
    dpopNonces: createDpopNonces(config.dpopNonceKey ?? keys.cookieSecret),
    store: deps.store,
    logger: deps.logger,
    audit: deps.audit ?? createAudit(config.auditSink),
    metrics: deps.metrics ?? new Metrics({ defaultMetrics: false }),
  };
}

function createGrants(ctx: AsContext, revokedGrants: RevokedGrants, retryGraceMs: number): Grants {
  const grants = new Grants(ctx.store, ctx.config.refreshTokenTtlMs, revokedGrants, { retryGraceMs });
  // Audited and counted here, once, whoever revokes: the client, reuse detection, a code replay or the IdP.
  grants.onRevoke((_grantId, reason, revoked) => {
    ctx.audit.record({ event: 'grant_revoked', reason, sub: revoked.subject, token: revoked.token, client_id: revoked.clientId });
    ctx.metrics.grantsRevoked.labels(reason).inc();
  });
  return grants;
}

/** The connected-apps page's parts (`account.enabled`): the per-user index of apps, kept current by every issue, and its sessions. */
interface AccountParts {
  apps: ConnectedApps;
  sessions: AccountSessions;
  signIn: ReturnType<typeof accountSignIn>;
}

function createAccount(ctx: AsContext, grants: Grants, browser: BrowserBinding): AccountParts {
  const apps = new ConnectedApps(ctx.store, ctx.issuer, ctx.config.refreshTokenTtlMs);
  // "Last used": best effort, a failed write never fails the /token request that issued.
  grants.onIssue((grant) =>
    apps.used(grant.subject, grant.clientId).catch((err: unknown) => ctx.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'connected apps: cannot record the last use')),
  );
  const sessions = new AccountSessions(ctx.store, browser);
  return { apps, sessions, signIn: accountSignIn(ctx, { sessions, browser }) };
}

type LoginParts = Pick<EndpointParts, 'codes' | 'clients' | 'grants' | 'interactions' | 'browser'> & { signInShare: SignInShare };

/** What a login method is given: the interaction and browser, and how to end (complete or fail); an account sign-in ends on the account page. */
function loginServices(ctx: AsContext, parts: LoginParts, account: AccountParts | undefined, accounts: UpstreamAccounts | undefined): LoginServices {
  const connectFirst = accounts && connectAtConsent(ctx, { accounts, interactions: parts.interactions, browser: parts.browser });
  const completion = createCompletion(ctx, { codes: parts.codes, clients: parts.clients, grants: parts.grants, signInShare: parts.signInShare, apps: account?.apps, connectFirst });
  return {
    interactions: parts.interactions,
    browser: parts.browser,
    basePath: `/authorize/login/${ctx.config.login.kind}`,
    selfOrigin: new URL(ctx.issuer).origin,
    complete: (c, interaction, user) => (isAccountSignIn(interaction.request) ? (account?.signIn.signedIn(c, interaction, user) ?? accountPageOff(c)) : completion.complete(c, interaction, user)),
    fail: (c, interaction, error, description) => (isAccountSignIn(interaction.request) ? (account?.signIn.failed(c) ?? accountPageOff(c)) : completion.fail(c, interaction, error, description)),
    errorPage,
    grants: parts.grants,
  };
}

/** A sign-in to the account page that a reload switched off while it was under way. */
const accountPageOff = (c: Context) => errorPage(c, 404, 'Not found', 'The connected-apps page is not enabled on this gateway.');

interface EndpointParts {
  clients: ClientRegistry;
  codes: AuthorizationCodes;
  grants: Grants;
  interactions: Interactions;
  browser: BrowserBinding;
  consents: ConsentMemory;
  login: LoginMethod;
  services: LoginServices;
  account?: AccountParts;
  idps: EnterpriseIdps;
  /** How /token checks and spends DPoP proofs: each user's share of replay markers, their life, the clock (auth/dpop-replay.ts). */
  dpopProofs: DpopClaimRules;
  /** Each user's share of sign-ins (tokens/sign-in-share.ts). */
  signInShare: SignInShare;
  upstreamAccounts?: UpstreamAccounts;
}

/** Every endpoint at the host root, behind the flood limits, with one error handler. */
function mountEndpoints(ctx: AsContext, parts: EndpointParts, options: AuthorizationServerOptions): Hono {
  const { clients, codes, grants, interactions, browser, consents, login, services } = parts;
  const pendingBudget = new PendingAuthorizationBudget(ctx, ctx.store, ctx.config.rateLimits.pendingAuthorizations);
  const routes = new Hono();
  routes.onError((err) => {
    const error = toGatewayError(err, { storeUnavailable: 'The authorization server is temporarily unavailable' });
    if (error.status >= 500) ctx.logger.warn({ err: error.cause ?? err, status: error.status }, 'authorization server request failed');
    return errorResponse(error);
  });
  // Before every handler: a request over its limit reads no body and writes nothing.
  const limitFloods = floodLimits(ctx, ctx.store, ctx.config.rateLimits);
  for (const path of FLOOD_LIMITED_PATHS) routes.use(path, limitFloods);
  if (parts.account) routes.use(ACCOUNT_FLOOD_LIMITED_PATH, limitFloods);
  routes.route('/', metadataRoutes(ctx));
  routes.route('/', jwksRoutes(ctx));
  if (ctx.config.dynamicRegistration) {
    const rateLimiter = new RateLimiter(ctx.store, 'register', options.registrationRateLimit ?? ctx.config.rateLimits.registrations);
    routes.route('/', registerRoutes(ctx, { clients, rateLimiter }));
  }
  routes.route('/', authorizeRoutes(ctx, { clients, interactions, pendingBudget, browser, consents, login }));
  routes.route('/', consentRoutes(ctx, { clients, interactions, browser, consents, login, services, selfOrigin: services.selfOrigin }));
  routes.route('/', login.routes());
  routes.route('/', tokenRoutes(ctx, { clients, codes, grants, enterpriseIdps: parts.idps, signInShare: parts.signInShare }, tokenRequestProof(ctx, dpopProofClaimer(ctx.store, parts.dpopProofs), parts.dpopProofs.nowSeconds)));
  routes.route('/', revokeRoutes(ctx, { clients, grants }));
  if (parts.account) {
    const { apps, sessions } = parts.account;
    const userConsents = new UserConsents(ctx.store, ctx.issuer);
    const { upstreamAccounts } = parts;
    routes.route('/', accountRoutes(ctx, { apps, sessions, browser, interactions, pendingBudget, userConsents, grants, login, selfOrigin: services.selfOrigin, upstreamAccounts }));
    if (upstreamAccounts) {
      routes.route('/', upstreamConnectRoutes(ctx, { sessions, browser, interactions, pendingBudget, login, selfOrigin: services.selfOrigin, accounts: upstreamAccounts }));
      const resume = resumeAfterConnect({ interactions, browser }, services.complete);
      routes.get(CONNECTED_RESUME_PATH, (c) => guarded(c, () => resume(c)));
    }
  }
  return routes;
}
