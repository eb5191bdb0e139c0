/**
 * Stateless DPoP nonces (RFC 9449 §8, §9): what one replica hands out every replica with the same
 * secret accepts for the current, previous and next slot, and nothing else — older slots, other
 * secrets, arbitrary strings and non-strings are refused. Properties over slots and inputs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createDpopNonces, NONCE_SLOT_SECONDS } from '../../src/auth/dpop-nonce.js';

const SECRET = 'a-shared-nonce-secret-of-32-characters-or-more';
const T0 = 1_790_000_000;

describe('createDpopNonces', () => {
  it('two instances with one secret (two replicas) hand out and accept the same nonce', () => {
    const a = createDpopNonces(SECRET);
    const b = createDpopNonces(SECRET);
    expect(a.current(T0)).toBe(b.current(T0));
    expect(b.accepts(a.current(T0), T0)).toBe(true);
  });

  it('a nonce changes every slot and is a short base64url string', () => {
    const nonces = createDpopNonces(SECRET);
    expect(nonces.current(T0)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(nonces.current(T0 + NONCE_SLOT_SECONDS)).not.toBe(nonces.current(T0));
  });

  it('accepts the current, previous and next slot; refuses two slots old (stale) and beyond', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_000_000_000 }), fc.integer({ min: -50, max: 50 }), (now, offset) => {
        const nonces = createDpopNonces(SECRET);
        const handedOut = nonces.current(now + offset * NONCE_SLOT_SECONDS);
        expect(nonces.accepts(handedOut, now)).toBe(Math.abs(offset) <= 1);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a nonce of another secret (forged) at any time', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 64 }), fc.integer({ min: 0, max: 4_000_000_000 }), (otherSecret, now) => {
        fc.pre(otherSecret !== SECRET);
        expect(createDpopNonces(SECRET).accepts(createDpopNonces(otherSecret).current(now), now)).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses arbitrary values: strings, numbers, objects, the empty string, oversized strings', () => {
    const nonces = createDpopNonces(SECRET);
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 100 }), fc.base64String({ maxLength: 60 }), fc.anything()), (value) => {
        fc.pre(value !== nonces.current(T0));
        expect(nonces.accepts(value, T0)).toBe(false);
      }),
      { numRuns: 500 },
    );
    expect(nonces.accepts(undefined, T0)).toBe(false);
    expect(nonces.accepts('', T0)).toBe(false);
    expect(nonces.accepts(nonces.current(T0) + 'x', T0)).toBe(false);
    expect(nonces.accepts(nonces.current(T0).repeat(3), T0)).toBe(false);
  });

  it('takes the AS-derived bytes as a secret too', () => {
    const bytes = new Uint8Array(32).fill(7);
    expect(createDpopNonces(bytes).accepts(createDpopNonces(bytes).current(T0), T0)).toBe(true);
    expect(createDpopNonces(bytes).accepts(createDpopNonces(SECRET).current(T0), T0)).toBe(false);
  });
});
