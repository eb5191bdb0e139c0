// The benchmark's token issuer: a signing key, its JWKS on a local HTTP
// server (the gateway fetches it once and caches it), and access tokens
// minted with jose for the gateway's routes.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';

export interface Issuer {
  issuer: string;
  jwksUri: string;
  alg: string;
  mint(audience: string, subject: string): Promise<string>;
  /** `count` distinct tokens (subjects `<subjectPrefix>-0`, `-1`, …), signed in parallel; distinct prefixes keep sets apart. */
  mintMany(audience: string, count: number, subjectPrefix?: string): Promise<string[]>;
  close(): Promise<void>;
}

const KID = 'bench-key-1';

export async function startIssuer(alg: string, scope: string): Promise<Issuer> {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: KID, alg, use: 'sig' }] });
  const server: Server = createServer((req, res) => {
    if (req.url === '/jwks') res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const mint = (audience: string, subject: string) => sign(privateKey, alg, issuer, audience, subject, scope);
  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    alg,
    mint,
    async mintMany(audience, count, subjectPrefix = 'bench-user') {
      const tokens: string[] = [];
      // Batches keep the number of pending crypto jobs bounded.
      for (let start = 0; start < count; start += 1000) {
        const batch = Array.from({ length: Math.min(1000, count - start) }, (_, i) => mint(audience, `${subjectPrefix}-${start + i}`));
        tokens.push(...(await Promise.all(batch)));
      }
      return tokens;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function sign(key: CryptoKey, alg: string, issuer: string, audience: string, subject: string, scope: string): Promise<string> {
  return new SignJWT({ scope, client_id: 'bench-client' })
    .setProtectedHeader({ alg, kid: KID, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(audience)
    .setSubject(subject)
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(key);
}
