// A JWS signature checked with node:crypto on libuv's thread pool: jose
// verifies through WebCrypto, whose job costs about twice the CPU of
// `crypto.verify` with a KeyObject (docs/benchmark.md, "Where the time
// goes"). The keys still come from jose (JWKS selection, import, refresh);
// each CryptoKey is turned into a KeyObject once, kept as long as the key set
// keeps the CryptoKey. A key is used only for the algorithm it was imported
// for, as jose's own check requires (RFC 8725 §3.1).
import crypto, { KeyObject, type VerifyKeyObjectInput } from 'node:crypto';
import type { CryptoKey } from 'jose';
import type { JwtAlgorithm } from '../config/jws-algorithms.js';

/** What a JWS algorithm means to WebCrypto (to check the key) and to node:crypto (to verify). */
interface AlgorithmUse {
  /** The CryptoKey's algorithm name, and its hash or curve where one is fixed. */
  keyAlgorithm: string;
  keyHash?: string;
  keyCurve?: string;
  /** crypto.verify's digest; null: the algorithm hashes itself (EdDSA). */
  digest: string | null;
  options: Omit<VerifyKeyObjectInput, 'key'>;
}

const rsa = (bits: number): AlgorithmUse => ({ keyAlgorithm: 'RSASSA-PKCS1-v1_5', keyHash: `SHA-${bits}`, digest: `sha${bits}`, options: { padding: crypto.constants.RSA_PKCS1_PADDING } });
/** RFC 7518 §3.5: the salt is as long as the hash. */
const pss = (bits: number): AlgorithmUse => ({
  keyAlgorithm: 'RSA-PSS',
  keyHash: `SHA-${bits}`,
  digest: `sha${bits}`,
  options: { padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: bits / 8 },
});
/** RFC 7518 §3.4: R || S, each the curve's length (IEEE P1363), not DER. */
const ecdsa = (curve: string, bits: number): AlgorithmUse => ({ keyAlgorithm: 'ECDSA', keyCurve: curve, digest: `sha${bits}`, options: { dsaEncoding: 'ieee-p1363' } });
const ed25519: AlgorithmUse = { keyAlgorithm: 'Ed25519', digest: null, options: {} };

const USES: Record<JwtAlgorithm, AlgorithmUse> = {
  RS256: rsa(256),
  RS384: rsa(384),
  RS512: rsa(512),
  PS256: pss(256),
  PS384: pss(384),
  PS512: pss(512),
  ES256: ecdsa('P-256', 256),
  ES384: ecdsa('P-384', 384),
  ES512: ecdsa('P-521', 512),
  EdDSA: ed25519,
  Ed25519: ed25519,
};

/** RSA keys shorter than this are refused, as jose refuses them. */
const MIN_RSA_BITS = 2048;

/** A key that cannot verify this algorithm: a configuration or key-set fault, never a valid token. */
export class UnusableKey extends TypeError {
  override readonly name = 'UnusableKey';
}

/** One KeyObject per CryptoKey, held as long as the key set holds the CryptoKey. */
const keyObjects = new WeakMap<CryptoKey, KeyObject>();

/** The KeyObject to verify `alg` with; throws UnusableKey when the key is not one for `alg`. */
export function verificationKey(cryptoKey: CryptoKey, alg: JwtAlgorithm): KeyObject {
  const use = USES[alg];
  const algorithm = cryptoKey.algorithm as { name: string; hash?: { name: string }; namedCurve?: string; modulusLength?: number };
  if (cryptoKey.type !== 'public' || !cryptoKey.usages.includes('verify')) throw new UnusableKey(`The key cannot verify ${alg} signatures`);
  if (algorithm.name !== use.keyAlgorithm) throw new UnusableKey(`The key is not a ${use.keyAlgorithm} key`);
  if (use.keyHash !== undefined && algorithm.hash?.name !== use.keyHash) throw new UnusableKey(`The key is not for ${use.keyHash}`);
  if (use.keyCurve !== undefined && algorithm.namedCurve !== use.keyCurve) throw new UnusableKey(`The key is not on ${use.keyCurve}`);
  if (algorithm.modulusLength !== undefined && algorithm.modulusLength < MIN_RSA_BITS) throw new UnusableKey(`${alg} needs a key of ${MIN_RSA_BITS} bits or more`);
  let keyObject = keyObjects.get(cryptoKey);
  if (keyObject === undefined) {
    keyObject = KeyObject.from(cryptoKey);
    keyObjects.set(cryptoKey, keyObject);
  }
  return keyObject;
}

/**
 * Whether `signature` signs `signingInput` (the ASCII `header.payload`) with `key` under `alg`.
 * With a callback, crypto.verify runs on libuv's thread pool, as WebCrypto did: a signature
 * check done on the JavaScript thread made shape c bound by that one thread (docs/benchmark.md).
 */
export function jwsSignatureValid(alg: JwtAlgorithm, key: KeyObject, signingInput: string, signature: Buffer): Promise<boolean> {
  const use = USES[alg];
  return new Promise((resolve) => {
    try {
      crypto.verify(use.digest, Buffer.from(signingInput, 'latin1'), { key, ...use.options }, signature, (err, valid) => resolve(err === null && valid));
    } catch {
      // OpenSSL refuses some malformed signatures outright: the same answer as a wrong one.
      resolve(false);
    }
  });
}
