// The JWT verifier's own checks, one hand-written case each, beside the
// differential property (auth-jwt-differential.test.ts) and auth-jwt.test.ts:
// strict base64url and JSON (where jose was lenient), the key's algorithm
// agreement and size, each signature family through node:crypto, and one
// KeyObject per key.
import crypto, { type KeyObject } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLocalJwtVerifier } from '../../src/auth/jwt-verifier.js';
import { UnusableKey, verificationKey } from '../../src/auth/jws-signature.js';
import { decodeBase64UrlStrict, decodeJsonSegment } from '../../src/auth/compact-jws.js';
import { rejection } from '../helpers/rejection.js';

const ISSUER = 'https://idp.example.com/tenant';
const RESOURCE = 'https://mcp.example.com/github/mcp';
const ALL = ['RS256', 'PS256', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

const b64u = (value: string | Buffer) => Buffer.from(value).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const claimsText = (extra = '') => `{"iss":${JSON.stringify(ISSUER)},"aud":${JSON.stringify(RESOURCE)},"sub":"user-1","exp":${now() + 300}${extra}}`;

interface Pair {
  kid: string;
  alg: string;
  privateKey: KeyObject;
  jwk: JWK;
}
let pairs: Record<string, Pair>;

function pair(kid: string, alg: string, type: string, options: object): Pair {
  const { privateKey, publicKey } = crypto.generateKeyPairSync(type as 'ec', options as { namedCurve: string });
  return { kid, alg, privateKey, jwk: { ...(publicKey.export({ format: 'jwk' }) as JWK), kid, alg, use: 'sig' } };
}

beforeAll(() => {
  pairs = {
    es256: pair('es256', 'ES256', 'ec', { namedCurve: 'P-256' }),
    es384: pair('es384', 'ES384', 'ec', { namedCurve: 'P-384' }),
    es512: pair('es512', 'ES512', 'ec', { namedCurve: 'P-521' }),
    rs256: pair('rs256', 'RS256', 'rsa', { modulusLength: 2048 }),
    ps256: pair('ps256', 'PS256', 'rsa', { modulusLength: 2048 }),
    ps512: pair('ps512', 'PS512', 'rsa', { modulusLength: 3072 }),
    ed: pair('ed', 'EdDSA', 'ed25519', {}),
    ed2: pair('ed2', 'Ed25519', 'ed25519', {}),
    weak: pair('weak', 'RS256', 'rsa', { modulusLength: 1024 }),
  };
});

function sign(alg: string, key: KeyObject, input: string): Buffer {
  const data = Buffer.from(input);
  if (alg === 'EdDSA' || alg === 'Ed25519') return crypto.sign(null, data, key);
  const digest = `sha${alg.slice(2)}`;
  if (alg.startsWith('ES')) return crypto.sign(digest, data, { key, dsaEncoding: 'ieee-p1363' });
  if (alg.startsWith('PS')) return crypto.sign(digest, data, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(alg.slice(2)) / 8 });
  return crypto.sign(digest, data, key);
}

/** A token from exact segment texts: `header` and `payload` are JSON texts, encoded as given by `encode`. */
function token(p: Pair, options: { alg?: string; header?: string; payload?: string; encode?: (s: string) => string } = {}): string {
  const alg = options.alg ?? p.alg;
  const encode = options.encode ?? ((s: string) => s);
  const input = `${encode(b64u(options.header ?? JSON.stringify({ alg, kid: p.kid })))}.${encode(b64u(options.payload ?? claimsText()))}`;
  return `${input}.${b64u(sign(alg, p.privateKey, input))}`;
}

function verifier(keys: Pair[] = Object.values(pairs)) {
  const set = createLocalJWKSet({ keys: keys.map((k) => k.jwk) });
  return createLocalJwtVerifier({ issuer: ISSUER, audience: RESOURCE, getKeySet: () => set, algorithms: ALL, clockSkewSeconds: 0 });
}

async function refused(jwt: string, description: string, v = verifier()): Promise<void> {
  const err = await rejection(v.verify(jwt));
  expect(err.status).toBe(401);
  expect(err.code).toBe('invalid_token');
  expect(err.description).toBe(description);
}

describe('JWT verifier: each signature family through node:crypto', () => {
  it.each([
    ['es256', 'ES256'],
    ['es384', 'ES384'],
    ['es512', 'ES512'],
    ['rs256', 'RS256'],
    ['ps256', 'PS256'],
    ['ps512', 'PS512'],
    ['ed', 'EdDSA'],
    ['ed2', 'Ed25519'],
  ])('accepts %s signing %s, and refuses it with one bit of the signature changed', async (name, alg) => {
    const good = token(pairs[name]!, { alg, header: JSON.stringify({ alg, kid: pairs[name]!.kid }) });
    await expect(verifier().verify(good)).resolves.toMatchObject({ subject: 'user-1', issuer: ISSUER });
    const sig = Buffer.from(good.slice(good.lastIndexOf('.') + 1), 'base64url');
    sig[sig.length >> 1]! ^= 0x01;
    await refused(`${good.slice(0, good.lastIndexOf('.') + 1)}${b64u(sig)}`, 'Invalid token signature');
  });

  it('refuses an ECDSA signature in DER (RFC 7518 §3.4 asks for R || S)', async () => {
    const input = `${b64u(JSON.stringify({ alg: 'ES256', kid: 'es256' }))}.${b64u(claimsText())}`;
    const der = crypto.sign('sha256', Buffer.from(input), pairs.es256!.privateKey);
    await refused(`${input}.${b64u(der)}`, 'Invalid token signature');
  });

  it('refuses a PSS signature with another salt length', async () => {
    const input = `${b64u(JSON.stringify({ alg: 'PS256', kid: 'ps256' }))}.${b64u(claimsText())}`;
    const sig = crypto.sign('sha256', Buffer.from(input), { key: pairs.ps256!.privateKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 20 });
    await refused(`${input}.${b64u(sig)}`, 'Invalid token signature');
  });

  it('refuses a PKCS#1 v1.5 signature presented as PS256 with the same RSA key', async () => {
    const input = `${b64u(JSON.stringify({ alg: 'PS256', kid: 'ps256' }))}.${b64u(claimsText())}`;
    await refused(`${input}.${b64u(crypto.sign('sha256', Buffer.from(input), pairs.ps256!.privateKey))}`, 'Invalid token signature');
  });
});

describe('JWT verifier: keys', () => {
  it('refuses an RSA key under 2048 bits, as jose does', async () => {
    await refused(token(pairs.weak!), 'Invalid token');
  });

  it('selects by kid and the key alg: a PS256 header naming an RS256 key finds no key', async () => {
    await refused(token(pairs.rs256!, { alg: 'PS256', header: JSON.stringify({ alg: 'PS256', kid: 'rs256' }) }), 'No matching signing key');
  });

  it('refuses a key given directly for another algorithm or curve', async () => {
    const { publicKey } = await generateKeyPair('ES256');
    const v = createLocalJwtVerifier({ issuer: ISSUER, audience: RESOURCE, getKeySet: () => publicKey, algorithms: ALL });
    await refused(token(pairs.es384!, { header: JSON.stringify({ alg: 'ES384' }) }), 'Invalid token', v);
  });

  it('makes one KeyObject per CryptoKey and refuses a private or mismatched key', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    expect(verificationKey(publicKey, 'ES256')).toBe(verificationKey(publicKey, 'ES256'));
    expect(() => verificationKey(publicKey, 'ES384')).toThrow(UnusableKey);
    expect(() => verificationKey(publicKey, 'RS256')).toThrow(UnusableKey);
    expect(() => verificationKey(privateKey, 'ES256')).toThrow(UnusableKey);
    const rs = (await importJWK({ ...(await exportJWK((await generateKeyPair('RS256')).publicKey)) }, 'RS256')) as CryptoKey;
    expect(() => verificationKey(rs, 'PS256')).toThrow(UnusableKey);
    expect(() => verificationKey(rs, 'RS384')).toThrow(UnusableKey);
  });
});

describe('JWT verifier: strict encoding (where jose was lenient)', () => {
  it('refuses base64 padding in any segment', async () => {
    const pad = (s: string) => s + '='.repeat((4 - (s.length % 4)) % 4);
    const header = JSON.stringify({ alg: 'ES256', kid: 'es256', x: 'ab' }); // a length that needs padding
    await refused(token(pairs.es256!, { header, encode: pad }), 'Malformed token header');
    const good = token(pairs.es256!);
    const sig = good.slice(good.lastIndexOf('.') + 1);
    expect(sig.length % 4).not.toBe(0);
    await refused(`${good}${'='.repeat(4 - (sig.length % 4))}`, 'Malformed token signature');
  });

  it('refuses a second spelling of the same signature (non-zero unused bits)', async () => {
    const good = token(pairs.es256!);
    await expect(verifier().verify(good)).resolves.toBeDefined();
    const last = good.at(-1)!;
    const twin = good.slice(0, -1) + String.fromCharCode(last.charCodeAt(0) + 1);
    expect(Buffer.from(twin.slice(twin.lastIndexOf('.') + 1), 'base64url')).toEqual(Buffer.from(good.slice(good.lastIndexOf('.') + 1), 'base64url'));
    await refused(twin, 'Malformed token signature');
  });

  it('refuses the standard alphabet and other characters', async () => {
    expect(decodeBase64UrlStrict('ab+/')).toBeUndefined();
    expect(decodeBase64UrlStrict('ab c')).toBeUndefined();
    expect(decodeBase64UrlStrict('abcde')).toBeUndefined();
    expect(decodeBase64UrlStrict('ab-_')).toEqual(Buffer.from('ab-_', 'base64url'));
    expect(decodeBase64UrlStrict('')).toEqual(Buffer.alloc(0));
  });

  it('refuses duplicate header members: two algs never reach key selection', async () => {
    await refused(token(pairs.es256!, { header: '{"alg":"ES256","kid":"es256","alg":"ES256"}' }), 'Malformed token header');
    await refused(token(pairs.es256!, { header: '{"alg":"ES256","kid":"other","kid":"es256"}' }), 'Malformed token header');
  });

  it('refuses duplicate claims, whichever value comes last', async () => {
    await refused(token(pairs.es256!, { payload: claimsText(`,"aud":"https://other.example.com/mcp"`) }), 'Invalid token');
    await refused(token(pairs.es256!, { payload: `{"aud":"https://other.example.com/mcp",${claimsText().slice(1)}` }), 'Invalid token');
    await refused(token(pairs.es256!, { payload: claimsText(`,"sub":"admin"`) }), 'Invalid token');
  });

  it('refuses claims other readers read differently: overflow, lone surrogate, BOM, invalid UTF-8', async () => {
    await refused(token(pairs.es256!, { payload: claimsText(',"n":1e400') }), 'Invalid token');
    await refused(token(pairs.es256!, { payload: claimsText(',"s":"\\ud800"') }), 'Invalid token');
    await refused(token(pairs.es256!, { payload: `\ufeff${claimsText()}` }), 'Invalid token');
    const input = `${b64u(JSON.stringify({ alg: 'ES256', kid: 'es256' }))}.${b64u(Buffer.concat([Buffer.from(claimsText().slice(0, -1)), Buffer.from(',"s":"\xff"}', 'latin1')]))}`;
    await refused(`${input}.${b64u(sign('ES256', pairs.es256!.privateKey, input))}`, 'Invalid token');
  });

  it('reads a JSON object only, and no deeper than 32 levels', () => {
    expect(decodeJsonSegment(b64u('[]'))).toBeUndefined();
    expect(decodeJsonSegment(b64u('null'))).toBeUndefined();
    expect(decodeJsonSegment(b64u(`{"a":${'['.repeat(31)}${']'.repeat(31)}}`))).toBeDefined();
    expect(decodeJsonSegment(b64u(`{"a":${'['.repeat(32)}${']'.repeat(32)}}`))).toBeUndefined();
  });

  it('keeps __proto__ an own claim, as JSON.parse does', async () => {
    const auth = await verifier().verify(token(pairs.es256!, { payload: claimsText(',"__proto__":{"admin":true}') }));
    expect(Object.getPrototypeOf(auth.claims)).toBe(Object.prototype);
    expect((auth.claims as { admin?: unknown }).admin).toBeUndefined();
  });
});
