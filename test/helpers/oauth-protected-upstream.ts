/**
 * A remote MCP server that wants its users' own tokens: the MCP TypeScript SDK's McpServer
 * (stateless Streamable HTTP) behind a bearer check of access tokens issued by a real
 * oidc-provider (its own AS: resource indicators, short access-token lifetime, refresh tokens,
 * revocation), answering 401 with an RFC 9728 `resource_metadata` challenge and serving that
 * metadata. Its tool `whoami` answers the `sub` of the token it was called with; every token the
 * server saw is recorded with that `sub`, so a test can say whose token came with which request.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { chooseIdpLogin, onIdpTokens } from './gateway-idp.js';
import { closeServer, listen } from './net.js';
import { startOidcProvider, type OidcProviderHandle, type OidcProviderOptions } from './oidc-provider.js';

export const UPSTREAM_SCOPES = ['files:read'];

export interface SeenCall {
  /** The token's `sub` at the upstream AS. */
  sub: string;
  token: string;
  /** When the upstream received it (epoch ms). */
  at: number;
}

export interface OAuthProtectedUpstream {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  as: OidcProviderHandle;
  /** Every request with a valid token, in order. */
  seen: SeenCall[];
  /** Requests refused 401 (no token, an invalid or expired one). */
  refused: number;
  /** Every access and refresh token the AS handed out (to look for them where they must not be). */
  issuedTokens: Set<string>;
  /** Every call to the AS's revocation endpoint (RFC 7009): its status and the token type hint sent. */
  revocations: string[];
  /** Refresh-token grants the AS answered. */
  refreshes: number;
  /** Tokens of an account issued (iat) before the time given (ms) are answered 401, as an upstream that revoked them would. */
  refuseIssuedBefore: Map<string, number>;
  /** The account the AS's headless login signs in next; undefined: the user declines (access_denied). */
  signInAs(account: string | undefined): void;
  close(): Promise<void>;
}

/** `as`: more of the AS's settings (e.g. client ID metadata documents enabled, and the `fetch` that reaches them). */
export async function startOAuthProtectedUpstream(opts: { accessTokenTtl: number; as?: Pick<OidcProviderOptions, 'features' | 'fetch'> }): Promise<OAuthProtectedUpstream> {
  const server = createServer();
  const port = await listen(server);
  const url = `http://127.0.0.1:${port}/mcp`;
  const as = await startOidcProvider({ resources: [url], scopes: UPSTREAM_SCOPES, accessTokenTtl: opts.accessTokenTtl, ...opts.as });
  let account: string | undefined;
  chooseIdpLogin(as, () => (account === undefined ? { error: 'access_denied', error_description: 'the user declined' } : { accountId: account }));
  const handle: OAuthProtectedUpstream = {
    url,
    as,
    seen: [],
    refused: 0,
    issuedTokens: new Set(),
    revocations: [],
    refreshes: 0,
    refuseIssuedBefore: new Map(),
    signInAs: (a) => (account = a),
    close: async () => {
      await closeServer(server);
      await as.close();
    },
  };
  onIdpTokens(as, (ctx) => {
    const body = (ctx as unknown as { body?: { access_token?: string; refresh_token?: string } }).body;
    for (const t of [body?.access_token, body?.refresh_token]) if (t) handle.issuedTokens.add(t);
    if ((ctx as unknown as { oidc?: { params?: { grant_type?: string } } }).oidc?.params?.grant_type === 'refresh_token') handle.refreshes++;
  });
  type KoaContext = { path: string; status: number; oidc?: { params?: Record<string, unknown> } };
  (as.provider as unknown as { use(fn: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void }).use(async (ctx, next) => {
    await next();
    if (ctx.path === '/token/revocation') handle.revocations.push(`${ctx.status} ${String(ctx.oidc?.params?.token_type_hint ?? '')}`);
  });
  const keys = createLocalJWKSet(as.jwks);
  const metadataPath = '/.well-known/oauth-protected-resource/mcp';
  const challenge = `Bearer resource_metadata="http://127.0.0.1:${port}${metadataPath}", scope="${UPSTREAM_SCOPES.join(' ')}"`;

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', url).pathname;
    if (path === metadataPath) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resource: url, authorization_servers: [as.issuer], scopes_supported: UPSTREAM_SCOPES, bearer_methods_supported: ['header'] }));
      return;
    }
    if (path !== '/mcp') return void res.writeHead(404).end();
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const verified = token
      ? jwtVerify(token, keys, { issuer: as.issuer, audience: url }).then(({ payload }) => {
          if ((payload.iat ?? 0) * 1000 < (handle.refuseIssuedBefore.get(payload.sub!) ?? 0)) throw new Error('revoked here');
          return payload.sub;
        })
      : Promise.reject(new Error('no token'));
    verified.then(
      (sub) => {
        handle.seen.push({ sub: sub!, token: token!, at: Date.now() });
        return serveMcp(req, res, sub!);
      },
      () => {
        handle.refused++;
        res.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'application/json' }).end('{"error":"invalid_token"}');
      },
    ).catch(() => res.destroy());
  });
  return handle;
}

/** One stateless SDK server per request, its `whoami` answering the token's `sub`. */
export async function serveMcp(req: IncomingMessage, res: ServerResponse, sub: string): Promise<void> {
  const mcp = new McpServer({ name: 'oauth-protected-upstream', version: '1.0.0' });
  mcp.tool('whoami', 'the account whose token came with this call', async () => ({ content: [{ type: 'text', text: sub }] }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void mcp.close();
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res);
}
