// Users' own accounts at routes' upstreams (user_oauth, DESIGN §8.1), built
// once per configuration: for each such route its upstream AS client, its
// connect flow and its token source; and, per user, the list /account/apps
// shows and Disconnect (RFC 7009 at the upstream where it can, then the grant
// deleted).
import type { AccountTokensConfig } from '../../config/account-tokens.js';
import { upstreamCallbackPath, upstreamClientDocumentPath } from '../../config/reserved-paths.js';
import type { RouteConfig, UserOAuthConfig } from '../../config/types.js';
import { endpointUrl, type AsContext } from '../context.js';
import { AccountTokenCipher } from './account-token-cipher.js';
import { upstreamClientDocument } from './client-metadata-document.js';
import { ConnectFlow } from './connect-flow.js';
import { ConnectLinks } from './connect-links.js';
import { upstreamAccountEvents, type UpstreamAccountEvents } from './upstream-account-events.js';
import { UpstreamGrants, type GrantOwner } from './upstream-grants.js';
import { UpstreamServer } from './upstream-server.js';
import { UpstreamTokens } from './upstream-tokens.js';

/** One route's parts. */
export interface RouteAccount {
  routePath: string;
  upstream: string;
  callbackPath: `/${string}`;
  /** Where the gateway serves its client ID metadata document for this route, and the document. */
  clientDocument: { path: `/${string}`; body: Record<string, unknown> };
  server: UpstreamServer;
  flow: ConnectFlow;
  tokens: UpstreamTokens;
}

/** An upstream account as /account/apps lists it: no token, only what the user may see. */
export interface ListedUpstreamAccount {
  routePath: string;
  upstream: string;
  scopes: string[];
  connectedAt: number;
  lastUsedAt?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;

export class UpstreamAccounts {
  readonly routes = new Map<string, RouteAccount>();
  readonly links: ConnectLinks;
  readonly grants: UpstreamGrants;
  readonly events: UpstreamAccountEvents;

  constructor(
    private readonly ctx: AsContext,
    routes: readonly RouteConfig[],
    keys: AccountTokensConfig,
    /** `allowLoopback`, `grantCacheTtlMs`: test only, never from configuration (discovery-guard.ts, upstream-grants.ts). */
    options: { timeoutMs?: number; allowLoopback?: boolean; grantCacheTtlMs?: number } = {},
  ) {
    const cipher = new AccountTokenCipher(keys.keys);
    this.grants = new UpstreamGrants(ctx.store, cipher, ctx.config.refreshTokenTtlMs, options.grantCacheTtlMs);
    this.links = new ConnectLinks(ctx.store, ctx.issuer);
    this.events = upstreamAccountEvents(ctx.audit, ctx.metrics);
    for (const route of routes) {
      if (route.upstreamAuth.kind !== 'user_oauth') continue;
      this.routes.set(route.path, this.#routeAccount(route, route.upstreamAuth, cipher, { timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS, allowLoopback: options.allowLoopback }));
    }
  }

  /** The route table that built this is closed (a reload, shutdown): the grant cache stops hearing notices. */
  close(): void {
    this.grants.close();
  }

  #routeAccount(route: RouteConfig, config: UserOAuthConfig, cipher: AccountTokenCipher, fetching: { timeoutMs: number; allowLoopback?: boolean }): RouteAccount {
    const callbackPath = upstreamCallbackPath(route.path);
    const redirectUri = endpointUrl(this.ctx.issuer, callbackPath);
    const documentPath = upstreamClientDocumentPath(route.path);
    const clientDocumentUrl = endpointUrl(this.ctx.issuer, documentPath);
    const { store } = this.ctx;
    const server = new UpstreamServer({ routePath: route.path, upstream: route.upstream, config, redirectUri, clientDocumentUrl, store, cipher, ...fetching, logger: this.ctx.logger });
    const flow = new ConnectFlow({ routePath: route.path, server, grants: this.grants, store, cipher, redirectUri, resource: config.resource });
    const tokens = new UpstreamTokens({ routePath: route.path, resource: config.resource, server, grants: this.grants, store, events: this.events, connectLink: (owner) => this.links.linkFor(owner) });
    const clientDocument = { path: documentPath, body: upstreamClientDocument(clientDocumentUrl, redirectUri) };
    return { routePath: route.path, upstream: route.upstream, callbackPath, clientDocument, server, flow, tokens };
  }

  /** The upstream accounts one user of this AS has connected, in route order. */
  async list(subject: string): Promise<ListedUpstreamAccount[]> {
    const listed: ListedUpstreamAccount[] = [];
    for (const route of this.routes.values()) {
      const owner = { issuer: this.ctx.issuer, subject, routePath: route.routePath };
      const grant = await this.grants.load(owner);
      if (!grant) continue;
      listed.push({ routePath: route.routePath, upstream: route.upstream, scopes: grant.scopes, connectedAt: grant.connectedAt, lastUsedAt: await this.grants.lastUsed(owner) });
    }
    return listed;
  }

  /** Revokes at the upstream AS (RFC 7009) where it has an endpoint, then deletes the grant. False: there was none. */
  async disconnect(owner: GrantOwner): Promise<boolean> {
    const route = this.routes.get(owner.routePath);
    const grant = route && (await this.grants.load(owner));
    if (!route || !grant) return false;
    await this.#revokeUpstream(route, owner, grant.asIssuer, grant.refreshToken ?? grant.accessToken, grant.refreshToken ? 'refresh_token' : 'access_token');
    await this.grants.delete(owner);
    this.events.record('disconnected', owner);
    return true;
  }

  /** Best effort: a revocation the AS refuses or cannot take is audited; the grant goes either way. */
  async #revokeUpstream(route: RouteAccount, owner: GrantOwner, asIssuer: string, token: string, hint: 'refresh_token' | 'access_token'): Promise<void> {
    await route.server.revoke(asIssuer, token, hint).catch(() => this.events.record('revocation_failed', owner));
  }

}
