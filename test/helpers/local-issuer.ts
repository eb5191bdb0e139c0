/**
 * A minimal token issuer for tests that need many tokens for many principals
 * fast: an ES256 key whose JWKS is served on loopback, and RFC 9068 access
 * tokens signed with it (jose). For a real OAuth flow use oidc-provider.ts.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { closeServer, listen } from './net.js';

export interface LocalIssuer {
  /** `http://127.0.0.1:<port>` */
  issuer: string;
  jwksUri: string;
  /** An access token for `audience` (a route's resource URI). */
  token(claims: { audience: string; sub?: string; clientId?: string; scope?: string; ttlSeconds?: number }): Promise<string>;
  close(): Promise<void>;
}

export async function startLocalIssuer(): Promise<LocalIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = randomUUID();
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] });
  const server = createServer((req, res) => {
    if (req.url === '/jwks.json') res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
    else res.writeHead(404).end();
  });
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  return {
    issuer,
    jwksUri: `${issuer}/jwks.json`,
    token: ({ audience, sub = 'alice', clientId = 'test-client', scope = 'mcp:read', ttlSeconds = 600 }) =>
      sign(privateKey, kid, { iss: issuer, aud: audience, sub, client_id: clientId, scope }, ttlSeconds),
    close: () => closeServer(server),
  };
}

function sign(key: CryptoKey, kid: string, claims: Record<string, string>, ttlSeconds: number): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid })
    .setIssuedAt()
    .setJti(randomUUID())
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(key);
}
