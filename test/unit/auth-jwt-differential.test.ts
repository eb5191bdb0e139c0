// The JWT verifier (signature with node:crypto, strict base64url and JSON)
// against jose's jwtVerify with the same options (test/helpers/jose-jwt-reference.ts,
// the verifier as it was): for random valid tokens of every algorithm and for
// random mutations of them, it accepts exactly when jose accepts and the token
// is strict (every segment canonical base64url without padding, header and
// claims read by the strict JSON reader: no duplicate member names), with the
// same claims; when both refuse, with the same HTTP status. The keys are real
// (node:crypto), the key set is jose's own local JWKS; nothing is mocked.
import crypto, { type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { createLocalJWKSet, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLocalJwtVerifier } from '../../src/auth/jwt-verifier.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { parseStrictJson } from '../../src/policy/strict-json.js';
import { joseReference, type ReferenceOutcome } from '../helpers/jose-jwt-reference.js';

const ISSUER = 'https://idp.example.com/tenant';
const RESOURCE = 'https://mcp.example.com/github/mcp';
const SKEW = 30;
const ALLOWED = ['RS256', 'PS256', 'PS384', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

interface SigningKey {
  kid: string;
  alg: string;
  privateKey: KeyObject;
  jwk: JWK;
}

function keyPair(kid: string, alg: string, type: 'ec' | 'rsa' | 'rsa-pss' | 'ed25519', options: object, publish = true): SigningKey {
  const { privateKey, publicKey } = crypto.generateKeyPairSync(type as 'ec', options as { namedCurve: string });
  // An RSA key for PS* is published as an RSA JWK, as IdPs do.
  const jwk = { ...(publicKey.export({ format: 'jwk' }) as JWK), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, jwk: publish ? jwk : { ...jwk, kid: `${kid}-unpublished` } };
}

let keys: SigningKey[];
let attacker: SigningKey;
let keySet: ReturnType<typeof createLocalJWKSet>;

beforeAll(() => {
  keys = [
    keyPair('es256-a', 'ES256', 'ec', { namedCurve: 'P-256' }),
    keyPair('es256-b', 'ES256', 'ec', { namedCurve: 'P-256' }),
    keyPair('es384', 'ES384', 'ec', { namedCurve: 'P-384' }),
    keyPair('es512', 'ES512', 'ec', { namedCurve: 'P-521' }),
    keyPair('rs256', 'RS256', 'rsa', { modulusLength: 2048 }),
    keyPair('ps256', 'PS256', 'rsa', { modulusLength: 2048 }),
    keyPair('ps384', 'PS384', 'rsa', { modulusLength: 2048 }),
    keyPair('ed', 'EdDSA', 'ed25519', {}),
    // Published, but too short for jose (and so for the gateway): every token it signs is refused.
    keyPair('rs-weak', 'RS256', 'rsa', { modulusLength: 1024 }),
  ];
  // Same kid and algorithm as es256-a, not in the key set.
  attacker = { ...keyPair('attacker', 'ES256', 'ec', { namedCurve: 'P-256' }), kid: 'es256-a' };
  keySet = createLocalJWKSet({ keys: keys.map((key) => key.jwk) });
});

const b64u = (text: string | Buffer) => Buffer.from(text).toString('base64url');

function signature(alg: string, key: KeyObject, input: string): Buffer {
  const data = Buffer.from(input);
  if (alg === 'EdDSA' || alg === 'Ed25519') return crypto.sign(null, data, key);
  const digest = `sha${alg.slice(2)}`;
  if (alg.startsWith('ES')) return crypto.sign(digest, data, { key, dsaEncoding: 'ieee-p1363' });
  if (alg.startsWith('PS')) return crypto.sign(digest, data, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(alg.slice(2)) / 8 });
  return crypto.sign(digest, data, key);
}

/** A token from the exact header and payload texts given (so duplicates and odd encodings can be made), signed with `key` for `alg`. */
interface Draft {
  headerText: string;
  payloadText: string;
  /** Applied to each encoded segment before signing: padding, standard alphabet. */
  encode: (segment: string) => string;
  alg: string;
  key: KeyObject;
}

function assemble(draft: Draft): string {
  const input = `${draft.encode(b64u(draft.headerText))}.${draft.encode(b64u(draft.payloadText))}`;
  const signingAlg = draft.alg === 'Ed25519' ? 'EdDSA' : draft.alg;
  let sig: Buffer;
  try {
    sig = signature(signingAlg, draft.key, input);
  } catch {
    sig = crypto.randomBytes(64); // an alg the key cannot sign: any bytes
  }
  return `${input}.${b64u(sig)}`;
}

const now = () => Math.floor(Date.now() / 1000);

const jsonValue = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string({ maxLength: 6 }), { maxLength: 3 }));
const claimName = fc.string({ minLength: 1, maxLength: 8 }).filter((name) => !['iss', 'aud', 'sub', 'exp', 'nbf', 'iat', '__proto__'].includes(name));

/** A valid token's parts: any key of the set, with or without kid, random claims. */
const validDraft = fc
  .record({
    keyIndex: fc.nat({ max: 7 }),
    withKid: fc.boolean(),
    typ: fc.constantFrom(undefined, 'at+jwt', 'JWT'),
    sub: fc.string({ minLength: 1, maxLength: 20 }),
    audAsArray: fc.boolean(),
    otherAudiences: fc.array(fc.webUrl(), { maxLength: 2 }),
    expIn: fc.integer({ min: 5, max: 86_400 }),
    nbfAgo: fc.option(fc.integer({ min: -SKEW + 5, max: 3600 }), { nil: undefined }),
    iatAgo: fc.option(fc.integer({ min: -3600, max: 3600 }), { nil: undefined }),
    extra: fc.dictionary(claimName, jsonValue, { maxKeys: 4 }),
    edName: fc.constantFrom('EdDSA', 'Ed25519'),
  })
  .map((r) => {
    const key = keys[r.keyIndex]!;
    const alg = key.alg === 'EdDSA' ? r.edName : key.alg;
    const header = { alg, ...(r.withKid && { kid: key.kid }), ...(r.typ && { typ: r.typ }) };
    const t = now();
    const payload: Record<string, unknown> = {
      ...r.extra,
      iss: ISSUER,
      aud: r.audAsArray ? [...r.otherAudiences, RESOURCE] : RESOURCE,
      sub: r.sub,
      exp: t + r.expIn,
      ...(r.nbfAgo !== undefined && { nbf: t - r.nbfAgo }),
      ...(r.iatAgo !== undefined && { iat: t - r.iatAgo }),
    };
    return { header, payload, alg, key: key.privateKey };
  });

type Valid = { header: Record<string, unknown>; payload: Record<string, unknown>; alg: string; key: KeyObject };
const identity = (segment: string) => segment;
const draftOf = (v: Valid, overrides: Partial<Draft> = {}): Draft => ({
  headerText: JSON.stringify(v.header),
  payloadText: JSON.stringify(v.payload),
  encode: identity,
  alg: v.alg,
  key: v.key,
  ...overrides,
});

/** Replace the character at `at` (mod length) of segment `part` with `by`. */
function flip(token: string, part: number, at: number, by: string): string {
  const parts = token.split('.');
  const segment = parts[part]!;
  if (segment.length === 0) return token;
  const i = at % segment.length;
  parts[part] = segment.slice(0, i) + by + segment.slice(i + 1);
  return parts.join('.');
}

/** The mutations: each a function of a valid token's parts to a token. */
const mutation: fc.Arbitrary<{ name: string; apply: (v: Valid) => string }> = fc.oneof(
  fc.constant({ name: 'none', apply: (v: Valid) => assemble(draftOf(v)) }),
  fc.record({ part: fc.nat({ max: 2 }), at: fc.nat(), by: fc.constantFrom(...'AQgw_-09zZ=+/. %é'.split('')) }).map(({ part, at, by }) => ({
    name: `flip ${part}`,
    apply: (v: Valid) => flip(assemble(draftOf(v)), part, at, by),
  })),
  fc.constantFrom('none', 'HS256', 'RS256', 'PS256', 'ES256', 'ES384', 'EdDSA', 'Ed25519', 'RS512', 'es256', '').map((alg) => ({
    name: `alg ${alg}`,
    apply: (v: Valid) => assemble(draftOf(v, { headerText: JSON.stringify({ ...v.header, alg }), alg })),
  })),
  fc.record({ name: fc.constantFrom('jku', 'x5u', 'jwk', 'x5c', 'crit', 'b64', 'zip', 'x', 'kid', 'typ'), value: fc.oneof(jsonValue, fc.constant(['b64']), fc.constant(false)) }).map(({ name, value }) => ({
    name: `header ${name}`,
    apply: (v: Valid) => assemble(draftOf(v, { headerText: JSON.stringify({ ...v.header, [name]: value }) })),
  })),
  fc.constantFrom<[string, (s: string) => string]>(
    ['padding', (s) => s + '='.repeat((4 - (s.length % 4)) % 4)],
    ['one =', (s) => `${s}=`],
    ['standard alphabet', (s) => s.replaceAll('-', '+').replaceAll('_', '/')],
  ).map(([name, encode]) => ({ name: `encoding ${name}`, apply: (v: Valid) => assemble(draftOf(v, { encode })) })),
  fc.record({ to: fc.constantFrom('pad', 'bits') }).map(({ to }) => ({
    name: `signature ${to}`,
    apply: (v: Valid) => {
      const token = assemble(draftOf(v));
      const sig = token.slice(token.lastIndexOf('.') + 1);
      const last = sig.at(-1)!;
      // 'bits': the same bytes with a non-zero unused bit (a second spelling of one signature).
      const variant = to === 'pad' ? sig + '='.repeat((4 - (sig.length % 4)) % 4) : sig.slice(0, -1) + String.fromCharCode(last.charCodeAt(0) + 1);
      return `${token.slice(0, token.lastIndexOf('.') + 1)}${variant}`;
    },
  })),
  fc.constant({ name: 'wrong key', apply: (v: Valid) => assemble(draftOf(v, { alg: 'ES256', headerText: JSON.stringify({ ...v.header, alg: 'ES256', kid: 'es256-a' }), key: attacker.privateKey })) }),
  fc.constant({ name: 'weak key', apply: (v: Valid) => assemble(draftOf(v, { alg: 'RS256', headerText: JSON.stringify({ alg: 'RS256', kid: 'rs-weak' }), key: keys[8]!.privateKey })) }),
  fc
    .record({
      claim: fc.constantFrom('exp', 'nbf', 'iat', 'iss', 'aud', 'sub'),
      value: fc.oneof(
        jsonValue,
        fc.integer({ min: -100_000, max: 100_000 }).map((d) => now() + d),
        fc.constantFrom(ISSUER.toUpperCase(), `${ISSUER}/`, `${RESOURCE}/`, [RESOURCE.toUpperCase()], [], '', 1.5, 1e300, -0),
      ),
    })
    .map(({ claim, value }) => ({ name: `claim ${claim}`, apply: (v: Valid) => assemble(draftOf(v, { payloadText: JSON.stringify({ ...v.payload, [claim]: value }) })) })),
  fc.constantFrom('exp', 'iss', 'aud', 'sub').map((claim) => ({
    name: `missing ${claim}`,
    apply: (v: Valid) => {
      const { [claim]: _gone, ...rest } = v.payload;
      return assemble(draftOf(v, { payloadText: JSON.stringify(rest) }));
    },
  })),
  fc.record({ where: fc.constantFrom('payload', 'header'), name: fc.constantFrom('aud', 'iss', 'sub', 'exp', 'alg', 'kid', 'x'), value: jsonValue, first: fc.boolean() }).map(({ where, name, value, first }) => ({
    name: `duplicate ${where} ${name}`,
    apply: (v: Valid) => {
      const text = JSON.stringify(where === 'payload' ? v.payload : v.header);
      const member = `${JSON.stringify(name)}:${JSON.stringify(value)}`;
      const doubled = first ? `{${member},${text.slice(1)}` : `${text.slice(0, -1)},${member}}`;
      return assemble(draftOf(v, where === 'payload' ? { payloadText: doubled } : { headerText: doubled }));
    },
  })),
  fc
    .constantFrom<[string, (claims: string) => string]>(
      ['array', () => '[]'],
      ['string', () => '"x"'],
      ['null', () => 'null'],
      ['overflow', (c) => `{${c},"a":1e400}`],
      ['lone surrogate', (c) => `{${c},"a":"\\ud800"}`],
      ['BOM', (c) => `\ufeff{${c}}`],
      ['trailing space', (c) => `{${c}} `],
      ['trailing comma', (c) => `{${c},}`],
      ['deep', (c) => `{${c},"a":${'['.repeat(40)}${']'.repeat(40)}}`],
      ['__proto__', (c) => `{${c},"__proto__":{"admin":true}}`],
    )
    .map(([name, text]) => ({
      name: `payload ${name}`,
      apply: (v: Valid) => assemble(draftOf(v, { payloadText: text(`"iss":${JSON.stringify(ISSUER)},"aud":${JSON.stringify(RESOURCE)},"sub":"s","exp":${now() + 600}`) })),
    })),
);

/** Canonical base64url without padding, each segment: what the new verifier requires beyond jose. */
function strictSegments(token: string): boolean {
  const parts = token.split('.');
  if (parts.length !== 3) return true; // refused by both anyway
  return parts.every((part) => /^[A-Za-z0-9_-]*$/.test(part) && Buffer.from(part, 'base64url').toString('base64url') === part);
}

function strictJson(segment: string): boolean {
  try {
    if (!/^[A-Za-z0-9_-]*$/.test(segment)) return false;
    parseStrictJson(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.from(segment, 'base64url')), { maxDepth: 32 });
    return true;
  } catch {
    return false;
  }
}

function namesKid(token: string): boolean {
  try {
    return typeof (JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as { kid?: unknown }).kid === 'string';
  } catch {
    return false;
  }
}

async function outcome(token: string): Promise<ReferenceOutcome> {
  const verifier = createLocalJwtVerifier({ issuer: ISSUER, audience: RESOURCE, getKeySet: () => keySet, algorithms: ALLOWED, clockSkewSeconds: SKEW });
  try {
    const auth = await verifier.verify(token);
    return { ok: true, claims: auth.claims as Record<string, unknown> };
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    return { ok: false, status: err.status, description: err.description ?? '' };
  }
}

describe('JWT verifier against jose (differential)', () => {
  it('accepts exactly the strict tokens jose accepts, with the same claims; refuses the rest with the same status', async () => {
    const seen = new Map<string, { both: number; onlyJose: number; neither: number }>();
    await fc.assert(
      fc.asyncProperty(validDraft, mutation, async (valid, mutate) => {
        const token = mutate.apply(valid);
        const [ours, jose] = await Promise.all([outcome(token), joseReference(token, keySet, { issuer: ISSUER, audience: RESOURCE, algorithms: ALLOWED, clockSkewSeconds: SKEW })]);
        const strict = strictSegments(token) && strictJson(token.split('.')[0] ?? '') && strictJson(token.split('.')[1] ?? '');
        const kind = mutate.name.split(' ')[0]!;
        const tally = seen.get(kind) ?? { both: 0, onlyJose: 0, neither: 0 };
        seen.set(kind, tally);
        if (jose.ok && strict) {
          tally.both++;
          expect(ours).toEqual(jose);
        } else if (jose.ok) {
          tally.onlyJose++;
          expect(ours).toMatchObject({ ok: false, status: 401 });
        } else {
          tally.neither++;
          expect(ours).toMatchObject({ ok: false, status: jose.status });
          // The same reason too, for a strict token and one key: with several matching keys jose
          // reported the last key's failure (often "signature"), the new verifier the token's own.
          if (strict && namesKid(token)) expect(ours).toEqual(jose);
        }
      }),
      { numRuns: 3000 },
    );
    // The property saw each kind of case: accepted tokens, intended differences and refusals.
    const totals = [...seen.values()].reduce((a, t) => ({ both: a.both + t.both, onlyJose: a.onlyJose + t.onlyJose, neither: a.neither + t.neither }));
    expect(totals.both).toBeGreaterThan(100);
    expect(totals.onlyJose).toBeGreaterThan(20);
    expect(totals.neither).toBeGreaterThan(1000);
  }, 300_000);
});
