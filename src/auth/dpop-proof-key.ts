// The public key of a DPoP proof, ready for node:crypto: a client signs every
// request with the same key, so importing its embedded JWK once (jose's
// EmbeddedJWK: `use`, `alg`, the curve, public only) and keeping the KeyObject
// by its RFC 7638 thumbprint spares the import and WebCrypto per request
// (docs/benchmark.md, DPoP). Only a JWK made of its thumbprint members alone
// is kept: any other member could change what jose's import decides, and the
// thumbprint does not cover it.
import type { KeyObject } from 'node:crypto';
import { EmbeddedJWK, type CompactJWSHeaderParameters, type CryptoKey, type JWK } from 'jose';
import { LRUCache } from 'lru-cache';
import type { JwtAlgorithm } from '../config/jws-algorithms.js';
import { sha256Base64Url } from './hash.js';
import { verificationKey } from './jws-signature.js';

/** RFC 7638 §3.2: the members a thumbprint covers, per key type, in lexicographic order. */
const THUMBPRINT_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  EC: ['crv', 'kty', 'x', 'y'],
  OKP: ['crv', 'kty', 'x'],
  RSA: ['e', 'kty', 'n'],
};

/** Clients whose keys stay imported; past this the least recently used one is imported again. */
const MAX_KEYS = 4096;
const keys = new LRUCache<string, KeyObject>({ max: MAX_KEYS });

export interface ProofKey {
  /** RFC 7638 SHA-256 thumbprint: what `cnf.jkt` names. */
  jkt: string;
  key: KeyObject;
}

/** The thumbprint, or undefined when the JWK lacks a member of its type (or has no type a proof can use). */
export function jwkThumbprint(jwk: Readonly<Record<string, unknown>>): string | undefined {
  const members = typeof jwk.kty === 'string' ? THUMBPRINT_MEMBERS[jwk.kty] : undefined;
  if (members === undefined || !members.every((name) => typeof jwk[name] === 'string')) return undefined;
  // JSON.stringify of the required members in this order is RFC 7638's canonical form.
  return sha256Base64Url(JSON.stringify(Object.fromEntries(members.map((name) => [name, jwk[name]]))));
}

/**
 * The proof's key for `alg`: from the cache when this JWK (thumbprint members
 * only) was imported for `alg` before, else through jose's EmbeddedJWK.
 * Throws (jose's errors, or UnusableKey) when the JWK is not a public key for `alg`.
 */
export async function proofKey(header: CompactJWSHeaderParameters & { jwk: JWK }, alg: JwtAlgorithm): Promise<ProofKey | undefined> {
  const jkt = jwkThumbprint(header.jwk);
  if (jkt === undefined) return undefined;
  const cacheable = Object.keys(header.jwk).length === THUMBPRINT_MEMBERS[header.jwk.kty!]!.length;
  const id = `${alg} ${jkt}`;
  const cached = cacheable ? keys.get(id) : undefined;
  if (cached !== undefined) return { jkt, key: cached };
  const imported = (await EmbeddedJWK(header, { payload: '', signature: '' })) as CryptoKey;
  const key = verificationKey(imported, alg);
  if (cacheable) keys.set(id, key);
  return { jkt, key };
}
