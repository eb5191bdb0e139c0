/**
 * A local enterprise IdP for ID-JAG tests: an ES256 key whose JWKS is served on loopback (the
 * requests to it counted), and Identity Assertion JWT Authorization Grants signed with it (jose),
 * with any header and claims a test wants — including ones jose would not write (duplicate
 * members, `alg: none`). A second key, never published, signs forgeries. (A cloud IdP cannot run
 * here; what the gateway checks is the JWT, so this is what an Okta or Entra ID-JAG looks like
 * on the wire.)
 */
import { randomUUID, webcrypto } from 'node:crypto';
import { createServer } from 'node:http';
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWTHeaderParameters } from 'jose';
import { closeServer, listen } from './net.js';

export const ID_JAG_TYP = 'oauth-id-jag+jwt';

export interface EnterpriseIdp {
  /** `http://127.0.0.1:<port>` */
  issuer: string;
  jwksUri: string;
  /** A URL that answers 302 to the JWKS. */
  movedJwksUri: string;
  /** How often the gateway fetched the JWKS. */
  jwksFetches(): number;
  /** Signs `claims` with the published key (or `key: 'unpublished'`); `header` replaces the default `{ alg: ES256, typ, kid }` members it names (undefined removes one). */
  sign(claims: Record<string, unknown>, options?: { header?: Record<string, unknown>; key?: 'published' | 'unpublished' }): Promise<string>;
  /** Signs the raw texts as given (for duplicate members): header and payload JSON written by the test. */
  signRaw(headerJson: string, payloadJson: string): Promise<string>;
  close(): Promise<void>;
}

export async function startEnterpriseIdp(): Promise<EnterpriseIdp> {
  const published = await generateKeyPair('ES256', { extractable: true });
  const unpublished = await generateKeyPair('ES256', { extractable: true });
  const kid = randomUUID();
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(published.publicKey)), kid, alg: 'ES256', use: 'sig' }] });
  let fetches = 0;
  const server = createServer((req, res) => {
    // A JWKS URL that redirects to the real one: a gateway that followed it would fetch /jwks.json.
    if (req.url === '/moved') return void res.writeHead(302, { location: '/jwks.json' }).end();
    if (req.url !== '/jwks.json') return void res.writeHead(404).end();
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
  });
  const issuer = `http://127.0.0.1:${await listen(server)}`;
  return {
    issuer,
    jwksUri: `${issuer}/jwks.json`,
    movedJwksUri: `${issuer}/moved`,
    jwksFetches: () => fetches,
    sign: (claims, options = {}) => {
      const header = withoutUndefined({ alg: 'ES256', typ: ID_JAG_TYP, kid, ...options.header });
      const key = options.key === 'unpublished' ? unpublished.privateKey : published.privateKey;
      return new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader(header as JWTHeaderParameters).sign(key);
    },
    signRaw: (headerJson, payloadJson) => signCompact(published.privateKey, headerJson, payloadJson),
    close: () => closeServer(server),
  };
}

function withoutUndefined(header: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(header).filter(([, value]) => value !== undefined));
}

/** ES256 over `b64(header).b64(payload)` by hand: WebCrypto's ECDSA signature is already the JWS (IEEE P1363) form. */
async function signCompact(key: CryptoKey, headerJson: string, payloadJson: string): Promise<string> {
  const input = `${Buffer.from(headerJson).toString('base64url')}.${Buffer.from(payloadJson).toString('base64url')}`;
  const signature = await webcrypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, key as webcrypto.CryptoKey, Buffer.from(input));
  return `${input}.${Buffer.from(signature).toString('base64url')}`;
}
