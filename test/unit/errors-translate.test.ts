import { RequestError } from '@hono/node-server';
import { describe, expect, it } from 'vitest';
import { GatewayError, invalidToken } from '../../src/errors/gateway-error.js';
import { errorResponseParts } from '../../src/errors/respond.js';
import { toGatewayError, translateKnown } from '../../src/errors/translate.js';
import { HEADER_MISMATCH, HeaderMismatchError } from '../../src/policy/mcp-headers.js';
import { StoreUnavailableError } from '../../src/store/store.js';

describe('toGatewayError: the one translator', () => {
  it('passes a typed error as it is', () => {
    const err = invalidToken('Token expired');
    expect(toGatewayError(err)).toBe(err);
  });

  it('makes a store that is down a 503 temporarily_unavailable with Retry-After, in the words of the site', () => {
    const down = new StoreUnavailableError('redis GET: not connected');
    const error = toGatewayError(down, { storeUnavailable: 'The token service is temporarily unavailable' });
    expect(error).toMatchObject({ status: 503, code: 'temporarily_unavailable', description: 'The token service is temporarily unavailable', cause: down });
    expect(errorResponseParts(error).headers['retry-after']).toBe('1');
    // Without a description of its own, a neutral one: never the store's message.
    expect(toGatewayError(down).description).not.toContain('redis');
  });

  it('makes a request the Node adapter could not read a 400', () => {
    expect(toGatewayError(new RequestError('Invalid host header'))).toMatchObject({ status: 400, code: 'invalid_request', description: 'Malformed request' });
  });

  it('makes anything else an opaque 500, the cause kept for the logs', () => {
    const bug = new TypeError('x is undefined');
    expect(toGatewayError(bug)).toMatchObject({ status: 500, code: 'server_error', description: 'Internal error', cause: bug });
    expect(translateKnown(bug)).toBeUndefined();
    expect(translateKnown('thrown string')).toBeUndefined();
  });

  it('writes a header mismatch as any refusal, with its JSON-RPC body', () => {
    const parts = errorResponseParts(toGatewayError(new HeaderMismatchError('Mcp-Method header does not match the method in the body', 7)));
    expect(parts.status).toBe(400);
    expect(parts.headers).toEqual({ 'content-type': 'application/json', 'cache-control': 'no-store' });
    expect(JSON.parse(parts.body)).toEqual({ jsonrpc: '2.0', id: 7, error: { code: HEADER_MISMATCH, message: 'Mcp-Method header does not match the method in the body' } });
  });

  it('gives every other error the OAuth body', () => {
    expect(JSON.parse(new GatewayError(404, 'not_found', 'No route here').body())).toEqual({ error: 'not_found', error_description: 'No route here' });
  });
});
