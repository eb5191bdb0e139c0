/**
 * The built-in authorization server end to end, with the real SDK client and the unmodified
 * everything server behind the gateway: discovery from the 401 (RFC 9728 → RFC 8414), dynamic
 * registration, /authorize with the consent page and the dev login, /token, then tools; refresh
 * rotation and reuse detection; and a 2025-03-26 client (root metadata, no `resource`).
 */
import {
  auth,
  discoverOAuthMetadata,
  exchangeAuthorization,
  registerClient,
  startAuthorization,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connectWithOAuth, connectWithToken, followAuthorization, HeadlessOAuthProvider } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { headlessUser, recordingAudit, selfSignedCertificate, startAsGateway, type AsGateway, type HeadlessUserLog } from '../helpers/authorization-server.js';

let everything: UpstreamHandle;
let gateway: AsGateway;
let mcpUrl: string;
let tls: { key: string; cert: string };
const audit = recordingAudit();

beforeAll(async () => {
  everything = await startEverythingServer();
  tls = await selfSignedCertificate();
  // The CIMD test serves its client document on https://127.0.0.1: allowed by the test-only hook.
  gateway = await startAsGateway({ upstream: everything.url, audit, options: { safeFetch: { allowLoopback: true, ca: tls.cert } } });
  mcpUrl = `${gateway.issuer}/everything/mcp`;
});

afterAll(async () => {
  await gateway?.stop();
  await everything?.close();
});

describe('built-in AS with the SDK client (2025-06-18 and later)', () => {
  it('discovers, registers, asks consent, logs in, issues an audience-bound at+jwt, and the tools work', async () => {
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    const conn = await connectWithOAuth(mcpUrl, { onPage: headlessUser('alice', { log }) });
    try {
      const { tools } = await conn.client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
      const result = await conn.client.callTool({ name: 'echo', arguments: { message: 'hi' } });
      expect(result.content).toEqual([{ type: 'text', text: 'Echo: hi' }]);

      const [authorizationUrl] = conn.provider.authorizationUrls;
      expect(`${authorizationUrl?.origin}${authorizationUrl?.pathname}`).toBe(`${gateway.issuer}/authorize`);
      expect(authorizationUrl?.searchParams.get('resource')).toBe(mcpUrl);
      expect(log.consentPages).toHaveLength(1);
      expect(log.consentPages[0]).toContain('mcp-auth-gateway test harness');
      expect(log.consentPages[0]).toContain('127.0.0.1');
      expect(log.loginPages).toHaveLength(1);

      const tokens = conn.tokens()!;
      expect(decodeProtectedHeader(tokens.access_token)).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
      const claims = decodeJwt(tokens.access_token);
      expect(claims).toMatchObject({ iss: gateway.issuer, sub: 'alice', aud: mcpUrl });
      expect(typeof claims.client_id).toBe('string');
      expect(typeof claims.jti).toBe('string');
      expect(claims.exp! - claims.iat!).toBe(600);
      // The SDK asks for the scope of the 401 challenge (the route's required scopes).
      expect(authorizationUrl?.searchParams.get('scope')).toBe('mcp:read');
      expect(claims.scope).toBe('mcp:read');
      expect(tokens.refresh_token).toBeTruthy();

      // The AS's audit trail for this flow: who, which client, what — and no token or code.
      const mine = audit.events.filter((e) => e.client_id === claims.client_id);
      expect(mine.map((e) => e.event)).toEqual(expect.arrayContaining(['client_registered', 'consent', 'authorization_granted', 'token_issued']));
      expect(mine.find((e) => e.event === 'token_issued')).toMatchObject({ sub: 'alice', resource: mcpUrl, scope: 'mcp:read', refresh: true });
      const trail = JSON.stringify(audit.events);
      for (const secret of [tokens.access_token, tokens.refresh_token!]) expect(trail).not.toContain(secret);
    } finally {
      await conn.close();
    }
  });

  it('rotates refresh tokens, and a replayed one revokes the whole family', async () => {
    const conn = await connectWithOAuth(mcpUrl, { onPage: headlessUser('bob') });
    try {
      const first = conn.tokens()!;
      await expect(auth(conn.provider, { serverUrl: mcpUrl })).resolves.toBe('AUTHORIZED');
      const second = conn.tokens()!;
      expect(second.refresh_token).toBeTruthy();
      expect(second.refresh_token).not.toBe(first.refresh_token);
      expect(second.access_token).not.toBe(first.access_token);
      expect(decodeJwt(second.access_token)).toMatchObject({ sub: 'bob', aud: mcpUrl });

      const clientId = conn.provider.clientInformation()!.client_id;
      const refresh = (refreshToken: string) =>
        fetch(`${gateway.issuer}/token`, {
          method: 'POST',
          body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId }),
        });
      // Rotated once more, the first token is past its retry grace (K75): presented again, it is reuse.
      const third = (await (await refresh(second.refresh_token!)).json()) as { refresh_token: string };
      const replay = await refresh(first.refresh_token!);
      expect(replay.status).toBe(400);
      expect(await replay.json()).toMatchObject({ error: 'invalid_grant' });
      // The whole family is gone, including the current member.
      const current = await refresh(third.refresh_token);
      expect(current.status).toBe(400);
      expect(await current.json()).toMatchObject({ error: 'invalid_grant' });
      // And its access token with it (J52: revocation is real).
      await expect(connectWithToken(mcpUrl, second.access_token)).rejects.toThrow(/invalid_token/);
    } finally {
      await conn.close();
    }
  });
});

describe('a 2025-03-26 client: root discovery, default endpoints, no resource', () => {
  it('finds the metadata at the host root with MCP-Protocol-Version, and gets a token for the only route', async () => {
    const metadata = await discoverOAuthMetadata(new URL(gateway.issuer), { protocolVersion: '2025-03-26' });
    expect(metadata).toBeDefined();
    // Endpoints at the root: what such a client would also guess without metadata.
    expect(metadata).toMatchObject({
      issuer: gateway.issuer,
      authorization_endpoint: `${gateway.issuer}/authorize`,
      token_endpoint: `${gateway.issuer}/token`,
      registration_endpoint: `${gateway.issuer}/register`,
    });
    const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
    const client = await registerClient(gateway.issuer, {
      metadata,
      clientMetadata: { client_name: 'legacy client', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' },
    });
    const { authorizationUrl, codeVerifier } = await startAuthorization(gateway.issuer, { metadata, clientInformation: client, redirectUrl, state: 'legacy-state' });
    expect(authorizationUrl.searchParams.has('resource')).toBe(false);
    const callback = await followAuthorization(authorizationUrl, redirectUrl, { onPage: headlessUser('carol') });
    expect(callback.searchParams.get('state')).toBe('legacy-state');
    expect(callback.searchParams.get('iss')).toBe(gateway.issuer);
    const tokens = await exchangeAuthorization(gateway.issuer, {
      metadata,
      clientInformation: client,
      authorizationCode: callback.searchParams.get('code')!,
      codeVerifier,
      redirectUri: redirectUrl,
    });
    // No resource sent: the gateway's only route is the audience, its required scopes the scope.
    expect(decodeJwt(tokens.access_token)).toMatchObject({ aud: mcpUrl, sub: 'carol', scope: 'mcp:read' });
    const mcp = await connectWithToken(mcpUrl, tokens.access_token);
    try {
      expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await mcp.close();
    }
  });

  it('serves the same metadata at every discovery path, with issuer equal to the base it is served under', async () => {
    const paths = ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'];
    const bodies = await Promise.all(
      paths.map(async (path) => {
        const res = await fetch(`${gateway.issuer}${path}`, { headers: { 'mcp-protocol-version': '2025-03-26' } });
        expect(res.status).toBe(200);
        expect(res.headers.get('access-control-allow-origin')).toBe('*');
        return res.json() as Promise<Record<string, unknown>>;
      }),
    );
    expect(bodies[1]).toEqual(bodies[0]);
    expect(bodies[0]).toMatchObject({
      issuer: gateway.issuer,
      revocation_endpoint: `${gateway.issuer}/revoke`,
      jwks_uri: `${gateway.issuer}/jwks.json`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
      scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
    });
    const jwks = (await (await fetch(`${gateway.issuer}/jwks.json`)).json()) as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0]).not.toHaveProperty('d');
  });
});

describe('a Client ID Metadata Document client (2025-11-25)', () => {
  /** The SDK's CIMD support: a provider with `clientMetadataUrl` uses it as client_id instead of registering. */
  class MetadataDocumentProvider extends HeadlessOAuthProvider {
    constructor(
      redirectUrl: string,
      readonly clientMetadataUrl: string,
    ) {
      super(redirectUrl, { onPage: headlessUser('oscar') });
    }
  }

  it('uses the document URL as client_id, without registering, and calls tools', async () => {
    const redirectUrl = `http://127.0.0.1:${await freePort()}/callback`;
    let documentFetches = 0;
    const server = createHttpsServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      documentFetches++;
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}${req.url}`;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ client_id: url, client_name: 'CIMD test client', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const documentUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/client.json`;
    const registrationsBefore = gateway.recording.writes.filter((w) => w.key.startsWith('client:')).length;
    const provider = new MetadataDocumentProvider(redirectUrl, documentUrl);
    let client = new Client({ name: 'cimd', version: '0' });
    try {
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
        throw new Error('expected a 401 first');
      } catch (err) {
        if (!(err instanceof UnauthorizedError)) throw err;
      }
      const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
      await transport.finishAuth(provider.takeAuthorizationCode());
      client = new Client({ name: 'cimd', version: '0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
      expect(provider.authorizationUrls[0]?.searchParams.get('client_id')).toBe(documentUrl);
      expect(decodeJwt(provider.tokens()!.access_token)).toMatchObject({ client_id: documentUrl, sub: 'oscar', aud: mcpUrl });
      expect(documentFetches).toBe(1);
      // No dynamic registration happened.
      expect(gateway.recording.writes.filter((w) => w.key.startsWith('client:')).length).toBe(registrationsBefore);
    } finally {
      await client.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
