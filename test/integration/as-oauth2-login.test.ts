/**
 * `login: { kind: oauth2 }`, an OAuth-only IdP such as GitHub, end to end: a cookie browser through
 * the gateway's consent page, the IdP, the gateway's callback and back to the client, whose code
 * the gateway redeems for a token whose `sub` is the user JSON's `id`. The IdP is a SMALL LOCAL
 * STAND-IN for GitHub (test/helpers/oauth2-idp.ts: its paths, client_secret_post, 200-with-`error`
 * token errors, a numeric `id` at /user), because a cloud IdP cannot run here; it verifies PKCE
 * S256 itself. Then each way the sign-in fails: a state that is not the gateway's, an IdP that
 * denies, a token endpoint error, a user endpoint error, a user without a usable `id` — each an
 * error page (or the client's access_denied) and never a code.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { DEFAULT_ROUTE, recordingAudit, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { redeemCode, walkSignIn, type WalkedSignIn } from '../helpers/idp-sign-in.js';
import { freePort } from '../helpers/net.js';
import { newVerifier, registerPublicClient, s256, type PublicClient } from '../helpers/oauth-requests.js';
import { startOAuth2Idp, type OAuth2Idp } from '../helpers/oauth2-idp.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const CALLBACK_PATH = '/authorize/login/oauth2/callback';
const CLIENT_SECRET = 'stand-in-secret-0123456789';

let everything: UpstreamHandle;
let idp: OAuth2Idp;
let gateway: AsGateway;
let origin: string;
let resource: string;
let app: PublicClient;
const audit = recordingAudit();

beforeAll(async () => {
  everything = await startEverythingServer();
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  resource = `${origin}${DEFAULT_ROUTE.path}`;
  idp = await startOAuth2Idp({ client_id: 'gateway-app', client_secret: CLIENT_SECRET, redirect_uri: `${origin}${CALLBACK_PATH}` });
  gateway = await startAsGateway({
    upstream: everything.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin },
    authorizationServer: {
      signing_key: { env: 'SIGNING_KEY' },
      login: {
        kind: 'oauth2',
        authorization_endpoint: idp.authorizationEndpoint,
        token_endpoint: idp.tokenEndpoint,
        userinfo_endpoint: idp.userinfoEndpoint,
        client_id: 'gateway-app',
        client_secret: { env: 'IDP_CLIENT_SECRET' },
        scopes: ['read:user'],
        subject_claim: 'id',
        extra_authorize_params: { allow_signup: 'false' },
      },
    },
    env: { IDP_CLIENT_SECRET: CLIENT_SECRET, SIGNING_KEY: JSON.stringify(await generateSigningKey()) },
    audit,
  });
  app = await registerPublicClient(origin, 'OAuth2 login test app');
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await idp?.close();
  await everything?.close();
});

/** The walk stopped at an error page of the gateway's callback: no code reached the client. */
function expectErrorPage(walked: WalkedSignIn, status: number, text: string) {
  expect(walked.back, walked.back?.href).toBeUndefined();
  expect(walked.page?.url.startsWith(`${origin}${CALLBACK_PATH}`)).toBe(true);
  expect(walked.page?.status, walked.page?.body.slice(0, 400)).toBe(status);
  expect(walked.page?.headers.get('content-type')).toMatch(/^text\/html/);
  expect(walked.page?.body).toContain(text);
}

describe('login through an OAuth-only IdP (a local stand-in for GitHub)', () => {
  it('signs the user in: the token sub is the user endpoint id, PKCE verified by the IdP, the secret in the form body', async () => {
    idp.next = { user: { id: 4242, login: 'alice', name: 'Alice' } };
    const pkceBefore = idp.pkce.length;
    const walked = await walkSignIn(origin, app, resource);
    expect(walked.back?.searchParams.get('state')).toBe('client-state');
    const tokens = await redeemCode(origin, app, walked);
    expect(decodeJwt(tokens.access_token)).toMatchObject({ iss: origin, sub: '4242', aud: resource, client_id: app.id });

    // What the IdP was asked: the gateway's client, its callback, PKCE S256, the scopes, the extra parameter, no resource.
    const asked = idp.authorizeRequests.at(-1)!;
    expect(Object.fromEntries(asked)).toMatchObject({ client_id: 'gateway-app', redirect_uri: `${origin}${CALLBACK_PATH}`, response_type: 'code', scope: 'read:user', code_challenge_method: 'S256', allow_signup: 'false' });
    expect(asked.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.has('resource')).toBe(false);
    expect(asked.has('nonce')).toBe(false);
    expect(idp.pkce.slice(pkceBefore)).toEqual(['verified']);
    const exchange = idp.tokenRequests.at(-1)!;
    expect(Object.fromEntries(exchange)).toMatchObject({ grant_type: 'authorization_code', client_id: 'gateway-app', client_secret: CLIENT_SECRET, redirect_uri: `${origin}${CALLBACK_PATH}` });
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'idp_login', outcome: 'success', sub: '4242', client_id: app.id }));

    // The token works at the route.
    const res = await fetch(resource, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
    });
    expect(res.status).toBe(200);
    await res.body?.cancel();
  }, 60_000);

  it('a string id is the sub as it is', async () => {
    idp.next = { user: { id: 'user-7f3a', login: 'bob' } };
    const tokens = await redeemCode(origin, app, await walkSignIn(origin, app, resource));
    expect(decodeJwt(tokens.access_token).sub).toBe('user-7f3a');
  }, 60_000);

  it('the stand-in really checks PKCE: a wrong verifier gets no token', async () => {
    // Without this, the happy path could pass against an IdP that checks nothing.
    const verifier = newVerifier();
    const authorize = new URL(idp.authorizationEndpoint);
    for (const [k, v] of Object.entries({ client_id: 'gateway-app', redirect_uri: `${origin}${CALLBACK_PATH}`, state: 's', code_challenge: s256(verifier), code_challenge_method: 'S256' })) authorize.searchParams.set(k, v);
    const code = new URL((await fetch(authorize, { redirect: 'manual' })).headers.get('location')!).searchParams.get('code')!;
    const res = await fetch(idp.tokenEndpoint, {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'authorization_code', client_id: 'gateway-app', client_secret: CLIENT_SECRET, code, redirect_uri: `${origin}${CALLBACK_PATH}`, code_verifier: newVerifier() }),
    });
    expect(await res.json()).toMatchObject({ error: 'bad_verification_code' });
    expect(idp.pkce.at(-1)).toBe('refused');
  });

  it('a state that is not the one the gateway sent: an error page, the code never redeemed', async () => {
    const tokenRequests = idp.tokenRequests.length;
    const walked = await walkSignIn(origin, app, resource, {
      rewrite: (url) => {
        if (url.pathname !== CALLBACK_PATH) return url;
        const forged = new URL(url);
        forged.searchParams.set('state', 'x'.repeat(43));
        return forged;
      },
    });
    expectErrorPage(walked, 400, 'Sign-in expired');
    expect(idp.tokenRequests.length).toBe(tokenRequests);
    // Two states: not an answer to one request either.
    const doubled = await walkSignIn(origin, app, resource, {
      rewrite: (url) => {
        if (url.pathname !== CALLBACK_PATH) return url;
        const twice = new URL(url);
        twice.searchParams.append('state', url.searchParams.get('state')!);
        return twice;
      },
    });
    expectErrorPage(doubled, 400, 'Sign-in failed');
    expect(idp.tokenRequests.length).toBe(tokenRequests);
  }, 60_000);

  it('an IdP that denies: the client gets access_denied with its state, no code', async () => {
    idp.next = 'deny';
    try {
      const walked = await walkSignIn(origin, app, resource);
      expect(walked.back?.searchParams.get('error')).toBe('access_denied');
      expect(walked.back?.searchParams.get('state')).toBe('client-state');
      expect(walked.back?.searchParams.has('code')).toBe(false);
    } finally {
      idp.next = { user: { id: 4242, login: 'alice' } };
    }
  }, 60_000);

  it('a token endpoint error (GitHub answers 200 with error): an error page, no code', async () => {
    idp.tokenAnswer = 'error';
    try {
      const walked = await walkSignIn(origin, app, resource);
      expectErrorPage(walked, 502, 'did not complete the sign-in');
      expect(walked.page?.body).not.toContain('refused: bad_verification_code');
    } finally {
      idp.tokenAnswer = 'ok';
    }
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'idp_login', outcome: 'error', error: 'idp_error', client_id: app.id }));
  }, 60_000);

  it('a user endpoint error: an error page, no code', async () => {
    idp.userAnswer = 'error';
    try {
      expectErrorPage(await walkSignIn(origin, app, resource), 502, 'did not complete the sign-in');
    } finally {
      idp.userAnswer = 'ok';
    }
  }, 60_000);

  it('a user without a usable id (missing, fractional, negative, boolean, an object, too long, control characters): an error page, no code', async () => {
    const unusable: Record<string, unknown>[] = [
      { login: 'no-id' },
      { id: 1.5 },
      { id: -3 },
      { id: true },
      { id: { value: 1 } },
      { id: null },
      { id: '' },
      { id: 'x'.repeat(256) },
      { id: 'line\nbreak' },
    ];
    for (const user of unusable) {
      idp.next = { user };
      const walked = await walkSignIn(origin, app, resource);
      expectErrorPage(walked, 502, 'login.subject_claim');
    }
    idp.next = { user: { id: 4242, login: 'alice' } };
    expect(audit.events.filter((e) => e.event === 'idp_login' && e.error === 'no_subject')).toHaveLength(unusable.length);
  }, 120_000);
});
