// The gateway as an OAuth client of one route's upstream authorization server
// (user_oauth), through oauth4webapi. Where the AS is: configured endpoints
// (an AS without metadata, GitHub), else its issuer's RFC 8414 / OpenID
// metadata, the issuer configured or discovered from the upstream's 401 and
// its RFC 9728 metadata. Which client: the configured one, else one registered
// there (RFC 7591) once and kept in the store for every user and replica.
// Every request has a deadline and follows no redirect; errors say what failed,
// never what the AS answered (an answer may carry tokens). What the upstream's
// answers chose (its AS, that AS's endpoints) goes through the discovery guard.
import * as oauth from 'oauth4webapi';
import type { UserOAuthConfig } from '../../config/types.js';
import type { Logger } from '../../observability/logger.js';
import { upstreamClientKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { AccountTokenCipher } from './account-token-cipher.js';
import { clientDocumentUsable, UPSTREAM_CLIENT_NAME } from './client-metadata-document.js';
import { DiscoveredUrlRefused, DiscoveryGuard } from './discovery-guard.js';
import { UpstreamAsError } from './upstream-as-error.js';
import { bounded } from './upstream-answers.js';

export { UpstreamAsError };

/** What one flow needs: where, as whom, and how the client authenticates. */
export interface UpstreamClient {
  server: oauth.AuthorizationServer;
  client: oauth.Client;
  auth: oauth.ClientAuth;
  /** Scopes to ask for: configured, else what the upstream's RFC 9728 metadata lists. */
  scopes: readonly string[];
  insecure: boolean;
}

export interface UpstreamServerOptions {
  routePath: string;
  /** The route's upstream URL: asked without a token to learn where its metadata is. */
  upstream: string;
  config: UserOAuthConfig;
  /** This route's callback at the gateway: the one redirect URI registered. */
  redirectUri: string;
  /** The URL of this route's client ID metadata document at the gateway. */
  clientDocumentUrl: string;
  store: Store;
  cipher: AccountTokenCipher;
  timeoutMs: number;
  logger?: Logger;
  /** Test only, never from configuration: discovered loopback addresses (and http to them) pass the guard. */
  allowLoopback?: boolean;
}

/** Metadata and a registration are looked up again after this long. */
const RESOLVED_TTL_MS = 3600_000;
/** A registration is kept this long in the store (renewed when used after a reload). */
const REGISTRATION_TTL_MS = 365 * 24 * 3600_000;

export class UpstreamServer {
  #resolved: { at: number; value: Promise<UpstreamClient> } | undefined;
  /** The dynamic registration in use, as kept in the store: what `forgetRegistration` may drop. */
  #registration: { key: string; sealed: string; clientId: string } | undefined;
  /** The issuer of the last resolve that succeeded: what a grant's issuer is compared with without waiting for discovery. */
  #knownIssuer: string | undefined;
  readonly #guard: DiscoveryGuard;

  constructor(private readonly o: UpstreamServerOptions) {
    this.#guard = new DiscoveryGuard({ upstream: o.upstream, config: o.config, timeoutMs: o.timeoutMs, allowLoopback: o.allowLoopback });
  }

  /** The AS and client, discovered and registered at most once an hour (a failure is retried on the next call). */
  resolve(): Promise<UpstreamClient> {
    if (this.#resolved && Date.now() - this.#resolved.at < RESOLVED_TTL_MS) return this.#resolved.value;
    const value = this.#resolve();
    this.#resolved = { at: Date.now(), value };
    value.then(
      (resolved) => (this.#knownIssuer = resolved.server.issuer),
      (err: unknown) => {
        if (this.#resolved?.value === value) this.#resolved = undefined;
        if (err instanceof DiscoveredUrlRefused) this.o.logger?.warn({ route: this.o.routePath, reason: err.message }, 'user_oauth: a URL the upstream named was refused and not fetched');
      },
    );
    return value;
  }

  /** The AS's issuer: configured, else the one discovery found last (undefined before the first discovery). */
  knownIssuer(): string | undefined {
    return this.configuredIssuer() ?? this.#knownIssuer;
  }

  /** The AS's issuer where the configuration fixes it (`issuer`, or the explicit endpoints' origin); undefined: discovered. */
  configuredIssuer(): string | undefined {
    const { config } = this.o;
    return config.issuer ?? (config.endpoints && new URL(config.endpoints.authorization).origin);
  }

  /** The longest a resolve (at most five requests: challenge, resource metadata, two AS metadata, registration) and one token request take. */
  worstCaseMs(): number {
    return 6 * this.o.timeoutMs;
  }

  /** RFC 8707 `resource` for the AS, unless `send_resource: false`. */
  resourceParameter(resource: string): Record<string, string> {
    return this.o.config.sendResource ? { resource } : {};
  }

  requestOptions(insecure: boolean) {
    return { signal: AbortSignal.timeout(this.o.timeoutMs), [oauth.allowInsecureRequests]: insecure, [oauth.customFetch]: this.#guard.fetch };
  }

  async #resolve(): Promise<UpstreamClient> {
    const { config } = this.o;
    const found = config.endpoints ? { server: explicitServer(config), scopes: [] as string[] } : await this.#discover();
    const insecure = [found.server.authorization_endpoint, found.server.token_endpoint].some((u) => u !== undefined && new URL(u).protocol === 'http:');
    const scopes = config.scopes.length > 0 ? config.scopes : found.scopes;
    if (config.clientId) {
      const client = { client_id: config.clientId };
      return { server: found.server, client, auth: clientAuth(found.server, config.clientSecret), scopes, insecure };
    }
    if (clientDocumentUsable(found.server, this.o.clientDocumentUrl)) return { server: found.server, client: { client_id: this.o.clientDocumentUrl }, auth: oauth.None(), scopes, insecure };
    const client = await this.#registered(found.server, insecure);
    return { server: found.server, client, auth: oauth.None(), scopes, insecure };
  }

  /**
   * RFC 7009 at the AS that issued `token` (`asIssuer`), where it has a revocation endpoint (false:
   * none). Throws when the AS refuses or cannot be reached, or now is another AS: a token never
   * goes to an AS that did not issue it.
   */
  async revoke(asIssuer: string, token: string, hint: 'refresh_token' | 'access_token'): Promise<boolean> {
    const { server, client, auth, insecure } = await this.resolve();
    if (!server.revocation_endpoint) return false;
    if (server.issuer !== asIssuer) throw new UpstreamAsError('the token is from another authorization server than the upstream now names');
    const response = await oauth.revocationRequest(server, client, auth, token, { ...this.requestOptions(insecure), additionalParameters: { token_type_hint: hint } });
    await oauth.processRevocationResponse(response);
    return true;
  }

  /** The issuer (configured, else from the upstream's 401 → RFC 9728), then its metadata. */
  async #discover(): Promise<{ server: oauth.AuthorizationServer; scopes: string[] }> {
    const resource = this.o.config.issuer ? undefined : await this.#resourceMetadata();
    const issuer = this.o.config.issuer ?? resource?.authorization_servers?.[0];
    if (!issuer) throw new UpstreamAsError("the upstream's metadata names no authorization server");
    if (!this.o.config.issuer) this.#guard.check(issuer, "the authorization server the upstream's metadata names,");
    const discovered = await this.#asMetadata(issuer);
    // A configured AS's metadata is trusted as the configuration is; a discovered one's endpoints are checked.
    if (this.o.config.issuer) this.#guard.trust(endpointsOf(discovered));
    else for (const [name, url] of Object.entries(endpointsOf(discovered))) this.#guard.check(url, `the authorization server's ${name}`);
    const revocation = this.o.config.revocationEndpoint;
    const server = revocation ? { ...discovered, revocation_endpoint: revocation } : discovered;
    return { server, scopes: resource?.scopes_supported ?? [] };
  }

  async #resourceMetadata(): Promise<oauth.ResourceServer> {
    const insecure = new URL(this.o.upstream).protocol === 'http:';
    const metadataUrl = await this.#challengedMetadataUrl();
    try {
      const response = metadataUrl
        ? await fetch(metadataUrl, { headers: { accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(this.o.timeoutMs) })
        : await oauth.resourceDiscoveryRequest(new URL(this.o.config.resource), this.requestOptions(insecure));
      return await oauth.processResourceDiscoveryResponse(new URL(this.o.config.resource), await bounded(response));
    } catch (err) {
      throw new UpstreamAsError(`cannot read the upstream's protected resource metadata (RFC 9728): ${safeReason(err)}`);
    }
  }

  /** `resource_metadata` of the upstream's 401 challenge to a request without a token; undefined: none (the well-known URL then). */
  async #challengedMetadataUrl(): Promise<URL | undefined> {
    let response: Response;
    try {
      response = await fetch(this.o.upstream, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'ping' }),
        redirect: 'manual',
        signal: AbortSignal.timeout(this.o.timeoutMs),
      });
    } catch (err) {
      throw new UpstreamAsError(`the upstream is unreachable: ${safeReason(err)}`);
    }
    await response.body?.cancel();
    const challenge = response.headers.get('www-authenticate') ?? '';
    const named = /resource_metadata="([^"]+)"/i.exec(challenge)?.[1];
    if (response.status !== 401 || !named || !URL.canParse(named)) return undefined;
    const url = new URL(named);
    // The metadata must come from the upstream's own origin: a challenge cannot send the gateway elsewhere.
    return url.origin === new URL(this.o.upstream).origin ? url : undefined;
  }

  async #asMetadata(issuer: string): Promise<oauth.AuthorizationServer> {
    const issuerUrl = new URL(issuer);
    const insecure = issuerUrl.protocol === 'http:';
    let mismatch = false;
    for (const algorithm of ['oauth2', 'oidc'] as const) {
      try {
        const response = await oauth.discoveryRequest(issuerUrl, { algorithm, ...this.requestOptions(insecure) });
        return await oauth.processDiscoveryResponse(issuerUrl, await bounded(response));
      } catch (err) {
        if (err instanceof DiscoveredUrlRefused) throw err;
        mismatch ||= err instanceof oauth.OperationProcessingError && err.code === oauth.JSON_ATTRIBUTE_COMPARISON;
        // the other well-known document next
      }
    }
    // RFC 8414 §3.3: metadata whose issuer is not the one it was fetched for is not used.
    if (mismatch) throw new DiscoveredUrlRefused(`the authorization server metadata at ${issuerUrl.origin} names another issuer than ${issuer} (RFC 8414 §3.3)`);
    throw new UpstreamAsError('cannot read the upstream authorization server metadata (RFC 8414 or OpenID)');
  }

  /** The registration kept in the store, else a new one (the first replica's wins). */
  async #registered(server: oauth.AuthorizationServer, insecure: boolean): Promise<oauth.Client> {
    const key = upstreamClientKey(this.o.routePath, server.issuer);
    const kept = await this.#keptClient(key);
    if (kept) return kept;
    if (!server.registration_endpoint) throw new UpstreamAsError('the upstream authorization server offers no dynamic registration: set upstream_auth.client_id');
    let client: oauth.Client;
    try {
      const metadata = { redirect_uris: [this.o.redirectUri], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none', client_name: UPSTREAM_CLIENT_NAME };
      const response = await oauth.dynamicClientRegistrationRequest(server, metadata, this.requestOptions(insecure));
      client = { client_id: (await oauth.processDynamicClientRegistrationResponse(response)).client_id };
    } catch (err) {
      throw new UpstreamAsError(`dynamic registration at the upstream authorization server failed: ${safeReason(err)}`);
    }
    const sealed = this.o.cipher.seal(key, JSON.stringify(client));
    if (await this.o.store.setIfAbsent(key, sealed, REGISTRATION_TTL_MS)) {
      this.#registration = { key, sealed, clientId: client.client_id };
      return client;
    }
    return (await this.#keptClient(key)) ?? client;
  }

  async #keptClient(key: string): Promise<oauth.Client | undefined> {
    const sealed = await this.o.store.get(key);
    const text = sealed === undefined ? undefined : this.o.cipher.open(key, sealed);
    if (sealed === undefined || text === undefined) return undefined;
    const client = JSON.parse(text) as oauth.Client;
    this.#registration = { key, sealed, clientId: client.client_id };
    return client;
  }

  /**
   * The AS answered `invalid_client` to `clientId`: if that is the kept dynamic
   * registration, it is forgotten (compare-and-set, so one replica drops it
   * once and a newer registration stays) and the next flow registers again.
   */
  async forgetRegistration(clientId: string): Promise<void> {
    const registration = this.#registration;
    if (!registration || registration.clientId !== clientId) return;
    this.#registration = undefined;
    this.#resolved = undefined;
    await this.o.store.compareAndSet(registration.key, registration.sealed, undefined, REGISTRATION_TTL_MS);
  }
}

/** The endpoints an AS's metadata names that the gateway or the browser is sent to. */
function endpointsOf(server: oauth.AuthorizationServer): Record<string, string> {
  const named = { authorization_endpoint: server.authorization_endpoint, token_endpoint: server.token_endpoint, registration_endpoint: server.registration_endpoint, revocation_endpoint: server.revocation_endpoint };
  return Object.fromEntries(Object.entries(named).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** An AS without metadata: its issuer is taken as the authorization endpoint's origin, only to check an RFC 9207 `iss` it might send. */
function explicitServer(config: UserOAuthConfig): oauth.AuthorizationServer {
  const endpoints = config.endpoints!;
  return {
    issuer: config.issuer ?? new URL(endpoints.authorization).origin,
    authorization_endpoint: endpoints.authorization,
    token_endpoint: endpoints.token,
    ...(config.revocationEndpoint && { revocation_endpoint: config.revocationEndpoint }),
  };
}

/** client_secret_basic unless the AS lists only client_secret_post; no secret: a public client. */
function clientAuth(server: oauth.AuthorizationServer, secret: string | undefined): oauth.ClientAuth {
  if (!secret) return oauth.None();
  const methods = server.token_endpoint_auth_methods_supported;
  return methods && !methods.includes('client_secret_basic') && methods.includes('client_secret_post') ? oauth.ClientSecretPost(secret) : oauth.ClientSecretBasic(secret);
}

/** The kind of failure, never the AS's answer: oauth4webapi's errors carry response bodies. */
export function safeReason(err: unknown): string {
  if (err instanceof UpstreamAsError) return err.message;
  if (err instanceof oauth.ResponseBodyError) return `the server answered ${err.status} ${/^[a-z_]{1,64}$/.test(err.error) ? err.error : 'error'}`;
  if (err instanceof oauth.AuthorizationResponseError) return 'the authorization server answered with an error';
  if (err instanceof oauth.OperationProcessingError) return `invalid answer (${err.code ?? 'unexpected'})`;
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timed out';
  return 'network error';
}
