/**
 * Proves the integration-test harness works on its own, without the gateway:
 * a real AS (oidc-provider) that issues audience-bound JWTs, the unmodified everything server,
 * the recording hop, and the SDK client's headless OAuth flow.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { connectWithOAuth, connectWithToken } from '../helpers/mcp-client.js';
import { closeServer, listen } from '../helpers/net.js';
import { mintClientCredentialsToken, startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const SCOPES = ['mcp:read', 'mcp:write'];

let everything: UpstreamHandle;
let hop: RecordingHop;
let oidc: OidcProviderHandle;
let resource: { url: string; close(): Promise<void> };

/**
 * A stand-in protected resource (a few lines, NOT the gateway): RFC 9728 metadata, 401 with
 * `resource_metadata`, JWT audience check, then a plain forward to `target` without the token.
 */
async function startToyProtectedResource(target: string, as: () => OidcProviderHandle) {
  const server = createServer();
  const port = await listen(server);
  const url = `http://127.0.0.1:${port}/mcp`;
  const prm = `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (req.url === '/.well-known/oauth-protected-resource/mcp') {
        const body = { resource: url, authorization_servers: [as().issuer], scopes_supported: SCOPES, bearer_methods_supported: ['header'] };
        return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      }
      const token = req.headers.authorization?.replace(/^Bearer /, '') ?? '';
      try {
        await jwtVerify(token, createRemoteJWKSet(new URL(as().jwksUri)), { issuer: as().issuer, audience: url });
      } catch {
        return res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${prm}"` }).end();
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = Object.entries(req.headers).filter(([k]) => !['authorization', 'host', 'connection', 'content-length'].includes(k));
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const up = await fetch(target, {
        signal: abort.signal,
        method: req.method,
        headers: headers as [string, string][],
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      res.writeHead(up.status, Object.fromEntries([...up.headers].filter(([k]) => !['transfer-encoding', 'connection', 'keep-alive'].includes(k))));
      res.flushHeaders();
      if (!up.body) return res.end();
      await pipeline(Readable.fromWeb(up.body as import('node:stream/web').ReadableStream), res);
    })().catch(() => res.destroy());
  });
  return { url, close: () => closeServer(server) };
}

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  resource = await startToyProtectedResource(hop.url, () => oidc);
  oidc = await startOidcProvider({ resources: [everything.url, resource.url], scopes: SCOPES });
});

afterAll(async () => {
  await Promise.all([resource?.close(), oidc?.close(), hop?.close()]);
  await everything?.close();
});

describe('oidc-provider stand-in', () => {
  it('mints a client_credentials RFC 9068 JWT bound to the requested resource', async () => {
    const token = await mintClientCredentialsToken(oidc, { resource: everything.url, scope: 'mcp:read' });
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ aud: everything.url, scope: 'mcp:read', iss: oidc.issuer, client_id: 'harness-confidential' });

    const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(oidc.jwksUri)), {
      issuer: oidc.issuer,
      audience: everything.url,
      typ: 'at+jwt',
    });
    expect(payload.exp! - payload.iat!).toBe(300);
  });

  it('refuses a resource it was not configured for', async () => {
    await expect(oidc.mintAccessToken({ resource: 'http://127.0.0.1:1/elsewhere/mcp' })).rejects.toThrow(/invalid_target/);
  });

  it('drops scopes the resource does not know', async () => {
    const token = await oidc.mintAccessToken({ resource: everything.url, scope: 'mcp:read mcp:admin' });
    expect(decodeJwt(token).scope).toBe('mcp:read');
  });
});

describe('headless OAuth (authorization_code + PKCE + DCR) through standard discovery', () => {
  it('connects the SDK client with a JWT whose aud is the resource, then refreshes it', async () => {
    const before = hop.requests.length;
    const errorsBefore = oidc.errors.length;
    const conn = await connectWithOAuth(resource.url);
    try {
      const { tools } = await conn.client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');

      const [authorizationUrl] = conn.provider.authorizationUrls;
      expect(authorizationUrl?.searchParams.get('resource')).toBe(resource.url);
      expect(authorizationUrl?.searchParams.get('code_challenge_method')).toBe('S256');
      expect(oidc.interactions.map((i) => i.prompt.name)).toEqual(['login', 'consent']);

      const tokens = conn.tokens()!;
      expect(tokens.refresh_token).toBeTruthy();
      const claims = decodeJwt(tokens.access_token);
      expect(claims).toMatchObject({ aud: resource.url, sub: 'alice', iss: oidc.issuer });
      expect(String(claims.scope).split(' ').sort()).toEqual(SCOPES);

      // refresh (the SDK's auth() with a stored refresh token), still bound to the resource
      await expect(auth(conn.provider, { serverUrl: resource.url })).resolves.toBe('AUTHORIZED');
      const refreshed = conn.tokens()!;
      expect(refreshed.access_token).not.toBe(tokens.access_token);
      expect(decodeJwt(refreshed.access_token).aud).toBe(resource.url);

      // the toy resource forwarded without the token
      const seen = hop.requests.slice(before);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'authorization'))).toEqual([]);
      expect(oidc.errors.slice(errorsBefore)).toEqual([]);
    } finally {
      await conn.close();
    }
  });
});

describe('everything server through the recording hop', () => {
  it('serves tools to a static-bearer client and records what reached it', async () => {
    const token = await oidc.mintAccessToken({ resource: everything.url, scope: 'mcp:read' });
    const before = hop.requests.length;
    const client = await connectWithToken(hop.url, token);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'trigger-long-running-operation']));
      const result = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
      expect(result.content).toEqual([{ type: 'text', text: 'Echo: hi' }]);

      // SSE passes event by event: progress arrives well before the result
      const progressAt: number[] = [];
      const start = Date.now();
      await client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        undefined,
        { onprogress: () => progressAt.push(Date.now() - start) },
      );
      const doneAt = Date.now() - start;
      expect(progressAt).toHaveLength(4);
      expect(doneAt - progressAt[0]!).toBeGreaterThan(400);

      await vi.waitFor(() => expect(hop.requests.slice(before).some((r) => r.method === 'GET')).toBe(true));
      const seen = hop.requests.slice(before);
      // no gateway here, so the client's token does reach the upstream (gateway tests assert the opposite)
      for (const r of seen) {
        const authz = r.headers.filter(([n]) => n.toLowerCase() === 'authorization').map(([, v]) => v);
        expect(authz).toEqual([`Bearer ${token}`]);
      }
      const bodies = seen.map((r) => r.body.toString());
      expect(bodies.some((b) => b.includes('"method":"initialize"'))).toBe(true);
      expect(bodies.some((b) => b.includes('"name":"echo"') && b.includes('"message":"hi"'))).toBe(true);
    } finally {
      await client.close();
    }
  });
});
