// RFC 9449 §4.3: every check of a DPoP proof, each with its negative, and a
// property: whatever claim of a valid proof is changed, the proof is refused.
import fc from 'fast-check';
import { base64url, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { InvalidDpopProof, MAX_PROOF_LENGTH, PROOF_WINDOW_SECONDS, verifyDpopProof, type ProofExpectations } from '../../src/auth/dpop-proof.js';
import { normalizedHttpUri } from '../../src/config/urls.js';
import { athOf, dpopKey, proof, type DpopKey } from '../helpers/dpop.js';

const HTU = 'https://gw.example/mcp';
const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln';
const expected = (more: Partial<ProofExpectations> = {}): ProofExpectations => ({ method: 'POST', htu: HTU, accessTokenHash: athOf(TOKEN), ...more });

let key: DpopKey;
beforeAll(async () => {
  key = await dpopKey('ES256');
});

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidDpopProof);
  return (err as Error).message;
}

describe('a valid proof', () => {
  it.each(['ES256', 'ES384', 'PS256', 'RS256', 'EdDSA'])('%s: accepted, with the key thumbprint (RFC 7638) and jti', async (alg) => {
    const k = await dpopKey(alg);
    const p = await proof(k, { htm: 'POST', htu: HTU, token: TOKEN, claims: { jti: 'j-1' } });
    await expect(verifyDpopProof(p, expected())).resolves.toMatchObject({ jkt: k.jkt, jti: 'j-1' });
  });

  it('at the token endpoint (no access token): ath not required', async () => {
    const p = await proof(key, { htm: 'POST', htu: 'https://gw.example/token' });
    await expect(verifyDpopProof(p, { method: 'POST', htu: 'https://gw.example/token' })).resolves.toMatchObject({ jkt: key.jkt });
  });

  it('htu compared after normalisation, query and fragment ignored (§4.3)', async () => {
    for (const htu of ['HTTPS://GW.EXAMPLE:443/mcp', 'https://gw.example/mcp?x=1', 'https://gw.example/mcp#f', 'https://gw.example/%6Dcp', 'https://gw.example/a/../mcp']) {
      const p = await proof(key, { htm: 'POST', htu, token: TOKEN });
      await expect(verifyDpopProof(p, expected()), htu).resolves.toBeDefined();
    }
  });

  it('iat at the edges of the window', async () => {
    for (const offset of [-PROOF_WINDOW_SECONDS, PROOF_WINDOW_SECONDS]) {
      const nowSeconds = Math.floor(Date.now() / 1000);
      const p = await proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { iat: nowSeconds + offset } });
      await expect(verifyDpopProof(p, expected({ nowSeconds }))).resolves.toBeDefined();
    }
  });
});

describe('refused proofs (each check of §4.3)', () => {
  const cases: Array<[string, () => Promise<string>, RegExp]> = [
    ['wrong method', () => proof(key, { htm: 'GET', htu: HTU, token: TOKEN }), /htm/],
    ['method in lower case', () => proof(key, { htm: 'post', htu: HTU, token: TOKEN }), /htm/],
    ['wrong path', () => proof(key, { htm: 'POST', htu: 'https://gw.example/other', token: TOKEN }), /htu/],
    ['wrong host', () => proof(key, { htm: 'POST', htu: 'https://evil.example/mcp', token: TOKEN }), /htu/],
    ['wrong scheme', () => proof(key, { htm: 'POST', htu: 'http://gw.example/mcp', token: TOKEN }), /htu/],
    ['trailing slash', () => proof(key, { htm: 'POST', htu: 'https://gw.example/mcp/', token: TOKEN }), /htu/],
    ['encoded slash is not a slash', () => proof(key, { htm: 'POST', htu: 'https://gw.example%2Fmcp', token: TOKEN }), /htu/],
    ['user information in htu', () => proof(key, { htm: 'POST', htu: 'https://u@gw.example/mcp', token: TOKEN }), /htu/],
    ['htu not a URL', () => proof(key, { htm: 'POST', htu: '/mcp', token: TOKEN }), /htu/],
    ['stale iat', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { iat: Math.floor(Date.now() / 1000) - PROOF_WINDOW_SECONDS - 5 } }), /iat/],
    ['future iat', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { iat: Math.floor(Date.now() / 1000) + PROOF_WINDOW_SECONDS + 5 } }), /iat/],
    ['no iat', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { iat: undefined } }), /iat/],
    ['iat a string', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { iat: String(Math.floor(Date.now() / 1000)) } }), /./],
    ['no jti', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { jti: undefined } }), /jti/],
    ['huge jti', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims: { jti: 'j'.repeat(300) } }), /jti/],
    ['missing ath', () => proof(key, { htm: 'POST', htu: HTU }), /ath/],
    ['ath of another token', () => proof(key, { htm: 'POST', htu: HTU, token: `${TOKEN}x` }), /ath/],
    ['typ JWT', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, header: { typ: 'JWT' } }), /typ/],
    ['no typ', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, header: { typ: undefined } }), /typ/],
    ['no jwk', () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, header: { jwk: undefined } }), /jwk/],
    ['signed by another key than the jwk', async () => proof(key, { htm: 'POST', htu: HTU, token: TOKEN, signWith: (await dpopKey('ES256')).privateKey }), /signature/],
  ];
  it.each(cases)('%s', async (_name, make, reason) => {
    expect(await refusal(verifyDpopProof(await make(), expected()))).toMatch(reason);
  });

  it('a private key in jwk (the client leaking its key) is refused before any crypto', async () => {
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const privateJwk = await exportJWK(privateKey);
    const p = await proof(key, { htm: 'POST', htu: HTU, token: TOKEN, header: { jwk: privateJwk }, signWith: privateKey });
    expect(await refusal(verifyDpopProof(p, expected()))).toMatch(/public/);
  });

  it('alg none and HS256 (a symmetric "proof" proves no key)', async () => {
    const secret = new TextEncoder().encode('k'.repeat(32));
    const hs = await proof(key, { htm: 'POST', htu: HTU, token: TOKEN, header: { alg: 'HS256', jwk: { kty: 'oct', k: base64url.encode(secret) } }, signWith: secret });
    expect(await refusal(verifyDpopProof(hs, expected()))).toMatch(/algorithm/);
    const [, payload] = (await proof(key, { htm: 'POST', htu: HTU, token: TOKEN })).split('.');
    const noneHeader = base64url.encode(JSON.stringify({ typ: 'dpop+jwt', alg: 'none', jwk: key.publicJwk }));
    expect(await refusal(verifyDpopProof(`${noneHeader}.${payload}.`, expected()))).toMatch(/algorithm/);
  });

  it('not a JWS: JWE-shaped, garbage, oversized', async () => {
    expect(await refusal(verifyDpopProof('a.b.c.d.e', expected()))).toMatch(/signed JWT/);
    expect(await refusal(verifyDpopProof('not-a-jwt', expected()))).toMatch(/signed JWT/);
    expect(await refusal(verifyDpopProof('x.y.z', expected()))).toMatch(/header/);
    expect(await refusal(verifyDpopProof(`${'a'.repeat(MAX_PROOF_LENGTH)}.b.c`, expected()))).toMatch(/too large/);
  });

  it('a jwk that does not fit alg (an RSA key under ES256)', async () => {
    const rsa = await dpopKey('RS256');
    const { privateKey } = await generateKeyPair('ES256');
    const p = await new SignJWT({ jti: 'x', iat: Math.floor(Date.now() / 1000), htm: 'POST', htu: HTU, ath: athOf(TOKEN) })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: rsa.publicJwk })
      .sign(privateKey);
    await refusal(verifyDpopProof(p, expected()));
  });
});

describe('property: changing any claim of a valid proof gets it refused', () => {
  it('htm, htu, ath, iat (outside the window) or the signature', async () => {
    const mutations = fc.oneof(
      fc.record({ htm: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'post', 'POST ', '') }),
      fc.record({ htu: fc.webUrl({ withQueryParameters: true }).filter((u) => normalizedHttpUri(u) !== HTU) }),
      fc.record({ ath: fc.string({ minLength: 1, maxLength: 64 }).filter((a) => a !== athOf(TOKEN)) }),
      fc.record({ iat: fc.oneof(fc.integer({ min: PROOF_WINDOW_SECONDS + 2, max: 10 ** 7 }), fc.integer({ min: -(10 ** 7), max: -PROOF_WINDOW_SECONDS - 2 })).map((d) => Math.floor(Date.now() / 1000) + d) }),
    );
    await fc.assert(
      fc.asyncProperty(mutations, async (claims) => {
        const p = await proof(key, { htm: 'POST', htu: HTU, token: TOKEN, claims });
        await refusal(verifyDpopProof(p, expected()));
      }),
      { numRuns: 60 },
    );
  });

  it('any byte flipped in the payload or the signature', async () => {
    const valid = await proof(key, { htm: 'POST', htu: HTU, token: TOKEN });
    const [h, payload, sig] = valid.split('.') as [string, string, string];
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.nat(), fc.integer({ min: 1, max: 63 }), async (inPayload, at, shift) => {
        const part = inPayload ? payload : sig;
        const i = at % (part.length - 1);
        const changed = part.slice(0, i) + alphabet[(alphabet.indexOf(part[i]!) + shift) % 64] + part.slice(i + 1);
        await refusal(verifyDpopProof(inPayload ? `${h}.${changed}.${sig}` : `${h}.${payload}.${changed}`, expected()));
      }),
      { numRuns: 60 },
    );
  });
});

describe('normalizedHttpUri (RFC 3986 §6.2.2, §6.2.3)', () => {
  it.each([
    ['https://GW.Example/mcp', 'https://gw.example/mcp'],
    ['https://gw.example:443/mcp', 'https://gw.example/mcp'],
    ['http://gw.example:80/mcp', 'http://gw.example/mcp'],
    ['https://gw.example:8443/mcp', 'https://gw.example:8443/mcp'],
    ['https://gw.example', 'https://gw.example/'],
    ['https://gw.example/%7Euser/%2f', 'https://gw.example/~user/%2F'],
    ['https://gw.example/a/./b/../c?q#f', 'https://gw.example/a/c'],
  ])('%s → %s', (input, output) => {
    expect(normalizedHttpUri(input)).toBe(output);
  });

  it.each(['/mcp', 'ftp://gw.example/', 'https://u:p@gw.example/', 'not a url'])('%s → undefined', (input) => {
    expect(normalizedHttpUri(input)).toBeUndefined();
  });
});
