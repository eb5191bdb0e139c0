import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parseRequestTarget } from '../../src/proxy/request-target.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { thrownBy } from '../helpers/rejection.js';

const refused = [
  // not origin-form: never an open proxy
  'http://evil.example/mcp',
  'https://evil.example/mcp',
  'HTTP://evil.example/mcp',
  'evil.example:443',
  '*',
  '',
  'mcp',
  // empty segments, dot segments, their encodings
  '//evil.example/mcp',
  '/github//mcp',
  '/github/mcp//',
  '/.',
  '/..',
  '/./github/mcp',
  '/github/./mcp',
  '/other/../github/mcp',
  '/github/mcp/..',
  '/%2e%2e/github/mcp',
  '/%2E%2E/github/mcp',
  '/%2e./github/mcp',
  '/.%2E/github/mcp',
  '/github/%2e/mcp',
  '/github/mcp%2e',
  // encoded separators
  '/github%2fmcp',
  '/github%2Fmcp',
  '/github%5cmcp',
  '/github%5Cmcp',
  '/github\\mcp',
  '/github/mcp\\',
  // path parameters
  '/github/mcp;',
  '/github/mcp;jsessionid=1',
  '/github;x=1/mcp',
  // NUL, controls, spaces
  '/github/mcp%00',
  '/github/mcp\u0000',
  '/github/mcp%0a',
  '/github/mcp%0D%0A',
  '/github/mcp%7f',
  '/github/mcp%1F',
  '/github/mcp\t',
  '/github mcp',
  '/github/mcp\r\nX-Injected: 1',
  '/github/mcp?a=b c',
  '/github/mcp?a=\u0001',
  // invalid percent-encoding
  '/github/mcp%',
  '/github/mcp%2',
  '/github/mcp%zz',
  '/github/mcp%g0',
  // non-ASCII
  '/caf\u00e9',
  '/github/mcp\u00ff',
  '/\u2215github/mcp',
  '/github/mcp?q=\u00e9',
  // fragments and characters outside RFC 3986
  '/github/mcp#x',
  '/github/mcp?a#b',
  '/github/<mcp>',
  '/github/"mcp"',
  '/github/{mcp}',
  '/github/mcp|x',
  '/github/mcp^',
  '/github/`mcp`',
];

const accepted: Array<[string, string, string]> = [
  ['/', '/', ''],
  ['/github/mcp', '/github/mcp', ''],
  ['/GitHub/MCP', '/GitHub/MCP', ''],
  ['/github/mcp/', '/github/mcp/', ''],
  ['/github/mcp?x=1&y=2', '/github/mcp', '?x=1&y=2'],
  ['/github/mcp?', '/github/mcp', '?'],
  ['/github/mcp?access_token=abc', '/github/mcp', '?access_token=abc'],
  ['/github/mcp?a=/../b', '/github/mcp', '?a=/../b'],
  ['/a.b/c..d/.../e.', '/a.b/c..d/.../e.', ''],
  ['/a-b_c~d', '/a-b_c~d', ''],
  ['/a%20b', '/a%20b', ''],
  ['/caf%C3%A9', '/caf%C3%A9', ''],
  ['/caf%c3%a9', '/caf%c3%a9', ''],
  ["/a:b@c!$&'()*+,=", "/a:b@c!$&'()*+,=", ''],
];

describe('parseRequestTarget', () => {
  it.each(refused)('refuses %j with 400 invalid_request', (target) => {
    const thrown = thrownBy(() => parseRequestTarget(target));
    expect(thrown.status).toBe(400);
    expect(thrown.code).toBe('invalid_request');
  });

  it.each(accepted)('accepts %j unchanged', (target, path, search) => {
    expect(parseRequestTarget(target)).toEqual({ path, search });
  });

  it('refuses every case variant of encoded dot, slash and backslash', () => {
    for (const hex of ['2e', '2E', '2f', '2F', '5c', '5C']) {
      expect(() => parseRequestTarget(`/a/%${hex}/b`)).toThrow(GatewayError);
      expect(() => parseRequestTarget(`/a%${hex}b`)).toThrow(GatewayError);
    }
  });

  it('whatever it accepts is canonical: no dot segment, no encoded separator, and WHATWG URL reads the same path', () => {
    const unit = fc.constantFrom(
      '/', '/', '.', '.', '%', '2', 'e', 'E', 'f', 'F', '5', 'c', 'C', '0', 'a', 'Z', '-', '~', ';', '\\',
      '?', '#', ' ', '\u0000', '\t', '\u00e9', ':', '@', '!', '=', '&', '+', '|', '<', '"',
    );
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 24 }), fc.boolean(), (rest, leadingSlash) => {
        const target = (leadingSlash ? '/' : '') + rest;
        let parsed: { path: string; search: string };
        try {
          parsed = parseRequestTarget(target);
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError);
          expect((err as GatewayError).status).toBe(400);
          return;
        }
        const { path, search } = parsed;
        expect(path + search).toBe(target);
        expect(path.startsWith('/')).toBe(true);
        expect(path.split('/').some((segment) => segment === '.' || segment === '..')).toBe(false);
        expect(path).not.toMatch(/%(2e|2f|5c|00)/i);
        expect(path).not.toMatch(/\/\/|;|\\/);
        expect(new URL(path, 'http://x').pathname).toBe(path);
      }),
      { numRuns: 5000 },
    );
  });
});
