/**
 * Step-up with the real SDK client: it connects with the route's scope
 * (mcp:read), meets 403 insufficient_scope on a write tool, re-authorizes at
 * the AS (oidc-provider) with the `scope` of the challenge, and succeeds — or,
 * when re-authorizing cannot bring the scope, gets the same 403 again and
 * gives up (no loop).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { HeadlessOAuthProvider, connectWithOAuth, type OAuthConnection } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { gatewayFile, routeFile, startPolicyGateway, type PolicyGateway } from './policy-harness.js';

let everything: UpstreamHandle;
let hop: RecordingHop;
let oidc: OidcProviderHandle;
let gateway: PolicyGateway;
let url: string;
let beyondUrl: string;

const TOOL = 'toggle-simulated-logging';

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  // The AS knows mcp:read and mcp:write, not mcp:root.
  oidc = await startOidcProvider({ resources: [], scopes: ['mcp:read', 'mcp:write'] });
  const port = await freePort();
  url = `http://127.0.0.1:${port}/everything/mcp`;
  beyondUrl = `http://127.0.0.1:${port}/beyond/mcp`;
  oidc.resources.add(url).add(beyondUrl);
  const route = (path: string, scope: string) =>
    routeFile(oidc, {
      path,
      upstream: hop.url,
      scopes_supported: ['mcp:read', 'mcp:write'],
      required_scopes: ['mcp:read'],
      rules: [{ match: { method: 'tools/call', tool: 'toggle-*' }, require_scopes: [scope] }],
    });
  gateway = await startPolicyGateway({
    'gateway.yaml': gatewayFile(port),
    'everything.yaml': route('/everything/mcp', 'mcp:write'),
    // A scope the AS cannot grant: re-authorizing never brings it.
    'beyond.yaml': route('/beyond/mcp', 'mcp:root'),
  });
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([hop?.close(), oidc?.close()]);
  await everything?.close();
});

/**
 * The SDK registers a new client with the scope of the first challenge
 * (mcp:read), and oidc-provider then refuses it anything wider (invalid_scope).
 * So, like a client registered ahead of time for everything it may ask, this
 * one is registered for mcp:read and mcp:write — and still starts with mcp:read,
 * the scope the gateway's 401 names.
 */
async function connectRegisteredClient(serverUrl: string): Promise<OAuthConnection> {
  const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
  const registration = await fetch(new URL('/reg', oidc.issuer), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'mcp:read mcp:write',
    }),
  });
  expect(registration.status).toBe(201);
  // No refresh token: the SDK would otherwise refresh (same scopes) instead of re-authorizing.
  const provider = new HeadlessOAuthProvider(redirectUrl, { clientMetadata: { grant_types: ['authorization_code'] } });
  provider.saveClientInformation((await registration.json()) as OAuthClientInformationFull);
  const target = new URL(serverUrl);
  const first = new StreamableHTTPClientTransport(target, { authProvider: provider });
  await expect(new Client({ name: 'step-up', version: '1' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  await first.finishAuth(provider.takeAuthorizationCode());
  const transport = new StreamableHTTPClientTransport(target, { authProvider: provider });
  const client = new Client({ name: 'step-up', version: '1' });
  await client.connect(transport);
  return { client, transport, provider, tokens: () => provider.tokens(), close: () => client.close() };
}

const scopesOf = (token: string | undefined) => String(decodeJwt(token!).scope).split(' ').sort();
const forbidden = (route: string) => gateway.audit.filter((e) => e.route === route && e.name === TOOL && e.decision === 'deny').length;
const upstreamCalls = () => hop.requests.filter((r) => r.body.toString().includes(TOOL)).length;

describe('step-up with the SDK client', () => {
  it('re-authorizes with the scope of the 403 challenge, with a fresh consent for the added scope, then succeeds', async () => {
    const conn = await connectRegisteredClient(url);
    try {
      expect(scopesOf(conn.tokens()?.access_token)).toEqual(['mcp:read']);
      expect(conn.provider.authorizationUrls[0]?.searchParams.get('scope')).toBe('mcp:read');
      const consents = oidc.interactions.length;

      // The 403 makes the SDK start a new authorization: a redirect, which it reports as UnauthorizedError.
      const stepUp = await conn.client.callTool({ name: TOOL, arguments: {} }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(stepUp).toBeInstanceOf(UnauthorizedError);
      expect(forbidden('/everything/mcp')).toBe(1);
      expect(upstreamCalls()).toBe(0);
      const second = conn.provider.authorizationUrls[1];
      expect(second?.searchParams.get('scope')).toBe('mcp:read mcp:write');
      expect(second?.searchParams.get('resource')).toBe(url);
      // The AS asked for consent again, now covering the added scope (the headless
      // browser has a fresh session, so the AS lists mcp:read as well).
      const consent = oidc.interactions.slice(consents).find((i) => i.prompt.name === 'consent');
      expect(consent?.prompt.details.missingResourceScopes?.[url]).toContain('mcp:write');

      await conn.transport.finishAuth(conn.provider.takeAuthorizationCode());
      expect(scopesOf(conn.tokens()?.access_token)).toEqual(['mcp:read', 'mcp:write']);
      const result = await conn.client.callTool({ name: TOOL, arguments: {} });
      expect(result.isError).toBeFalsy();
      expect(upstreamCalls()).toBe(1);
      expect(gateway.audit.at(-1)).toMatchObject({ route: '/everything/mcp', name: TOOL, decision: 'allow', sub: 'alice' });
    } finally {
      await conn.close();
    }
  });

  it('a client whose retry carries no new scope (it refreshes) gets the same 403 and gives up', async () => {
    const conn = await connectWithOAuth(url);
    try {
      expect(conn.tokens()?.refresh_token).toBeTruthy();
      const before = forbidden('/everything/mcp');
      const upstreamBefore = upstreamCalls();
      const err = await conn.client.callTool({ name: TOOL, arguments: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StreamableHTTPError);
      expect((err as StreamableHTTPError).code).toBe(403);
      expect((err as Error).message).toMatch(/after trying upscoping/);
      // One 403, one retry with the refreshed (same-scope) token, one 403: then it stops.
      expect(forbidden('/everything/mcp') - before).toBe(2);
      expect(upstreamCalls()).toBe(upstreamBefore);
      expect(scopesOf(conn.tokens()?.access_token)).toEqual(['mcp:read']);
    } finally {
      await conn.close();
    }
  });

  it('a scope the AS will not grant: one re-authorization, the same 403, and the client gives up', async () => {
    const conn = await connectRegisteredClient(beyondUrl);
    try {
      const upstreamBefore = upstreamCalls();
      const first = await conn.client.callTool({ name: TOOL, arguments: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(first).toBeInstanceOf(UnauthorizedError);
      expect(conn.provider.authorizationUrls.at(-1)?.searchParams.get('scope')).toBe('mcp:read mcp:root');
      await conn.transport.finishAuth(conn.provider.takeAuthorizationCode());
      expect(scopesOf(conn.tokens()?.access_token)).toEqual(['mcp:read']);

      const authorizations = conn.provider.authorizationUrls.length;
      const err = await conn.client.callTool({ name: TOOL, arguments: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StreamableHTTPError);
      expect((err as StreamableHTTPError).code).toBe(403);
      expect(conn.provider.authorizationUrls.length).toBe(authorizations);
      expect(forbidden('/beyond/mcp')).toBe(2);
      expect(upstreamCalls()).toBe(upstreamBefore);
    } finally {
      await conn.close();
    }
  });
});
