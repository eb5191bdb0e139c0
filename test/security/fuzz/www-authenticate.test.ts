/**
 * [C11] Property tests of the one place that writes WWW-Authenticate (src/errors/respond.ts):
 * whatever the code, description, scope or metadata URL hold, the header is one line of visible
 * ASCII that parses into exactly the gateway's own parameters — no CR/LF, no unescaped quote.
 */
import { validateHeaderName, validateHeaderValue } from 'node:http';
import fc from 'fast-check';
import { describe, expect } from 'vitest';
import { GatewayError, type GatewayErrorCode } from '../../../src/errors/gateway-error.js';
import { basicChallenge, buildChallenge, errorResponseParts } from '../../../src/errors/respond.js';
import { parseChallenge } from '../../helpers/security-fixtures.js';
import { fuzz } from './harness.js';

/** Text an attacker might get into a description, a scope or a URL: quotes, escapes, line breaks, parameters. */
const hostileText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc
    .array(fc.constantFrom('"', '\\', '\r', '\n', '\r\n', ',', '=', ' ', '\t', '\u0000', '\u007f', 'é', '\u2028', 'error="x"', 'Bearer ', 'scope="admin"', '\\"'), { maxLength: 12 })
    .map((parts) => parts.join('')),
);

const code = fc.oneof(fc.constantFrom<GatewayErrorCode>('invalid_token', 'insufficient_scope', 'invalid_request'), hostileText as fc.Arbitrary<GatewayErrorCode>);
const scope = fc.option(fc.array(hostileText, { maxLength: 4 }), { nil: undefined });
const visibleAscii = (s: string) => [...s].filter((ch) => /^[\x20-\x7E]$/.test(ch)).join('');

describe('[C11] WWW-Authenticate is built, never reflected', () => {
  fuzz(
    "challenge: no CR, LF, control, non-ASCII or unescaped quote; only the gateway's parameters",
    () =>
      fc.property(code, hostileText, scope, hostileText, fc.boolean(), (errorCode, description, scopes, metadataUrl, bare) => {
        const err = new GatewayError(401, errorCode, description, { challenge: true, bareChallenge: bare, scope: scopes });
        const header = buildChallenge(err, { resourceMetadataUrl: metadataUrl }, bare);
        expect(header).toMatch(/^Bearer [\x20-\x7E]*$/);
        expect(() => validateHeaderValue('www-authenticate', header)).not.toThrow();
        const { scheme, params } = parseChallenge(header);
        expect(scheme).toBe('Bearer');
        const expected = [
          ...(bare ? [] : ['error']),
          ...(scopes && scopes.length > 0 ? ['scope'] : []),
          ...(bare ? [] : ['error_description']),
          'resource_metadata',
        ];
        expect(Object.keys(params)).toEqual(expected);
        expect(params.resource_metadata).toBe(visibleAscii(metadataUrl));
        if (!bare) {
          expect(params.error).toBe(visibleAscii(errorCode));
          expect(params.error_description).toBe(visibleAscii(description));
        }
        if (scopes && scopes.length > 0) expect(params.scope).toBe(visibleAscii(scopes.join(' ')));
        expect(basicChallenge(metadataUrl)['www-authenticate']).toMatch(/^Basic realm="(?:[\x20-\x21\x23-\x5B\x5D-\x7E]|\\["\\])*"$/);
      }),
    { numRuns: 800 },
  );

  fuzz(
    'challenge: every error response has valid header values and a two-key JSON body',
    () =>
      fc.property(
        fc.integer({ min: 400, max: 599 }),
        code,
        hostileText,
        scope,
        fc.boolean(),
        fc.option(hostileText, { nil: undefined }),
        (status, errorCode, description, scopes, challenge, url) => {
          const err = new GatewayError(status, errorCode, description, { challenge, scope: scopes });
          const parts = errorResponseParts(err, url === undefined ? undefined : { resourceMetadataUrl: url });
          expect(parts.status).toBe(status);
          for (const [name, value] of Object.entries(parts.headers)) {
            expect(() => validateHeaderName(name)).not.toThrow();
            expect(() => validateHeaderValue(name, value)).not.toThrow();
            expect(value).not.toMatch(/[\r\n]/);
          }
          expect(parts.headers['cache-control']).toBe('no-store');
          expect('www-authenticate' in parts.headers).toBe(challenge && url !== undefined);
          const body = JSON.parse(parts.body) as Record<string, unknown>;
          expect(Object.keys(body)).toEqual(['error', 'error_description']);
          expect(body.error_description).toBe(description);
        },
      ),
    { numRuns: 500 },
  );
});
