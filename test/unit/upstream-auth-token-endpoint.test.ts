// client_credentials and token_exchange against a small real token endpoint
// (the third party's), which checks what the gateway sends and counts calls.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { createUpstreamCredential } from '../../src/upstream-auth/create-upstream-credential.js';
import type { UpstreamCredential } from '../../src/upstream-auth/upstream-credential.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { AuthContext } from '../../src/auth/principal.js';
import { testAuthContext } from '../helpers/auth-context.js';

const CLIENT_ID = 'gw client:1';
const CLIENT_SECRET = 'sec:ret/+';

interface Call {
  basic: [string, string] | undefined;
  form: URLSearchParams;
}

const endpoint = {
  calls: [] as Call[],
  expiresIn: 3600 as number | undefined,
  delayMs: 0,
  status: 200,
  tokenType: 'Bearer',
};

function decodeBasic(header: string | undefined): [string, string] | undefined {
  const m = /^Basic (.+)$/.exec(header ?? '');
  if (!m?.[1]) return undefined;
  const [user = '', pass = ''] = Buffer.from(m[1], 'base64').toString().split(':');
  // RFC 6749 §2.3.1: each part is form-urlencoded before base64.
  const dec = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
  return [dec(user), dec(pass)];
}

let server: Server;
let url: string;
beforeAll(async () => {
  server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const form = new URLSearchParams(body);
    const call = { basic: decodeBasic(req.headers.authorization), form };
    endpoint.calls.push(call);
    const n = endpoint.calls.length;
    if (endpoint.delayMs) await new Promise((r) => setTimeout(r, endpoint.delayMs));
    const ok = call.basic?.[0] === CLIENT_ID && call.basic[1] === CLIENT_SECRET;
    res.setHeader('content-type', 'application/json');
    if (!ok || endpoint.status !== 200) {
      res.statusCode = ok ? endpoint.status : 401;
      res.end(JSON.stringify({ error: ok ? 'server_error' : 'invalid_client' }));
      return;
    }
    const prefix = form.get('grant_type') === 'client_credentials' ? 'cc' : `te-${form.get('subject_token')}`;
    res.end(JSON.stringify({ access_token: `${prefix}-${n}`, token_type: endpoint.tokenType, expires_in: endpoint.expiresIn }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/token`;
});
afterAll(() => {
  server.close();
});
beforeEach(() => {
  Object.assign(endpoint, { calls: [], expiresIn: 3600, delayMs: 0, status: 200, tokenType: 'Bearer' });
});
afterEach(() => {
  vi.useRealTimers();
});

const deps = { upstream: 'http://127.0.0.1:3000/mcp', store: new MemoryStore({ maxEntries: 10 }), tokenEndpointTimeoutMs: 1000 };

const auth = (token = 'subject-1', over: Partial<AuthContext> = {}) => testAuthContext(token, over);

const bearerOf = async (credential: UpstreamCredential, a = auth(), signal?: AbortSignal) =>
  (await credential.headersFor(a, signal)).authorization;

describe('upstream_auth client_credentials', () => {
  const build = (secret = CLIENT_SECRET) =>
    createUpstreamCredential(
      { kind: 'client_credentials', tokenEndpoint: url, clientId: CLIENT_ID, clientSecret: secret, scopes: ['up:read', 'up:write'], resource: 'https://up.example/mcp' },
      deps,
    );

  it('authenticates with client_secret_basic and sends the grant, scope and resource', async () => {
    expect(await bearerOf(build())).toBe('Bearer cc-1');
    const [call] = endpoint.calls;
    expect(call?.basic).toEqual([CLIENT_ID, CLIENT_SECRET]);
    expect(call?.form.get('grant_type')).toBe('client_credentials');
    expect(call?.form.get('scope')).toBe('up:read up:write');
    expect(call?.form.get('resource')).toBe('https://up.example/mcp');
    expect(call?.form.has('client_secret')).toBe(false);
  });

  it('caches the token, and one in-flight request serves 20 concurrent callers', async () => {
    endpoint.delayMs = 50;
    const credential = build();
    const results = await Promise.all(Array.from({ length: 20 }, () => bearerOf(credential)));
    expect(new Set(results)).toEqual(new Set(['Bearer cc-1']));
    expect(await bearerOf(credential)).toBe('Bearer cc-1');
    expect(endpoint.calls).toHaveLength(1);
  });

  it('refreshes 30 s before expires_in', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const credential = build();
    expect(await bearerOf(credential)).toBe('Bearer cc-1');
    vi.advanceTimersByTime((3600 - 31) * 1000);
    expect(await bearerOf(credential)).toBe('Bearer cc-1');
    vi.advanceTimersByTime(2000);
    expect(await bearerOf(credential)).toBe('Bearer cc-2');
  });

  it('refreshes at 90% of a short lifetime', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    endpoint.expiresIn = 100;
    const credential = build();
    expect(await bearerOf(credential)).toBe('Bearer cc-1');
    vi.advanceTimersByTime(89_000);
    expect(await bearerOf(credential)).toBe('Bearer cc-1');
    vi.advanceTimersByTime(2_000);
    expect(await bearerOf(credential)).toBe('Bearer cc-2');
  });

  it('failure: 502 bad_gateway with the cause for the logs, and the next call retries', async () => {
    const credential = build('wrong');
    const err = await Promise.resolve(credential.headersFor(auth())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ status: 502, code: 'bad_gateway', description: 'could not obtain an upstream credential' });
    expect((err as GatewayError).cause).toBeDefined();
    await expect(Promise.resolve(credential.headersFor(auth()))).rejects.toMatchObject({ status: 502 });
    expect(endpoint.calls).toHaveLength(2);
  });

  it('a token endpoint that does not answer fails within the timeout', async () => {
    endpoint.delayMs = 3000;
    const start = Date.now();
    await expect(Promise.resolve(build().headersFor(auth()))).rejects.toMatchObject({ status: 502 });
    // The 1 s timeout, not the endpoint's 3 s, with room for a loaded machine.
    expect(Date.now() - start).toBeLessThan(2_500);
  });

  it('refuses a DPoP-bound token', async () => {
    endpoint.tokenType = 'DPoP';
    await expect(Promise.resolve(build().headersFor(auth()))).rejects.toMatchObject({ status: 502 });
  });

  it('a caller that aborts stops waiting; the others still get the token', async () => {
    endpoint.delayMs = 100;
    const credential = build();
    const controller = new AbortController();
    const aborted = bearerOf(credential, auth(), controller.signal);
    const other = bearerOf(credential);
    controller.abort(new Error('client went away'));
    await expect(aborted).rejects.toThrow('client went away');
    expect(await other).toBe('Bearer cc-1');
    expect(endpoint.calls).toHaveLength(1);
  });

  it('validates its options at construction', () => {
    expect(() =>
      createUpstreamCredential({ kind: 'client_credentials', tokenEndpoint: 'ftp://x/token', clientId: 'a', clientSecret: 'b', scopes: [] }, deps),
    ).toThrow();
    expect(() =>
      createUpstreamCredential({ kind: 'client_credentials', tokenEndpoint: url, clientId: 'a', clientSecret: '', scopes: [] }, deps),
    ).toThrow();
  });
});

describe('upstream_auth token_exchange', () => {
  const build = () =>
    createUpstreamCredential(
      { kind: 'token_exchange', tokenEndpoint: url, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, audience: 'https://up.example', scopes: ['up:read'] },
      deps,
    );

  it('sends an RFC 8693 request with client authentication', async () => {
    expect(await bearerOf(build(), auth('subj-A'))).toBe('Bearer te-subj-A-1');
    const [call] = endpoint.calls;
    expect(call?.basic).toEqual([CLIENT_ID, CLIENT_SECRET]);
    expect(Object.fromEntries(call?.form ?? [])).toEqual({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: 'subj-A',
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      audience: 'https://up.example',
      scope: 'up:read',
    });
  });

  it('caches per subject token; 20 concurrent callers share one exchange', async () => {
    endpoint.delayMs = 50;
    const credential = build();
    const results = await Promise.all(Array.from({ length: 20 }, () => bearerOf(credential, auth('subj-A'))));
    expect(new Set(results)).toEqual(new Set(['Bearer te-subj-A-1']));
    expect(await bearerOf(credential, auth('subj-A'))).toBe('Bearer te-subj-A-1');
    expect(endpoint.calls).toHaveLength(1);
    // Another subject (another user, or the same user's next token) is exchanged on its own.
    expect(await bearerOf(credential, auth('subj-B'))).toBe('Bearer te-subj-B-2');
    expect(await bearerOf(credential, auth('subj-A'))).toBe('Bearer te-subj-A-1');
    expect(endpoint.calls).toHaveLength(2);
  });

  it('exchanges again shortly before the exchanged token expires', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const credential = build();
    const subject = auth('subj-A', { expiresAt: Math.floor(Date.now() / 1000) + 7200 });
    expect(await bearerOf(credential, subject)).toBe('Bearer te-subj-A-1');
    vi.advanceTimersByTime((3600 - 31) * 1000);
    expect(await bearerOf(credential, subject)).toBe('Bearer te-subj-A-1');
    vi.advanceTimersByTime(2000);
    expect(await bearerOf(credential, subject)).toBe('Bearer te-subj-A-2');
  });

  it('never serves a cached exchange after the subject token expired', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const credential = build();
    const subject = auth('subj-A', { expiresAt: Math.floor(Date.now() / 1000) + 10 });
    expect(await bearerOf(credential, subject)).toBe('Bearer te-subj-A-1');
    vi.advanceTimersByTime(11_000);
    expect(await bearerOf(credential, subject)).toBe('Bearer te-subj-A-2');
  });

  it('failure: 502, not cached', async () => {
    endpoint.status = 500;
    const credential = build();
    await expect(Promise.resolve(credential.headersFor(auth()))).rejects.toMatchObject({ status: 502, code: 'bad_gateway' });
    endpoint.status = 200;
    expect(await bearerOf(credential)).toBe('Bearer te-subject-1-2');
  });
});
