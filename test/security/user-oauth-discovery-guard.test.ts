/**
 * [C13] SSRF through user_oauth discovery (DESIGN §8.1, SECURITY-CASES C13): the upstream's 401
 * names its RFC 9728 metadata, which names the AS, whose RFC 8414 metadata names the endpoints the
 * gateway POSTs to. A hostile upstream (a real HTTP server here, scripted) points them at internal
 * addresses; a trap listener counts every connection made to it. With the production settings (no
 * test-only loopback allowance): a discovered AS or endpoint that is not https, is a non-public
 * address, or resolves to one is refused before anything is sent there, with a warning in the log
 * and a precise error (the MCP client's 502 names the reason); AS metadata whose issuer is not the
 * one it was fetched for is refused (RFC 8414 §3.3). The upstream's own origin is trusted as the
 * configuration is.
 */
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { DiscoveredUrlRefused } from '../../src/authorization-server/upstream-accounts/discovery-guard.js';
import { UpstreamAccounts } from '../../src/authorization-server/upstream-accounts/upstream-accounts.js';
import type { RouteConfig } from '../../src/config/types.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { upstreamAccountsContext } from '../helpers/upstream-accounts-context.js';

const ISSUER = 'http://gateway.test';
const ROUTE = '/files/mcp';
const servers: (HttpServer | TcpServer)[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A TCP listener that counts connections: anything the gateway sends there would arrive. */
async function trap(): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const server = createTcpServer((socket) => {
    count++;
    socket.destroy();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, connections: () => count };
}

interface Hostile {
  url: string;
  origin: string;
  paths: string[];
}

/** The hostile upstream: 401 naming its RFC 9728 metadata, which names `authorizationServer`; `asMetadata` served at its own RFC 8414 well-known URL. */
async function hostileUpstream(authorizationServer: (origin: string) => string, asMetadata?: (origin: string) => Record<string, unknown>): Promise<Hostile> {
  const paths: string[] = [];
  const json = (res: ServerResponse, body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = createHttpServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    paths.push(path);
    req.resume();
    if (path === '/mcp') return void res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"` }).end();
    if (path === '/.well-known/oauth-protected-resource/mcp') return json(res, { resource: `${origin}/mcp`, authorization_servers: [authorizationServer(origin)] });
    if (path === '/.well-known/oauth-authorization-server' && asMetadata) return json(res, asMetadata(origin));
    res.writeHead(404).end();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: `${origin}/mcp`, origin, paths };
}

function accounts(upstream: Hostile, warnings: unknown[][]): UpstreamAccounts {
  const ctx = upstreamAccountsContext(new MemoryStore({ maxEntries: 10_000 }), ISSUER, { warnings });
  const route = { path: ROUTE, upstream: upstream.url, upstreamAuth: { kind: 'user_oauth', scopes: [], resource: upstream.url, sendResource: true } } as unknown as RouteConfig;
  return new UpstreamAccounts(ctx, [route], { keys: [{ id: 'k1', key: randomBytes(32) }] } as never, { timeoutMs: 5_000 });
}

/** What resolving the route's AS gives: the refusal, and the warning logged for it. */
async function refusal(upstream: Hostile): Promise<{ error: unknown; warnings: unknown[][] }> {
  const warnings: unknown[][] = [];
  const error = await accounts(upstream, warnings).routes.get(ROUTE)!.server.resolve().then(
    () => undefined,
    (err: unknown) => err,
  );
  await new Promise((r) => setImmediate(r));
  return { error, warnings };
}

function expectRefused(outcome: { error: unknown; warnings: unknown[][] }, message: RegExp): void {
  expect(outcome.error).toBeInstanceOf(DiscoveredUrlRefused);
  expect((outcome.error as Error).message).toMatch(message);
  expect(outcome.warnings).toEqual([[{ route: ROUTE, reason: (outcome.error as Error).message }, 'user_oauth: a URL the upstream named was refused and not fetched']]);
}

describe('[C13] user_oauth discovery: URLs the upstream chose are guarded as client metadata documents are', () => {
  it('an AS at a link-local address (cloud metadata) is refused, and the MCP client\'s refresh gets a 502 naming why', async () => {
    const upstream = await hostileUpstream(() => 'https://169.254.169.254');
    expectRefused(await refusal(upstream), /the authorization server the upstream's metadata names, https:\/\/169\.254\.169\.254 is a non-public address/);

    const a = accounts(upstream, []);
    const owner = { issuer: ISSUER, subject: 'alice', routePath: ROUTE };
    const now = Date.now();
    await a.grants.save(owner, { accessToken: 'at', refreshToken: 'rt', obtainedAt: now - 600_000, expiresAt: now + 1_000, scopes: [], connectedAt: now, asIssuer: 'https://169.254.169.254', resource: upstream.url });
    const err = await a.routes.get(ROUTE)!.tokens.accessTokenFor({ issuer: ISSUER, subject: 'alice' } as AuthContext).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).status).toBe(502);
    expect((err as Error).message).toMatch(/^the upstream's authorization server is refused: .*169\.254\.169\.254 is a non-public address/);
  });

  it('an AS over http (not a configured origin) is refused and nothing connects to it', async () => {
    const t = await trap();
    expectRefused(await refusal(await hostileUpstream(() => `http://127.0.0.1:${t.port}`)), /http:\/\/127\.0\.0\.1:\d+ is not https \(only a configured origin may be http\)/);
    expect(t.connections()).toBe(0);
  });

  it('an https AS whose name resolves to a loopback address is refused at connect (the address is checked, not the name) and nothing connects to it', async () => {
    const t = await trap();
    expectRefused(await refusal(await hostileUpstream(() => `https://localhost:${t.port}`)), /https:\/\/localhost:\d+ resolves to a non-public address/);
    expect(t.connections()).toBe(0);
  });

  it('AS metadata whose issuer is not the one it was fetched for is refused (RFC 8414 §3.3), and its endpoints are never called', async () => {
    const t = await trap();
    const upstream = await hostileUpstream(
      (origin) => origin,
      () => ({ issuer: 'https://as.example', authorization_endpoint: `http://127.0.0.1:${t.port}/authorize`, token_endpoint: `http://127.0.0.1:${t.port}/token`, registration_endpoint: `http://127.0.0.1:${t.port}/register` }),
    );
    expectRefused(await refusal(upstream), /names another issuer than http:\/\/127\.0\.0\.1:\d+ \(RFC 8414 §3\.3\)/);
    expect(t.connections()).toBe(0);
  });

  it.each([
    ['token_endpoint', 'http://10.0.0.1/token', /the authorization server's token_endpoint http:\/\/10\.0\.0\.1 is not https/],
    ['registration_endpoint', 'https://[fe80::1]/register', /the authorization server's registration_endpoint https:\/\/\[fe80::1\] is a non-public address/],
    ['revocation_endpoint', 'https://192.168.1.1/revoke', /the authorization server's revocation_endpoint https:\/\/192\.168\.1\.1 is a non-public address/],
  ])('an AS on the upstream\'s own origin whose %s is internal: refused before registering or any token request', async (name, url, message) => {
    const upstream = await hostileUpstream(
      (origin) => origin,
      (origin) => ({ issuer: origin, authorization_endpoint: `${origin}/authorize`, token_endpoint: `${origin}/token`, registration_endpoint: `${origin}/register`, [name]: url }),
    );
    expectRefused(await refusal(upstream), message);
    expect(upstream.paths.filter((p) => !p.startsWith('/.well-known/') && p !== '/mcp')).toEqual([]);
  });
});
