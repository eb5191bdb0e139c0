/**
 * SECURITY-CASES group E (/authorize, cases 19–22) against the built-in AS. Redirect-URI variants
 * live in corpora/redirect-uris.json. Refusals before the redirect URI is
 * trusted are error pages (never a redirect); later ones go back with `error`, `state` and `iss`.
 * Where the case says ∅store, the store has gained no write (and no cookie was set).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { expectAuthorizeErrorPage, headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { authorizeUrl, getManual, RFC7636_CHALLENGE, type QueryParams } from '../helpers/oauth-requests.js';
import { expandRedirect, redirectCorpus } from './corpora/redirect-uris.js';

const CHALLENGE = RFC7636_CHALLENGE;

let gateway: AsGateway;
let multi: AsGateway;
let clientId: string;
let redirectUri: string;
let resource: string;

async function registerClient(gw: AsGateway, redirectUris: string[]): Promise<string> {
  const res = await fetch(`${gw.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'authorize tests', redirect_uris: redirectUris, token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

beforeAll(async () => {
  // A client the operator configured: its errors after the redirect URI check go back there (RFC 6749 §4.1.2.1).
  // A dynamic client's are an error page until consent (j-as-clients.test.ts, [J49]).
  redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  clientId = 'authorize-tests';
  gateway = await startAsGateway({
    upstream: 'http://127.0.0.1:9/mcp',
    authorizationServer: { clients: [{ client_id: clientId, client_name: 'authorize tests', redirect_uris: [redirectUri, 'http://localhost:7000/cb', 'https://app.example/cb'] }] },
  });
  multi = await startAsGateway({
    upstream: 'http://127.0.0.1:9/mcp',
    routes: {
      'a.yaml': { path: '/a/mcp', scopes_supported: ['mcp:read'] },
      'b.yaml': { path: '/b/mcp', scopes_supported: ['mcp:read'] },
    },
  });
  resource = `${gateway.issuer}/everything/mcp`;
});
afterAll(async () => {
  await Promise.all([gateway?.stop(), multi?.stop()]);
});

const valid = (over: QueryParams = {}) => ({
  response_type: 'code',
  client_id: clientId,
  redirect_uri: redirectUri,
  code_challenge: CHALLENGE,
  code_challenge_method: 'S256',
  state: 'xyz',
  resource,
  ...over,
});

/** An /authorize refusal shown to the user (expectAuthorizeErrorPage), framing-proof, nothing of the attacker's host shown. */
async function expectErrorPage(params: QueryParams) {
  const res = await expectAuthorizeErrorPage(gateway, authorizeUrl(gateway.issuer, params));
  expect(res.headers.get('x-frame-options')).toBe('DENY');
  expect(res.body).not.toContain('evil.example');
}

describe('[E19] redirect_uri tricks at /authorize (corpora/redirect-uris.json)', () => {
  it.each(redirectCorpus.authorize.mismatched.map((c) => [JSON.stringify(c.uri), c.why, c.uri] as const))('%s (%s) → an error page', async (_label, _why, uri) => {
    await expectErrorPage(valid({ redirect_uri: expandRedirect(uri, redirectUri) }));
  });

  it.each(redirectCorpus.authorize.matched.map((c) => [c.uri, c.why] as const))('%s (%s) → the consent page, and the code goes exactly there', async (uri) => {
    const sent = expandRedirect(uri, redirectUri);
    const callback = await followAuthorization(authorizeUrl(gateway.issuer, valid({ redirect_uri: sent, state: 'm' })), sent, { onPage: headlessUser('mia') });
    expect(`${callback.origin}${callback.pathname}`).toBe(new URL(sent).href.replace(/\?.*$/, ''));
    expect(callback.searchParams.getAll('code')).toHaveLength(1);
  });
});

describe('[E19] unknown client or unregistered redirect_uri → an error page, never a redirect, nothing stored', () => {
  const cases: Array<[string, () => QueryParams]> = [
    ['an unknown client_id', () => valid({ client_id: 'no-such-client' })],
    ['no client_id', () => valid({ client_id: undefined })],
    ['two client_ids', () => valid({ client_id: [clientId, clientId] })],
    ['another host', () => valid({ redirect_uri: 'https://evil.example/callback' })],
    ['a trailing slash added', () => valid({ redirect_uri: `${redirectUri}/` })],
    ['another path', () => valid({ redirect_uri: redirectUri.replace('/callback', '/other') })],
    ['an added query', () => valid({ redirect_uri: `${redirectUri}?x=1` })],
    ['a fragment', () => valid({ redirect_uri: `${redirectUri}#f` })],
    ['upper-case scheme and host', () => valid({ redirect_uri: 'HTTPS://APP.EXAMPLE/cb' })],
    ['another loopback address', () => valid({ redirect_uri: redirectUri.replace('127.0.0.1', '127.0.0.2') })],
    ['IPv6 loopback for an IPv4 registration', () => valid({ redirect_uri: redirectUri.replace('127.0.0.1', '[::1]') })],
    ['localhost on another port (no port exception for localhost)', () => valid({ redirect_uri: 'http://localhost:7001/cb' })],
    ['an https URI on another port', () => valid({ redirect_uri: 'https://app.example:8443/cb' })],
    ['a prefix of a registered URI', () => valid({ redirect_uri: 'https://app.example/c' })],
    ['two redirect_uris', () => valid({ redirect_uri: [redirectUri, redirectUri] })],
    ['no redirect_uri when several are registered', () => valid({ redirect_uri: undefined })],
    ['javascript:', () => valid({ redirect_uri: 'javascript:alert(1)' })],
  ];
  it.each(cases)('%s', async (_name, params) => {
    await expectErrorPage(params());
  });

  it('a loopback IP literal matches on any port (RFC 8252 §7.3)', async () => {
    const res = await getManual(authorizeUrl(gateway.issuer, valid({ redirect_uri: redirectUri.replace(/:\d+\//, ':1/') })));
    expect(res.status).toBe(200);
    expect(res.body).toContain('Approve');
  });
});

/** The redirect of a refused request: exactly one error, the state as sent, and iss. */
function expectErrorRedirect(res: { status: number; headers: Headers }, error: string, state: string | null = 'xyz') {
  expect(res.status).toBe(302);
  const location = new URL(res.headers.get('location')!);
  expect(`${location.origin}${location.pathname}`).toBe(redirectUri);
  expect(location.searchParams.getAll('error')).toEqual([error]);
  expect(location.searchParams.getAll('state')).toEqual(state === null ? [] : [state]);
  expect(location.searchParams.getAll('iss')).toEqual([gateway.issuer]);
  expect(location.searchParams.has('code')).toBe(false);
}

describe('[E20] PKCE S256 is required; only response_type=code', () => {
  const cases: Array<[string, QueryParams, string]> = [
    ['no code_challenge', { code_challenge: undefined }, 'invalid_request'],
    ['code_challenge_method plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no code_challenge_method (plain by default)', { code_challenge_method: undefined }, 'invalid_request'],
    ['code_challenge_method s256 (case)', { code_challenge_method: 's256' }, 'invalid_request'],
    ['a challenge that is too short', { code_challenge: 'abc' }, 'invalid_request'],
    ['a challenge that is too long', { code_challenge: 'a'.repeat(129) }, 'invalid_request'],
    ['a challenge with characters outside the unreserved set', { code_challenge: `${CHALLENGE.slice(0, 42)}+` }, 'invalid_request'],
    ['an empty challenge', { code_challenge: '' }, 'invalid_request'],
    ['two challenges', { code_challenge: [CHALLENGE, CHALLENGE] }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['response_type code id_token', { response_type: 'code id_token' }, 'unsupported_response_type'],
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['a request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
    ['a request_uri (PAR not offered)', { request_uri: 'urn:ietf:params:oauth:request_uri:abc' }, 'request_not_supported'],
    ['code_challenge_method S256 with a trailing space', { code_challenge_method: 'S256 ' }, 'invalid_request'],
    ['code_challenge_method S512', { code_challenge_method: 'S512' }, 'invalid_request'],
    ['two code_challenge_methods', { code_challenge_method: ['S256', 'plain'] }, 'invalid_request'],
    ['a padded challenge', { code_challenge: `${CHALLENGE}=` }, 'invalid_request'],
    ['a standard-base64 challenge', { code_challenge: CHALLENGE.replace(/-/g, '+') }, 'invalid_request'],
    ['a challenge with a space', { code_challenge: `${CHALLENGE.slice(0, 20)} ${CHALLENGE.slice(21)}` }, 'invalid_request'],
    ['a challenge one short of 43', { code_challenge: CHALLENGE.slice(0, 42) }, 'invalid_request'],
    ['a challenge with non-ASCII', { code_challenge: `${CHALLENGE.slice(0, 42)}é` }, 'invalid_request'],
    ['response_type CODE (case)', { response_type: 'CODE' }, 'unsupported_response_type'],
    ['response_type "code " (trailing space)', { response_type: 'code ' }, 'unsupported_response_type'],
    ['response_type "code code"', { response_type: 'code code' }, 'unsupported_response_type'],
    ['response_type none', { response_type: 'none' }, 'unsupported_response_type'],
    ['two response_types', { response_type: ['code', 'code'] }, 'invalid_request'],
    ['response_mode fragment', { response_mode: 'fragment' }, 'invalid_request'],
    ['response_mode form_post', { response_mode: 'form_post' }, 'invalid_request'],
    ['prompt=none (no silent authorization)', { prompt: 'none' }, 'login_required'],
    ['two states', { state: ['a', 'b'] }, 'invalid_request'],
  ];
  it.each(cases)('%s → %s, nothing stored', async (_name, over, error) => {
    const mark = gateway.recording.writes.length;
    const res = await getManual(authorizeUrl(gateway.issuer, valid(over)));
    // A repeated state is not echoed: which one would be "the" state?
    expectErrorRedirect(res, error, Array.isArray(over.state) ? null : 'xyz');
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
  });
});

describe('[E21] resource must be one of the gateway canonical URIs', () => {
  const variants = () => [
    `${resource}/`,
    resource.replace('/everything/mcp', '/everything'),
    `${resource}x`,
    `${resource}/sub`,
    resource.toUpperCase(),
    resource.replace('http:', 'https:'),
    resource.replace('127.0.0.1', 'localhost'),
    `${resource}?x=1`,
    'https://other.example/everything/mcp',
    `${resource}#f`,
    `${resource}?`,
    `${resource}/.`,
    `${resource}/..`,
    `${resource}/../mcp`,
    resource.replace('/everything/mcp', '/everything/./mcp'),
    resource.replace('/everything/mcp', '/everything//mcp'),
    resource.replace('/everything/mcp', '/%65verything/mcp'),
    resource.replace('/everything/mcp', '/everything%2fmcp'),
    resource.replace('/mcp', '/MCP'),
    resource.replace('http://', 'HTTP://'),
    resource.replace('http://', 'http:'),
    resource.replace('http://', 'http:///'),
    resource.replace('127.0.0.1', '2130706433'),
    resource.replace('127.0.0.1', '[::ffff:127.0.0.1]'),
    resource.replace(/:(\d+)\//, ':0$1/'),
    resource.replace('http://', 'http://user@'),
    ` ${resource}`,
    `${resource} `,
    `${resource}\t`,
    `${resource}%00`,
    `${gateway.issuer}/.well-known/oauth-protected-resource/everything/mcp`,
    gateway.issuer,
    `${gateway.issuer}/`,
    '*',
    'urn:mcp:everything',
    '',
  ];
  it('refuses every non-canonical variant with invalid_target, nothing stored', async () => {
    for (const variant of variants().filter((v) => v !== '')) {
      const mark = gateway.recording.writes.length;
      const res = await getManual(authorizeUrl(gateway.issuer, valid({ resource: variant })));
      expectErrorRedirect(res, 'invalid_target');
      expect(gateway.recording.writes.slice(mark)).toEqual([]);
    }
  });

  it('refuses two resources', async () => {
    expectErrorRedirect(await getManual(authorizeUrl(gateway.issuer, valid({ resource: [resource, resource] }))), 'invalid_target');
  });

  it('requires resource when the gateway has several routes', async () => {
    const uri = `http://127.0.0.1:${await freePort()}/cb`;
    const id = await registerClient(multi, [uri]);
    const params = { response_type: 'code', client_id: id, redirect_uri: uri, code_challenge: CHALLENGE, code_challenge_method: 'S256', state: 'm' };
    // A dynamic client: the error is shown, not redirected ([J49]).
    const without = await getManual(authorizeUrl(multi.issuer, params));
    expect(without.status).toBe(400);
    expect(without.headers.get('location')).toBeNull();
    expect(without.body).toContain('invalid_target');
    const withResource = await getManual(authorizeUrl(multi.issuer, { ...params, resource: `${multi.issuer}/b/mcp` }));
    expect(withResource.status).toBe(200);
  });

  it('refuses a scope the route does not support (invalid_scope), accepts offline_access', async () => {
    expectErrorRedirect(await getManual(authorizeUrl(gateway.issuer, valid({ scope: 'mcp:read mcp:root' }))), 'invalid_scope');
    const ok = await getManual(authorizeUrl(gateway.issuer, valid({ scope: 'mcp:read offline_access' })));
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('mcp:read');
  });
});

describe('[E22] the success redirect', () => {
  it.each([
    ['a state that smuggles a second code', 'x&code=evil&iss=https://evil.example'],
    ['a state with CRLF', 'a\r\nLocation: https://evil.example'],
    ['a state with a fragment and a NUL', 'a#b\u0000c'],
    ['a 2000-character state', 's'.repeat(2000)],
    ['a state that is only spaces', '   '],
  ])('%s comes back once and byte for byte, beside exactly one code and one iss', async (_name, state) => {
    const callback = await followAuthorization(authorizeUrl(gateway.issuer, valid({ state })), redirectUri, { onPage: headlessUser('nina') });
    expect(callback.searchParams.getAll('state')).toEqual([state]);
    expect(callback.searchParams.getAll('code')).toHaveLength(1);
    expect(callback.searchParams.get('code')).not.toBe('evil');
    expect(callback.searchParams.getAll('iss')).toEqual([gateway.issuer]);
  });

  it('an error redirect also carries iss exactly once and no code', async () => {
    const res = await getManual(authorizeUrl(gateway.issuer, valid({ response_type: 'token', state: 'x&iss=https://evil.example&code=evil' })));
    const location = new URL(res.headers.get('location')!);
    expect(location.searchParams.getAll('iss')).toEqual([gateway.issuer]);
    expect(location.searchParams.getAll('code')).toEqual([]);
    expect(location.searchParams.getAll('state')).toEqual(['x&iss=https://evil.example&code=evil']);
  });

  it('carries exactly one code, the state byte for byte, and iss', async () => {
    const state = 'a b+c/%25?&=é😀"<>\\';
    const callback = await followAuthorization(authorizeUrl(gateway.issuer, valid({ state })), redirectUri, { onPage: headlessUser('erin') });
    expect(callback.searchParams.getAll('code')).toHaveLength(1);
    expect(callback.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(callback.searchParams.getAll('state')).toEqual([state]);
    expect(callback.searchParams.getAll('iss')).toEqual([gateway.issuer]);
    expect(callback.searchParams.has('error')).toBe(false);
  });

  it('sends no state when none was sent, and works for a POSTed authorization request', async () => {
    const form = new URLSearchParams(valid({ state: undefined }) as Record<string, string>);
    form.delete('state');
    const res = await fetch(`${gateway.issuer}/authorize`, { method: 'POST', body: form, redirect: 'manual' });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Approve');
  });

  it('a denied consent goes back with access_denied, the state and iss', async () => {
    const callback = await followAuthorization(authorizeUrl(gateway.issuer, valid({ state: 'deny-me' })), redirectUri, { onPage: headlessUser('frank', { decision: 'deny' }) });
    expect(callback.searchParams.get('error')).toBe('access_denied');
    expect(callback.searchParams.get('state')).toBe('deny-me');
    expect(callback.searchParams.get('iss')).toBe(gateway.issuer);
    expect(callback.searchParams.has('code')).toBe(false);
  });
});
