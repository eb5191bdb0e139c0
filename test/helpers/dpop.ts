// A DPoP client's key and proofs (RFC 9449 §4), minted with jose the way a
// real client does: the public key in the proof's header, one proof per request.
import { randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { sha256Base64Url } from '../../src/auth/hash.js';

export interface DpopKey {
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  /** RFC 7638 thumbprint: the token's `cnf.jkt`. */
  jkt: string;
}

export async function dpopKey(alg = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { alg, privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk, 'sha256') };
}

export interface ProofOptions {
  htm: string;
  htu: string;
  /** The access token the proof accompanies: its hash becomes `ath`. */
  token?: string;
  /** Claims merged over the defaults (`jti`, `iat`, `htm`, `htu`, `ath`); `undefined` removes one. */
  claims?: Record<string, unknown>;
  /** Header parameters merged over `{ typ: dpop+jwt, alg, jwk }`. */
  header?: Record<string, unknown>;
  /** Sign with another key than the one in the header. */
  signWith?: CryptoKey | Uint8Array;
}

export const athOf = (token: string) => sha256Base64Url(token);

export function proof(key: DpopKey, options: ProofOptions): Promise<string> {
  const claims: Record<string, unknown> = {
    jti: randomUUID(),
    iat: Math.floor(Date.now() / 1000),
    htm: options.htm,
    htu: options.htu,
    ...(options.token !== undefined && { ath: athOf(options.token) }),
    ...options.claims,
  };
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
  const header = { typ: 'dpop+jwt', alg: key.alg, jwk: key.publicJwk, ...options.header } as JWTHeaderParameters;
  for (const [name, value] of Object.entries(header)) if (value === undefined) delete (header as Record<string, unknown>)[name];
  return new SignJWT(claims as JWTPayload).setProtectedHeader(header).sign(options.signWith ?? key.privateKey);
}
