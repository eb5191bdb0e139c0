/**
 * [I44] Property tests of store key naming (src/store/key-names.ts, the one file that names keys):
 * whatever ids a client controls — client_ids, subjects, codes, session ids holding `:`, `*`,
 * `?`, `[`, spaces or any Unicode — every key is its namespace plus fixed-shape hashes, so no two
 * different id tuples share a key, no key acts as a Redis pattern, and no raw id is in a key name.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as keys from '../../../src/store/key-names.js';
import { fuzz } from './harness.js';

type KeyFunction = (...parts: string[]) => string;
const keyFunctions = Object.entries(keys).filter(
  (entry): entry is [string, KeyFunction] => typeof entry[1] === 'function' && entry[0] !== 'hashKeyPart',
);

const idPart = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.array(fc.constantFrom(':', '*', '?', '[', ']', '\\', ' ', '\n', 'a', 'b', 'mag:', 'client:', '{', '}'), { maxLength: 6 }).map((p) => p.join('')),
);

describe('[I44] store keys', () => {
  it('every key function has its own namespace', () => {
    expect(keyFunctions.length).toBeGreaterThan(8);
    const namespaces = keyFunctions.map(([, fn]) => fn(...Array.from({ length: fn.length }, () => 'x')).split(':')[0]);
    expect(new Set(namespaces).size).toBe(namespaces.length);
  });

  it("ids that differ only in where a ':' falls get different keys", () => {
    expect(keys.consentKey('iss', 'a:b', 'c')).not.toBe(keys.consentKey('iss', 'a', 'b:c'));
    expect(keys.rateLimitKey('register', 'x:y')).not.toBe(keys.rateLimitKey('register:x', 'y'));
    expect(keys.sessionBindingKey('/a:b', 's')).not.toBe(keys.sessionBindingKey('/a', 'b:s'));
    expect(keys.clientKey('*')).not.toContain('*');
  });

  fuzz(
    "store keys: every key is namespace + hashed parts; ids with ':' or '*' cannot collide or match patterns",
    () =>
      fc.property(fc.constantFrom(...keyFunctions), fc.array(idPart, { minLength: 4, maxLength: 4 }), fc.array(idPart, { minLength: 4, maxLength: 4 }), ([, fn], a, b) => {
        const argsA = a.slice(0, fn.length);
        const argsB = b.slice(0, fn.length);
        const keyA = fn(...argsA);
        const keyB = fn(...argsB);
        for (const key of [keyA, keyB]) {
          expect(key).toMatch(new RegExp(`^[a-z-]+(?::[A-Za-z0-9_-]{43}){${fn.length}}$`));
          expect(key).not.toMatch(/[*?[\]\\\s{}]/);
        }
        // No raw id after the namespace (short base64url-looking ids could occur in a hash by chance).
        const hashed = keyA.slice(keyA.indexOf(':'));
        for (const part of argsA.filter((p) => p.length >= 8 || (p !== '' && /[^A-Za-z0-9_-]/.test(p.replaceAll(':', ''))))) expect(hashed.includes(part)).toBe(false);
        if (JSON.stringify(argsA) !== JSON.stringify(argsB)) expect(keyA).not.toBe(keyB);
        else expect(keyA).toBe(keyB);
      }),
    { numRuns: 2000 },
  );
});
