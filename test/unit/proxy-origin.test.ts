import { describe, expect, it } from 'vitest';
import { checkOrigin, corsPreflight, corsResponseHeaders } from '../../src/proxy/origin.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

const self = 'https://mcp.example.com';
const allowed = ['https://app.example.com', 'http://localhost:5173'];

describe('checkOrigin', () => {
  it.each<[string | undefined, 'allow' | 'deny']>([
    [undefined, 'allow'],
    ['https://mcp.example.com', 'allow'],
    ['https://MCP.example.com:443', 'allow'],
    ['https://app.example.com', 'allow'],
    ['HTTPS://APP.EXAMPLE.COM', 'allow'],
    ['http://localhost:5173', 'allow'],
    ['null', 'deny'],
    ['', 'deny'],
    ['https://evil.example', 'deny'],
    ['http://app.example.com', 'deny'],
    ['https://app.example.com:8443', 'deny'],
    ['https://app.example.com.evil.example', 'deny'],
    ['https://evil.example/https://app.example.com', 'deny'],
    ['https://app.example.com/path', 'deny'],
    ['https://user@app.example.com', 'deny'],
    ['http://localhost:5174', 'deny'],
    ['http://127.0.0.1:5173', 'deny'],
    ['not a url', 'deny'],
  ])('%j → %s', (origin, decision) => {
    expect(checkOrigin(origin, allowed, self)).toBe(decision);
  });

  it('an empty allow-list admits only same-origin and Origin-less requests', () => {
    expect(checkOrigin('https://app.example.com', [], self)).toBe('deny');
    expect(checkOrigin(self, [], self)).toBe('allow');
    expect(checkOrigin(undefined, [], self)).toBe('allow');
  });
});

describe('corsPreflight', () => {
  it('echoes an allowed origin with the MCP headers', () => {
    const { status, headers } = corsPreflight('https://app.example.com', allowed, self);
    expect(status).toBe(204);
    expect(headers).toMatchObject({
      'access-control-allow-origin': 'https://app.example.com',
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-expose-headers': 'mcp-session-id, www-authenticate, dpop-nonce',
      'access-control-max-age': '600',
      vary: 'origin, access-control-request-headers',
    });
    for (const name of ['authorization', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'mcp-method', 'mcp-name']) {
      expect(headers['access-control-allow-headers']).toContain(name);
    }
  });

  it('allows the Mcp-Param-* headers a preflight asks for (2026-07-28 tool arguments), well-formed ones only, and nothing else added', () => {
    const asked = 'content-type, Mcp-Param-Region, MCP-PARAM-TENANT, mcp-param-bad_name, mcp-param-, x-secret, mcp-param-region';
    const allowHeaders = corsPreflight('https://app.example.com', allowed, self, asked).headers['access-control-allow-headers']!.split(', ');
    expect(allowHeaders.filter((h) => h.startsWith('mcp-param-'))).toEqual(['mcp-param-region', 'mcp-param-tenant']);
    expect(allowHeaders).not.toContain('x-secret');
    expect(corsPreflight('https://app.example.com', allowed, self, 'authorization').headers['access-control-allow-headers']).toBe(corsPreflight('https://app.example.com', allowed, self).headers['access-control-allow-headers']);
    const many = Array.from({ length: 100 }, (_, i) => `mcp-param-p${i}`).join(',');
    expect(corsPreflight('https://app.example.com', allowed, self, many).headers['access-control-allow-headers']!.split(', ').filter((h) => h.startsWith('mcp-param-'))).toHaveLength(64);
  });

  it('refuses a disallowed origin with 403 forbidden_origin', () => {
    expect(() => corsPreflight('https://evil.example', allowed, self)).toThrow(GatewayError);
    try {
      corsPreflight('null', allowed, self);
    } catch (err) {
      expect((err as GatewayError).status).toBe(403);
      expect((err as GatewayError).code).toBe('forbidden_origin');
    }
  });

  it('answers an OPTIONS without Origin with no CORS grant', () => {
    const { status, headers } = corsPreflight(undefined, allowed, self);
    expect(status).toBe(204);
    expect(headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('corsResponseHeaders', () => {
  it('grants only allowed cross origins', () => {
    expect(corsResponseHeaders('https://app.example.com', allowed)).toEqual({
      'access-control-allow-origin': 'https://app.example.com',
      'access-control-expose-headers': 'mcp-session-id, www-authenticate, dpop-nonce',
      vary: 'origin',
    });
    expect(corsResponseHeaders('https://evil.example', allowed)).toEqual({});
    expect(corsResponseHeaders(undefined, allowed)).toEqual({});
  });
});
