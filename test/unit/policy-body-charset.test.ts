import { describe, expect, it } from 'vitest';
import { requireIdentityEncoding, requireUtf8Body } from '../../src/policy/body-charset.js';
import { thrownBy } from '../helpers/rejection.js';

describe('requireUtf8Body', () => {
  it('accepts no charset, or UTF-8 named by charset= or charset*= once', () => {
    for (const type of [undefined, 'application/json', 'application/json; charset=utf-8', 'application/json; charset="UTF-8"', "application/json; charset*=utf-8''utf-8", "application/json; charset*=''UTF8", 'application/json; charsetx=utf-16']) {
      expect(() => requireUtf8Body(type), type).not.toThrow();
    }
  });

  it('refuses charset*= (RFC 2231 / RFC 8187) naming anything else, malformed, continued, or beside charset=', () => {
    for (const type of [
      "application/json; charset*=utf-8''utf-16",
      "application/json; Charset*=utf-8'en'utf%2D16",
      'application/json; charset*=utf-16',
      "application/json; charset*=utf-8''%ZZ",
      'application/json; charset*0=utf-8',
      "application/json; charset*0*=utf-8''utf-8",
      "application/json; charset=utf-8; charset*=utf-8''utf-8",
    ]) {
      const err = thrownBy(() => requireUtf8Body(type));
      expect([err.status, err.code], type).toEqual([400, 'invalid_request']);
    }
  });
});

describe('requireIdentityEncoding', () => {
  it('accepts no Content-Encoding or identity', () => {
    for (const value of [undefined, 'identity', 'Identity']) expect(() => requireIdentityEncoding(value)).not.toThrow();
  });

  it('refuses any content coding: the upstream would decode the judged bytes into others', () => {
    for (const value of ['gzip', 'deflate', 'br', 'zstd', 'identity, gzip', 'identity, identity', '']) {
      const err = thrownBy(() => requireIdentityEncoding(value));
      expect([err.status, err.code], value).toEqual([400, 'invalid_request']);
    }
  });
});
