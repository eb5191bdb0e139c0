import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SignJWT, decodeProtectedHeader, generateKeyPair, jwtVerify, type CryptoKey } from 'jose';
import { createUpstreamCredential } from '../../src/upstream-auth/create-upstream-credential.js';
import type { JwtSigner } from '../../src/upstream-auth/upstream-credential.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { AuthContext } from '../../src/auth/principal.js';

const PUBLIC_URL = 'https://mcp.example.com';
const UPSTREAM = 'http://127.0.0.1:3000/mcp';

const auth = (over: Partial<AuthContext> = {}): AuthContext => ({
  issuer: 'https://idp.example',
  subject: 'alice',
  clientId: 'client-1',
  scopes: ['mcp:read', 'mcp:write'],
  expiresAt: Math.floor(Date.now() / 1000) + 3600,
  claims: {},
  token: 'client-token',
  tokenHash: 'h',
  ...over,
});

describe('upstream_auth signed', () => {
  let publicKey: CryptoKey;
  let signer: JwtSigner & { calls: number };
  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    publicKey = pair.publicKey;
    signer = {
      calls: 0,
      async sign(payload, { typ }) {
        this.calls++;
        return new SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ, kid: 'k1' }).sign(pair.privateKey);
      },
    };
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const build = (audience = 'https://upstream.example/mcp', ttlMs = 60_000) =>
    createUpstreamCredential({ kind: 'signed', audience, ttlMs }, { upstream: UPSTREAM, store: new MemoryStore({ maxEntries: 10 }), publicUrl: PUBLIC_URL, signer });

  const bearer = async (headers: Record<string, string> | Promise<Record<string, string>>) => {
    const value = (await headers).authorization ?? '';
    expect(value).toMatch(/^Bearer /);
    return value.slice('Bearer '.length);
  };

  it('signs a JWT the upstream verifies with the gateway public key', async () => {
    const jwt = await bearer(build().headersFor(auth()));
    const { payload, protectedHeader } = await jwtVerify(jwt, publicKey, {
      issuer: PUBLIC_URL,
      audience: 'https://upstream.example/mcp',
      algorithms: ['ES256'],
    });
    expect(protectedHeader.typ).toBe('JWT');
    expect(payload).toMatchObject({ sub: 'alice', client_id: 'client-1', scope: 'mcp:read mcp:write' });
    expect(payload.exp! - payload.iat!).toBe(60);
    expect(payload.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(jwt).not.toContain('client-token');
  });

  it('defaults the audience to the upstream URL', async () => {
    const jwt = await bearer(build('').headersFor(auth()));
    await expect(jwtVerify(jwt, publicKey, { audience: UPSTREAM })).resolves.toBeTruthy();
  });

  it('reuses a token per principal and scopes for half its ttl', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    const credential = build();
    const first = await bearer(credential.headersFor(auth()));
    expect(await bearer(credential.headersFor(auth()))).toBe(first);
    expect(await bearer(credential.headersFor(auth({ subject: 'bob' })))).not.toBe(first);
    expect(await bearer(credential.headersFor(auth({ scopes: ['mcp:read'] })))).not.toBe(first);
    expect(await bearer(credential.headersFor(auth({ clientId: 'client-2' })))).not.toBe(first);
    vi.advanceTimersByTime(29_000);
    expect(await bearer(credential.headersFor(auth()))).toBe(first);
    vi.advanceTimersByTime(2_000);
    const renewed = await bearer(credential.headersFor(auth()));
    expect(renewed).not.toBe(first);
    expect(decodeProtectedHeader(renewed).alg).toBe('ES256');
  });
});
