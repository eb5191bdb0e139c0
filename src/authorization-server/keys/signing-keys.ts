// The built-in AS's signing keys. From config (`signing_key`: one private JWK,
// or a JWKS whose first key signs and whose other keys stay verifiable until
// the tokens they signed expire), or, for a loopback-only gateway, a dev key
// generated once into a local 0600 file. Never kept in the shared store.
import { hkdfSync } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SignJWT, calculateJwkThumbprint, createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet, type JWK, type JWTVerifyGetKey } from 'jose';
import { isAsymmetricJwsAlgorithm } from '../../config/jws-algorithms.js';
import { isLoopbackUrl } from '../../config/urls.js';
import type { JwtSigner } from '../../upstream-auth/upstream-credential.js';

export interface SigningKeys {
  /** `alg` of the signing key, e.g. ES256. */
  readonly algorithm: string;
  /** Every algorithm a published key uses (for verification). */
  readonly algorithms: readonly string[];
  /** The public keys, as served at /jwks.json. */
  readonly jwks: JSONWebKeySet;
  readonly keySet: JWTVerifyGetKey;
  readonly signer: JwtSigner;
  /** 32 bytes derived from the private key: HMAC key for cookies and CSRF tokens, equal on every replica. */
  readonly cookieSecret: Uint8Array;
  /** Where the dev key was read or written; undefined with a configured key. */
  readonly devKeyFile?: string;
}

export interface LoadSigningKeysOptions {
  /** Private JWK or JWKS as JSON text (`signing_key`); undefined: dev key. */
  configured?: string;
  /** The gateway's public URL: a dev key is refused unless it is loopback. */
  publicUrl: string;
  /** Where a dev key lives; default `<cwd>/.dev-keys`. */
  devKeyDirectory?: string;
}

export class SigningKeyError extends Error {
  override readonly name = 'SigningKeyError';
}

const DEV_KEY_FILE = 'signing.jwk.json';
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const ALGORITHM_BY_CURVE: Record<string, string> = { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512', Ed25519: 'EdDSA' };

/** A new private signing JWK (ES256, kid = its thumbprint): the dev key, and `mcp-auth-gateway keys generate`. */
export async function generateSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { ...jwk, kid, alg: 'ES256', use: 'sig' };
}

export async function loadSigningKeys(options: LoadSigningKeysOptions): Promise<SigningKeys> {
  if (options.configured !== undefined) return fromJwks(parseConfigured(options.configured));
  if (!isLoopbackUrl(options.publicUrl)) {
    throw new SigningKeyError(
      `authorization_server.signing_key is required: a dev signing key is generated only when public_url is loopback (public_url is ${options.publicUrl}); create one with \`mcp-auth-gateway keys generate\``,
    );
  }
  const directory = options.devKeyDirectory ?? join(process.cwd(), '.dev-keys');
  const file = join(directory, DEV_KEY_FILE);
  const keys = await fromJwks([await readOrCreateDevKey(directory, file)]);
  return { ...keys, devKeyFile: file };
}

function parseConfigured(text: string): JWK[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new SigningKeyError('authorization_server.signing_key is not JSON');
  }
  const keys = isObject(value) && Array.isArray(value.keys) ? (value.keys as unknown[]) : [value];
  if (keys.length === 0 || !keys.every(isObject)) throw new SigningKeyError('authorization_server.signing_key must be a JWK or a JWKS ({ "keys": [...] })');
  return keys as JWK[];
}

async function readOrCreateDevKey(directory: string, file: string): Promise<JWK> {
  try {
    const info = await stat(file);
    // Readable by others: anyone on the machine could mint tokens. Fix it rather than refuse (a dev key).
    if ((info.mode & 0o077) !== 0) await chmod(file, 0o600);
    return JSON.parse(await readFile(file, 'utf8')) as JWK;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw devKeyError('read', file, err);
  }
  const jwk = await generateSigningKey();
  try {
    await mkdir(directory, { recursive: true, mode: 0o700 });
    // `wx`: two processes starting at once keep the first key, not a mix.
    await writeFile(file, JSON.stringify(jwk, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    return jwk;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return JSON.parse(await readFile(file, 'utf8')) as JWK;
    throw devKeyError('write', file, err);
  }
}

// A read-only root (EACCES, EROFS) is the usual cause in a container: say what to configure instead.
function devKeyError(action: 'read' | 'write', file: string, err: unknown): SigningKeyError {
  return new SigningKeyError(
    `cannot ${action} the dev signing key ${file}: ${(err as Error).message}; set \`authorization_server.signing_key\` (create one with \`mcp-auth-gateway keys generate\`)`,
  );
}

async function fromJwks(keys: JWK[]): Promise<SigningKeys> {
  const [current] = keys;
  if (!current || typeof current.d !== 'string') throw new SigningKeyError('the first signing key must be a private key (with "d")');
  for (const key of keys) {
    // Only asymmetric keys: a shared HMAC secret would have to be published to be verified.
    if (!isAsymmetricJwsAlgorithm(algorithmOf(key))) throw new SigningKeyError(`signing key ${key.kid ?? ''}: only asymmetric keys (EC, RSA, OKP) are accepted`);
  }
  const algorithm = algorithmOf(current);
  const kids = new Set<string>();
  const publicKeys: JWK[] = [];
  for (const key of keys) {
    if (typeof key.kid !== 'string' || key.kid === '') throw new SigningKeyError('every signing key needs a "kid"');
    if (kids.has(key.kid)) throw new SigningKeyError(`two signing keys share kid ${key.kid}`);
    kids.add(key.kid);
    publicKeys.push(publicPart(key));
  }
  let privateKey: CryptoKey;
  try {
    privateKey = (await importJWK(current, algorithm)) as CryptoKey;
  } catch (err) {
    throw new SigningKeyError(`the signing key cannot be used: ${(err as Error).message}`);
  }
  const kid = current.kid as string;
  const jwks: JSONWebKeySet = { keys: publicKeys };
  const signer: JwtSigner = {
    sign: (payload, { typ }) => new SignJWT(payload).setProtectedHeader({ alg: algorithm, typ, kid }).sign(privateKey),
  };
  const cookieSecret = new Uint8Array(hkdfSync('sha256', current.d, 'mcp-auth-gateway', 'cookie and csrf signing', 32));
  return {
    algorithm,
    algorithms: [...new Set(publicKeys.map((k) => k.alg as string))],
    jwks,
    keySet: createLocalJWKSet(jwks),
    signer,
    cookieSecret,
  };
}

function algorithmOf(key: JWK): string {
  if (key.kty === 'oct') throw new SigningKeyError(`signing key ${key.kid ?? ''}: only asymmetric keys (EC, RSA, OKP) are accepted`);
  if (typeof key.alg === 'string') return key.alg;
  if (key.kty === 'RSA') return 'RS256';
  const byCurve = key.crv ? ALGORITHM_BY_CURVE[key.crv] : undefined;
  if (!byCurve) throw new SigningKeyError(`cannot tell the algorithm of signing key ${key.kid ?? ''}: set "alg"`);
  return byCurve;
}

function publicPart(key: JWK): JWK {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(key)) if (!PRIVATE_MEMBERS.includes(name)) out[name] = value;
  return { ...out, alg: algorithmOf(key), use: 'sig' } as JWK;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
