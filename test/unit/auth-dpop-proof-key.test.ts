// DPoP proof keys kept by thumbprint (src/auth/dpop-proof-key.ts): the
// thumbprint is RFC 7638's (jose's), a client's second proof reuses the
// imported key, a JWK with any other member is imported afresh each time, a
// key kept for one algorithm never serves another, and a kept key still
// verifies each proof's own signature. Then a property: over random proofs
// and mutations, verifyDpopProof accepts exactly when jose (jwtVerify with
// EmbeddedJWK, as the check was) accepts a proof with strict encoding.
import crypto, { KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { calculateJwkThumbprint, EmbeddedJWK, generateKeyPair, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { InvalidDpopProof, verifyDpopProof, type ProofExpectations } from '../../src/auth/dpop-proof.js';
import { jwkThumbprint, proofKey } from '../../src/auth/dpop-proof-key.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';

const HTU = 'https://gw.example/mcp';
const expected: ProofExpectations = { method: 'POST', htu: HTU };

let keys: DpopKey[];
beforeAll(async () => {
  keys = await Promise.all(['ES256', 'ES384', 'PS256', 'RS256', 'EdDSA'].map((alg) => dpopKey(alg)));
});

async function refused(p: string): Promise<void> {
  await expect(verifyDpopProof(p, expected)).rejects.toBeInstanceOf(InvalidDpopProof);
}

describe('DPoP proof keys', () => {
  it("computes RFC 7638 thumbprints as jose does, for EC, RSA and OKP keys", async () => {
    for (const key of keys) expect(jwkThumbprint(key.publicJwk)).toBe(await calculateJwkThumbprint(key.publicJwk, 'sha256'));
    expect(jwkThumbprint({ kty: 'EC', crv: 'P-256', x: 'a' })).toBeUndefined();
    expect(jwkThumbprint({ kty: 'oct', k: 'a' })).toBeUndefined();
    expect(jwkThumbprint({ kty: 'RSA', e: 1, n: 'a' })).toBeUndefined();
  });

  it("reuses a client's imported key, and imports a JWK with other members each time", async () => {
    const [es] = keys;
    const header = { alg: 'ES256', typ: 'dpop+jwt', jwk: es!.publicJwk };
    const first = await proofKey(header, 'ES256');
    expect((await proofKey({ ...header, jwk: { ...es!.publicJwk } }, 'ES256'))!.key).toBe(first!.key);
    const withKid = { ...header, jwk: { ...es!.publicJwk, kid: 'k' } };
    expect((await proofKey(withKid, 'ES256'))!.key).not.toBe((await proofKey(withKid, 'ES256'))!.key);
    expect((await proofKey(withKid, 'ES256'))!.jkt).toBe(first!.jkt);
  });

  it('never serves a key kept for one algorithm to another', async () => {
    const es = keys[0]!;
    await expect(verifyDpopProof(await proof(es, { htm: 'POST', htu: HTU }), expected)).resolves.toBeDefined();
    const rsa = keys[2]!;
    await expect(verifyDpopProof(await proof(rsa, { htm: 'POST', htu: HTU }), expected)).resolves.toBeDefined();
    // A PKCS#1 v1.5 signature (RS256's) with the same RSA key under the PS256 header: refused although PS256 is kept.
    const psProof = await proof(rsa, { htm: 'POST', htu: HTU });
    const input = psProof.slice(0, psProof.lastIndexOf('.'));
    const pkcs1 = crypto.sign('sha256', Buffer.from(input), KeyObject.from(rsa.privateKey as Parameters<typeof KeyObject.from>[0]));
    await refused(`${input}.${pkcs1.toString('base64url')}`);
    // A P-256 key under ES384: the cached ES256 key is not used, jose's import refuses the curve.
    await refused(await proof({ ...es, alg: 'ES384' }, { htm: 'POST', htu: HTU, signWith: keys[1]!.privateKey }));
  });

  it("still checks each proof's signature when its key is kept", async () => {
    const es = keys[0]!;
    await verifyDpopProof(await proof(es, { htm: 'POST', htu: HTU }), expected);
    const other = await generateKeyPair('ES256');
    await refused(await proof(es, { htm: 'POST', htu: HTU, signWith: other.privateKey }));
  });

  it("applies jose's import rules to a JWK with other members: use, alg, key_ops", async () => {
    const es = keys[0]!;
    await refused(await proof(es, { htm: 'POST', htu: HTU, header: { jwk: { ...es.publicJwk, use: 'enc' } } }));
    await refused(await proof(es, { htm: 'POST', htu: HTU, header: { jwk: { ...es.publicJwk, alg: 'ES384' } } }));
    await expect(verifyDpopProof(await proof(es, { htm: 'POST', htu: HTU, header: { jwk: { ...es.publicJwk, alg: 'ES256', use: 'sig' } } }), expected)).resolves.toBeDefined();
  });
});

/** jose's check as it was: the signature with the embedded key, typ, the algorithm list, the times. */
async function joseAccepts(p: string): Promise<boolean> {
  try {
    await jwtVerify(p, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: [...DPOP_ALGORITHMS] });
    return true;
  } catch {
    return false;
  }
}

const strict = (p: string) => p.split('.').every((s) => /^[A-Za-z0-9_-]*$/.test(s) && Buffer.from(s, 'base64url').toString('base64url') === s);

describe('DPoP proof signature against jose (differential)', () => {
  it('accepts exactly the strict proofs jose accepts', async () => {
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: 4 }),
        fc.oneof(
          fc.constant({ kind: 'none' as const }),
          fc.record({ kind: fc.constant('flip' as const), part: fc.nat({ max: 2 }), at: fc.nat(), by: fc.constantFrom(...'AQw_-9=+'.split('')) }),
          fc.record({ kind: fc.constant('alg' as const), alg: fc.constantFrom('ES256', 'ES384', 'RS256', 'PS256', 'EdDSA', 'Ed25519', 'HS256') }),
          fc.record({ kind: fc.constant('jwk' as const), member: fc.constantFrom('kid', 'alg', 'use', 'key_ops', 'ext', 'crv', 'x', 'n'), value: fc.oneof(fc.string({ maxLength: 4 }), fc.constant(['verify']), fc.constant(true), fc.constant('sig')) }),
          fc.record({ kind: fc.constant('signer' as const), other: fc.nat({ max: 4 }) }),
          fc.record({ kind: fc.constant('time' as const), claim: fc.constantFrom('exp', 'nbf', 'iat'), delta: fc.integer({ min: -600, max: 600 }), asString: fc.boolean() }),
        ),
        async (index, change) => {
          const key = keys[index]!;
          const now = Math.floor(Date.now() / 1000);
          let p: string;
          if (change.kind === 'alg') p = await proof({ ...key, alg: change.alg }, { htm: 'POST', htu: HTU }).catch(() => '');
          else if (change.kind === 'jwk') p = await proof(key, { htm: 'POST', htu: HTU, header: { jwk: { ...key.publicJwk, [change.member]: change.value } } });
          else if (change.kind === 'signer') p = await proof(key, { htm: 'POST', htu: HTU, signWith: keys[change.other]!.privateKey }).catch(() => '');
          else if (change.kind === 'time') {
            const value = now + (change.delta === 0 ? 1 : change.delta) * (change.claim === 'iat' ? 0.05 : 1);
            p = await proof(key, { htm: 'POST', htu: HTU, claims: { [change.claim]: change.asString ? String(value) : Math.floor(value) } });
          } else {
            p = await proof(key, { htm: 'POST', htu: HTU });
            if (change.kind === 'flip') {
              const parts = p.split('.');
              const s = parts[change.part]!;
              const i = change.at % s.length;
              parts[change.part] = s.slice(0, i) + change.by + s.slice(i + 1);
              p = parts.join('.');
            }
          }
          if (p === '') return; // a key that cannot sign that algorithm: no proof to judge
          const ours = await verifyDpopProof(p, expected).then(
            () => true,
            (err: unknown) => {
              expect(err).toBeInstanceOf(InvalidDpopProof);
              return false;
            },
          );
          // iat's window (60 s) is the gateway's own check after the signature: judged as before, by checkClaims.
          const theirs = (await joseAccepts(p)) && strict(p);
          if (ours) accepted++;
          if (theirs && !ours) {
            const iat = (JSON.parse(Buffer.from(p.split('.')[1]!, 'base64url').toString()) as { iat?: unknown }).iat;
            expect(typeof iat !== 'number' || Math.abs(now - iat) > 60).toBe(true);
          } else expect(ours).toBe(theirs);
        },
      ),
      { numRuns: 600 },
    );
    expect(accepted).toBeGreaterThan(50);
  }, 180_000);
});
