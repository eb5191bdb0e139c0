import { describe, expect, it } from 'vitest';
import { createUpstreamCredential } from '../../src/upstream-auth/create-upstream-credential.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { testAuthContext } from '../helpers/auth-context.js';

const deps = { upstream: 'http://127.0.0.1:3000/mcp', store: new MemoryStore({ maxEntries: 10 }) };
const auth = testAuthContext();

describe('upstream_auth none and static', () => {
  it('none adds nothing', () => {
    expect(createUpstreamCredential({ kind: 'none' }, deps).headersFor(auth)).toEqual({});
  });

  it('static returns the configured header, the same frozen object every time', () => {
    const credential = createUpstreamCredential({ kind: 'static', header: 'authorization', value: 'Bearer pat-123' }, deps);
    const first = credential.headersFor(auth);
    expect(first).toEqual({ authorization: 'Bearer pat-123' });
    expect(Object.isFrozen(first)).toBe(true);
    expect(credential.headersFor(auth)).toBe(first);
  });

  it('static sends another header as configured, and never the client token', () => {
    const headers = createUpstreamCredential({ kind: 'static', header: 'x-api-key', value: 'k' }, deps).headersFor(auth);
    expect(headers).toEqual({ 'x-api-key': 'k' });
    expect(JSON.stringify(headers)).not.toContain(auth.token);
  });

  it('static refuses header injection at construction', () => {
    expect(() => createUpstreamCredential({ kind: 'static', header: 'authorization', value: 'Bearer a\r\nx-evil: 1' }, deps)).toThrow();
    expect(() => createUpstreamCredential({ kind: 'static', header: 'bad header', value: 'v' }, deps)).toThrow();
  });
});

describe('upstream_auth idp_token', () => {
  it('refuses construction without the built-in AS', () => {
    expect(() => createUpstreamCredential({ kind: 'idp_token' }, deps)).toThrow(
      'idp_token needs the built-in authorization server with an OIDC login',
    );
  });

  it('sends the token the AS holds for this principal', async () => {
    const credential = createUpstreamCredential(
      { kind: 'idp_token' },
      { ...deps, idpTokens: { accessTokenFor: async (a) => `idp-for-${a.subject}` } },
    );
    expect(await credential.headersFor(auth)).toEqual({ authorization: 'Bearer idp-for-alice' });
  });

  it('a failure becomes 502, a GatewayError from the AS passes as it is', async () => {
    const failing = createUpstreamCredential(
      { kind: 'idp_token' },
      { ...deps, idpTokens: { accessTokenFor: async () => Promise.reject(new Error('refresh failed')) } },
    );
    await expect(failing.headersFor(auth)).rejects.toMatchObject({ status: 502, code: 'bad_gateway' });
    const unavailable = new GatewayError(503, 'temporarily_unavailable', 'store down');
    const passing = createUpstreamCredential(
      { kind: 'idp_token' },
      { ...deps, idpTokens: { accessTokenFor: async () => Promise.reject(unavailable) } },
    );
    await expect(passing.headersFor(auth)).rejects.toBe(unavailable);
  });
});

describe('upstream_auth signed without a signer', () => {
  it('refuses construction', () => {
    expect(() => createUpstreamCredential({ kind: 'signed', audience: 'https://up', ttlMs: 60_000 }, deps)).toThrow(/signing key/);
  });
});
