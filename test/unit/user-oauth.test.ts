// user_oauth's pure parts: the sealing of upstream grants (AES-256-GCM, key ids, rotation, bound
// to the store key), the URL elicitation's form per protocol revision, and when a grant is due
// for its refresh. Properties over random inputs, beside the end-to-end cases of
// test/integration/user-oauth.test.ts.
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deriveKey } from '../../src/config/account-tokens.js';
import { AccountTokenCipher } from '../../src/authorization-server/upstream-accounts/account-token-cipher.js';
import { refreshDue } from '../../src/authorization-server/upstream-accounts/upstream-tokens.js';
import { clientDocumentUsable, upstreamClientDocument } from '../../src/authorization-server/upstream-accounts/client-metadata-document.js';
import { asConnectElicitation, ConnectElicitation } from '../../src/routes/connect-elicitation.js';
import { UpstreamAccountRequired } from '../../src/upstream-auth/user-oauth.js';

const secret = fc.string({ minLength: 32, maxLength: 64 });

describe('AccountTokenCipher', () => {
  it('opens what it sealed, only under the same store key, and nothing tampered with', () => {
    fc.assert(
      fc.property(secret, fc.string(), fc.string(), fc.string({ minLength: 1 }), fc.nat(), (s, key, other, plaintext, at) => {
        const cipher = new AccountTokenCipher([deriveKey(s)]);
        const sealed = cipher.seal(key, plaintext);
        expect(cipher.open(key, sealed)).toBe(plaintext);
        expect(sealed.includes(plaintext) && plaintext.length > 8).toBe(false);
        if (other !== key) expect(cipher.open(other, sealed)).toBeUndefined();
        // One bit of the iv, the ciphertext or the tag changed: nothing opens.
        const parts = sealed.split('.');
        const part = 2 + (at % 3);
        const bytes = Buffer.from(parts[part]!, 'base64url');
        bytes[at % bytes.length]! ^= 1 << (at % 8);
        parts[part] = bytes.toString('base64url');
        expect(cipher.open(key, parts.join('.'))).toBeUndefined();
      }),
      { numRuns: 200 },
    );
  });

  it('rotates: a new first key seals, the old one still opens; dropping a key makes its values unreadable', () => {
    fc.assert(
      fc.property(secret, secret, fc.string({ minLength: 1 }), (oldSecret, newSecret, plaintext) => {
        fc.pre(oldSecret !== newSecret);
        const [oldKey, newKey] = [deriveKey(oldSecret), deriveKey(newSecret)];
        const before = new AccountTokenCipher([oldKey]).seal('k', plaintext);
        const rotating = new AccountTokenCipher([newKey, oldKey]);
        expect(rotating.open('k', before)).toBe(plaintext);
        expect(rotating.isStale(before)).toBe(true);
        const after = rotating.seal('k', plaintext);
        expect(after.split('.')[1]).toBe(newKey.id);
        expect(new AccountTokenCipher([newKey]).open('k', before)).toBeUndefined();
      }),
      { numRuns: 100 },
    );
  });
});

describe('the connect elicitation', () => {
  const required = new UpstreamAccountRequired('https://gw.example/account/connect?link=abc', 'abc');
  const request = (version: string | undefined) => ({ headers: version === undefined ? {} : { 'mcp-protocol-version': version } }) as unknown as IncomingMessage;
  const id = fc.oneof(fc.string(), fc.integer());

  it('is -32042 with the URL for 2025-11-25, an InputRequiredResult for 2026-07-28, a JSON-RPC error naming the URL before; always for the request id', () => {
    fc.assert(
      fc.property(fc.constantFrom(undefined, '2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'), id, (version, rpcId) => {
        const answer = asConnectElicitation(required, request(version), Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: rpcId, method: 'tools/call', params: { name: 'x' } })));
        expect(answer).toBeInstanceOf(ConnectElicitation);
        const elicitation = answer as ConnectElicitation;
        expect(elicitation.status).toBe(200);
        const body = JSON.parse(elicitation.body()) as { jsonrpc: string; id: unknown; error: { message: string }; result: { inputRequests: Record<string, unknown> } };
        expect(body.jsonrpc).toBe('2.0');
        expect(body.id).toEqual(rpcId);
        if (version === '2025-11-25') expect(body.error).toMatchObject({ code: -32042, data: { elicitations: [{ mode: 'url', url: required.url, elicitationId: 'abc' }] } });
        else if (version === '2026-07-28') expect(body.result.inputRequests.connect).toMatchObject({ method: 'elicitation/create', params: { mode: 'url', url: required.url } });
        else expect(body.error.message).toContain(required.url);
      }),
    );
  });

  it('reads the version an initialize asks for when there is no header yet; a batch or junk gets id null; any other error passes as it was', () => {
    const init = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25' } }));
    expect(JSON.parse((asConnectElicitation(required, request(undefined), init) as ConnectElicitation).body()).error.code).toBe(-32042);
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.constant('[{"id":1}]')), (junk) => {
        const body = JSON.parse((asConnectElicitation(required, request('2025-11-25'), Buffer.from(junk)) as ConnectElicitation).body());
        if (!/^\s*\{/.test(junk)) expect(body.id).toBeNull();
      }),
    );
    const other = new Error('x');
    expect(asConnectElicitation(other, request('2025-11-25'), init)).toBe(other);
  });
});

describe('refreshDue', () => {
  it('a fresh token is never due; every token is due in the last quarter of its life, and never sooner than 60 s before', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1_000, max: 86_400_000 }), fc.double({ min: 0, max: 1, noNaN: true }), (lifetime, fraction) => {
        const obtainedAt = 1_000_000;
        const grant = { accessToken: 't', obtainedAt, expiresAt: obtainedAt + lifetime, scopes: [], connectedAt: obtainedAt, asIssuer: 'i', resource: 'r' };
        const now = obtainedAt + Math.floor(lifetime * fraction);
        expect(refreshDue(grant, obtainedAt)).toBe(false);
        const remaining = lifetime - (now - obtainedAt);
        expect(refreshDue(grant, now)).toBe(remaining <= Math.min(60_000, lifetime / 4));
      }),
    );
  });
});

describe("user_oauth: the gateway's client ID metadata document", () => {
  it('is used only where the AS says it supports them (exactly true) and the URL is https; it names itself and the one redirect URI, and holds no secret', () => {
    fc.assert(
      fc.property(fc.webUrl({ validSchemes: ['http', 'https'] }), fc.webUrl(), fc.constantFrom<unknown>(true, false, 'true', 1, undefined, null), (documentUrl, redirectUri, supported) => {
        const server = supported === undefined ? { issuer: 'https://as.example' } : { issuer: 'https://as.example', client_id_metadata_document_supported: supported };
        expect(clientDocumentUsable(server, documentUrl)).toBe(supported === true && new URL(documentUrl).protocol === 'https:');
        const doc = upstreamClientDocument(documentUrl, redirectUri);
        expect([doc.client_id, doc.redirect_uris, doc.token_endpoint_auth_method]).toEqual([documentUrl, [redirectUri], 'none']);
        expect(Object.keys(doc).some((k) => k.startsWith('client_secret'))).toBe(false);
      }),
    );
  });
});
