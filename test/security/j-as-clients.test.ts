/**
 * SECURITY-CASES group J, the built-in authorization server's client rules (SECURITY.md, group J):
 * J46 no machine token for an anonymous client; configured clients keep their configured scopes, while a
 *     dynamic client's registered scope bounds nothing and the user's consent bounds its grant (DESIGN §8.3);
 * J49 no redirect to a dynamic client before the user has seen its consent page (RFC 9700 §4.11.2);
 * J56 Client ID Metadata Documents: no redirect followed, only JSON content types;
 * J58 a refresh after a reload grants only what the configuration loaded now allows;
 * J59 remembered consent is per user, not per browser.
 * Real gateways, a real https document server, real reloads; ∅store where a case says nothing is stored.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { isJsonContentType } from '../../src/authorization-server/clients/client-id-metadata-document.js';
import { hashSecret } from '../../src/authorization-server/helpers/secrets.js';
import { loadConfig } from '../../src/config/load.js';
import { clientKey } from '../../src/store/key-names.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { expectAuthorizeErrorPage, headlessUser, parseForm, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { CookieBrowser } from '../helpers/cookie-browser.js';
import { startDocumentServer, type DocumentServer } from '../helpers/https-documents.js';
import { authorizeUrl, getManual, newVerifier, s256, type QueryParams } from '../helpers/oauth-requests.js';

const SVC_SECRET = 'svc-secret-value-0123456789';
const ANY_SECRET = 'any-secret-value-0123456789';
const verifier = newVerifier();
const challenge = s256(verifier);

/** Where client ID metadata documents are served from. */
let documents: DocumentServer;

let gateway: AsGateway;
let resource: string;
let webRedirect: string;

beforeAll(async () => {
  documents = await startDocumentServer();
  webRedirect = `http://127.0.0.1:${await freePort()}/web-cb`;
  gateway = await startAsGateway({
    upstream: 'http://127.0.0.1:9/mcp',
    authorizationServer: {
      clients: [
        { client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read', 'mcp:write', 'elsewhere:scope'] },
        { client_id: 'svc-any', client_secret: { env: 'ANY_SECRET' }, grant_types: ['client_credentials'] },
        { client_id: 'web-app', client_name: 'Web App', redirect_uris: [webRedirect], grant_types: ['authorization_code', 'refresh_token'], scopes: ['mcp:read', 'mcp:write'] },
      ],
    },
    env: { SVC_SECRET, ANY_SECRET },
    options: { registrationRateLimit: { max: 10_000, windowMs: 60_000 }, safeFetch: { allowLoopback: true, ca: documents.cert } },
  });
  resource = `${gateway.issuer}/everything/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
  await documents?.close();
});

interface Registered {
  id: string;
  secret?: string;
  redirectUri: string;
}

async function register(gw: AsGateway, metadata: Record<string, unknown> = {}): Promise<Registered> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const res = await fetch(`${gw.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'j tests', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], ...metadata }),
  });
  const json = (await res.json()) as Record<string, string>;
  expect(res.status, JSON.stringify(json)).toBe(201);
  return { id: json.client_id!, secret: json.client_secret, redirectUri };
}

async function rawRegister(body: unknown) {
  const mark = gateway.recording.writes.length;
  const res = await fetch(`${gateway.issuer}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, wrote: gateway.recording.writes.slice(mark) };
}

async function token(gw: AsGateway, params: Record<string, string>, basic?: [string, string]) {
  const headers: Record<string, string> = {};
  if (basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic[0])}:${encodeURIComponent(basic[1])}`).toString('base64')}`;
  const res = await fetch(`${gw.issuer}/token`, { method: 'POST', headers, body: new URLSearchParams(params) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const authorizeParams = (clientId: string, redirectUri: string, over: QueryParams = {}) => ({
  response_type: 'code',
  client_id: clientId,
  redirect_uri: redirectUri,
  code_challenge: challenge,
  code_challenge_method: 'S256',
  state: 'st',
  resource,
  ...over,
});

const isConsentPage = (body: string) => body.includes('name="decision"');
const isLoginPage = (body: string) => body.includes('name="username"');

/** An /authorize refusal shown to the user (expectAuthorizeErrorPage), and not a consent page. */
async function expectErrorPage(gw: AsGateway, url: URL, error?: string) {
  const res = await expectAuthorizeErrorPage(gw, url);
  expect(isConsentPage(res.body)).toBe(false);
  if (error) expect(res.body).toContain(error);
  return res;
}

async function redeem(gw: AsGateway, client: { id: string; redirectUri: string }, code: string) {
  return token(gw, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id });
}

/** The whole browser flow with the dev login: the code's token answer. */
async function authorizeAndRedeem(gw: AsGateway, client: { id: string; redirectUri: string }, scope: string, user = 'ivy') {
  const callback = await followAuthorization(authorizeUrl(gw.issuer, authorizeParams(client.id, client.redirectUri, { scope, resource: `${gw.issuer}/everything/mcp` })), client.redirectUri, {
    onPage: headlessUser(user),
  });
  const code = callback.searchParams.get('code');
  expect(code, callback.href).toBeTruthy();
  const res = await redeem(gw, client, code!);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json as { access_token: string; refresh_token?: string; scope: string };
}

const scopeOf = (accessToken: string) => String(decodeJwt(accessToken).scope ?? '');

describe('[J46] no machine token for an anonymous client', () => {
  const AUTH_METHODS = [undefined, 'none', 'client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt', 'tls_client_auth'];
  const GRANT_SETS = [
    ['client_credentials'],
    ['authorization_code', 'client_credentials'],
    ['client_credentials', 'refresh_token'],
    ['authorization_code', 'refresh_token', 'client_credentials'],
    ['client_credentials', 'client_credentials'],
  ];
  const cases = GRANT_SETS.flatMap((grants) => AUTH_METHODS.map((method) => [grants.join(','), method ?? '(default)', grants, method] as const));

  it.each(cases)('DCR grant_types [%s] with token_endpoint_auth_method %s → 400 invalid_client_metadata, nothing stored', async (_g, _m, grants, method) => {
    const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
    const res = await rawRegister({ client_name: 'mint', redirect_uris: [redirectUri], grant_types: grants, ...(method && { token_endpoint_auth_method: method }) });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_client_metadata');
    expect(typeof res.json.error_description).toBe('string');
    expect(res.json).not.toHaveProperty('client_id');
    expect(res.wrote).toEqual([]);
  });

  it('property: any grant outside authorization_code and refresh_token refuses the registration, nothing stored', async () => {
    const other = fc.oneof(
      fc.constantFrom(
        'client_credentials', 'password', 'implicit', 'Client_Credentials', 'client_credentials ', ' client_credentials', 'CLIENT_CREDENTIALS', 'client-credentials',
        'urn:ietf:params:oauth:grant-type:jwt-bearer', 'urn:ietf:params:oauth:grant-type:token-exchange', 'urn:ietf:params:oauth:grant-type:device_code',
        'urn:ietf:params:oauth:grant-type:saml2-bearer', 'urn:openid:params:grant-type:ciba', 'refresh_token\u0000', 'authorization_code\n',
      ),
      fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s !== 'authorization_code' && s !== 'refresh_token'),
    );
    const allowed = fc.subarray(['authorization_code', 'refresh_token']);
    await fc.assert(
      fc.asyncProperty(allowed, other, fc.nat(3), fc.constantFrom(undefined, 'none', 'client_secret_basic', 'client_secret_post'), async (ok, bad, at, method) => {
        const grants = [...ok.slice(0, at), bad, ...ok.slice(at)];
        const res = await rawRegister({ redirect_uris: ['https://app.example/cb'], grant_types: grants, ...(method && { token_endpoint_auth_method: method }) });
        expect(res.status).toBe(400);
        expect(res.json.error).toBe('invalid_client_metadata');
        expect(res.wrote).toEqual([]);
      }),
      { numRuns: 60 },
    );
  });

  it('the client_id and client_secret a registration sends are ignored: a configured id cannot be taken over', async () => {
    const taken = await register(gateway, { client_id: 'svc', client_secret: 'attacker-secret-0123456789', token_endpoint_auth_method: 'client_secret_basic' });
    expect(taken.id).not.toBe('svc');
    expect(taken.secret).not.toBe('attacker-secret-0123456789');
    for (const [id, secret] of [['svc', 'attacker-secret-0123456789'], ['svc', taken.secret!]] as const) {
      const res = await token(gateway, { grant_type: 'client_credentials', resource }, [id, secret]);
      expect(res.status).toBe(401);
      expect(res.json.error).toBe('invalid_client');
      expect(res.json).not.toHaveProperty('access_token');
    }
  });

  describe('a dynamic client asking /token for client_credentials anyway → unauthorized_client, no token', () => {
    const variants: Array<[string, Record<string, unknown>]> = [
      ['confidential, no grant_types (default)', { token_endpoint_auth_method: 'client_secret_basic', grant_types: undefined }],
      ['confidential, code and refresh', { token_endpoint_auth_method: 'client_secret_basic' }],
      ['client_secret_post', { token_endpoint_auth_method: 'client_secret_post' }],
      ['public', { token_endpoint_auth_method: 'none' }],
    ];
    it.each(variants)('%s', async (_name, metadata) => {
      const client = await register(gateway, metadata);
      const asks: Array<Record<string, string>> = [{}, { resource }, { resource, scope: 'mcp:read' }, { resource, scope: 'mcp:admin' }, { scope: '' }];
      for (const extra of asks) {
        const viaBasic = client.secret ? await token(gateway, { grant_type: 'client_credentials', ...extra }, [client.id, client.secret]) : undefined;
        const viaBody = await token(gateway, { grant_type: 'client_credentials', client_id: client.id, ...(client.secret && { client_secret: client.secret }), ...extra });
        for (const res of [viaBasic, viaBody]) {
          if (!res) continue;
          expect(res.status).toBe(400);
          expect(res.json.error).toBe('unauthorized_client');
          expect(res.json).not.toHaveProperty('access_token');
        }
      }
    });
  });

  it('a dynamic registration stored before this rule, with client_credentials, still gets no machine token', async () => {
    const id = `legacy-${randomBytes(8).toString('hex')}`;
    const secret = 'legacy-secret-value-0123456789';
    await gateway.recording.set(
      clientKey(id),
      JSON.stringify({ clientId: id, kind: 'dynamic', redirectUris: [], grantTypes: ['client_credentials'], tokenEndpointAuthMethod: 'client_secret_basic', applicationType: 'web', secretHash: hashSecret(secret), issuedAt: 0, lastUsedAt: Date.now() }),
      60_000,
    );
    const res = await token(gateway, { grant_type: 'client_credentials', resource, scope: 'mcp:read' }, [id, secret]);
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('unauthorized_client');
  });

  describe('Client ID Metadata Documents declaring client_credentials', () => {
    const docs: Array<[string, Record<string, unknown>]> = [
      ['client_credentials only', { grant_types: ['client_credentials'], token_endpoint_auth_method: 'none' }],
      ['beside the code grant', { grant_types: ['authorization_code', 'client_credentials'] }],
      ['with client_secret_basic', { grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_basic' }],
      ['with private_key_jwt', { grant_types: ['client_credentials'], token_endpoint_auth_method: 'private_key_jwt' }],
      ['the JWT bearer grant', { grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:jwt-bearer'] }],
    ];
    it.each(docs)('%s → an error page at /authorize, and nothing at /token', async (name, extra) => {
      const path = `/j46/${encodeURIComponent(name)}.json`;
      const clientId = `${documents.origin}${path}`;
      const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
      documents.routes.set(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: clientId, redirect_uris: [redirectUri], ...extra })));
      await expectErrorPage(gateway, authorizeUrl(gateway.issuer, authorizeParams(clientId, redirectUri)));
      const res = await token(gateway, { grant_type: 'client_credentials', client_id: clientId, resource });
      expect([400, 401]).toContain(res.status);
      expect(res.json).not.toHaveProperty('access_token');
    });
  });

  describe('configured clients: client_credentials within their configured scopes', () => {
    it('a scope outside the configured ones → invalid_scope; none → the configured ones the route knows', async () => {
      for (const scope of ['mcp:admin', 'mcp:read mcp:admin', 'elsewhere:scope', 'offline_access mcp:admin']) {
        const res = await token(gateway, { grant_type: 'client_credentials', resource, scope }, ['svc', SVC_SECRET]);
        expect(res.json.error, scope).toBe('invalid_scope');
      }
      const none = await token(gateway, { grant_type: 'client_credentials', resource }, ['svc', SVC_SECRET]);
      expect(none.status).toBe(200);
      expect(none.json.scope).toBe('mcp:read mcp:write');
      expect(scopeOf(String(none.json.access_token))).toBe('mcp:read mcp:write');
      const narrower = await token(gateway, { grant_type: 'client_credentials', resource, scope: 'mcp:write' }, ['svc', SVC_SECRET]);
      expect(narrower.json.scope).toBe('mcp:write');
    });

    it('a configured client without configured scopes: the route scopes, its required ones by default', async () => {
      const none = await token(gateway, { grant_type: 'client_credentials', resource }, ['svc-any', ANY_SECRET]);
      expect(none.json.scope).toBe('mcp:read');
      const admin = await token(gateway, { grant_type: 'client_credentials', resource, scope: 'mcp:admin' }, ['svc-any', ANY_SECRET]);
      expect(admin.json.scope).toBe('mcp:admin');
      expect((await token(gateway, { grant_type: 'client_credentials', resource, scope: 'mcp:root' }, ['svc-any', ANY_SECRET])).json.error).toBe('invalid_scope');
    });

    it('a configured client with a wrong secret, or without one, gets nothing', async () => {
      for (const [params, basic] of [
        [{ grant_type: 'client_credentials', resource }, ['svc', `${SVC_SECRET}x`]],
        [{ grant_type: 'client_credentials', resource, client_id: 'svc' }, undefined],
        [{ grant_type: 'client_credentials', resource }, ['web-app', '']],
      ] as Array<[Record<string, string>, [string, string] | undefined]>) {
        const res = await token(gateway, params, basic);
        expect([400, 401]).toContain(res.status);
        expect(res.json).not.toHaveProperty('access_token');
      }
    });
  });

  // DESIGN §8.3 (replaces §7.1's last sentence): registration is open to anyone, so a registered
  // scope bounded nothing worth bounding and broke step-up (the SDKs register with the first
  // challenge's scope). The user's consent to each wider set bounds a dynamic client's grant.
  describe("a dynamic client's registered scope does not bound what it may ask the user for; the user's consent does", () => {
    const ROUTE_SCOPES = ['mcp:read', 'mcp:write', 'mcp:admin'];

    it('any registered scope (or none), any requested set of the route\'s scopes → the consent page naming them; an unknown scope → an error page', async () => {
      const subset = fc.subarray(ROUTE_SCOPES);
      await fc.assert(
        fc.asyncProperty(subset, fc.subarray(ROUTE_SCOPES, { minLength: 1 }), fc.boolean(), async (registered, requested, unknown) => {
          const client = await register(gateway, registered.length > 0 ? { scope: registered.join(' ') } : {});
          const scope = [...requested, ...(unknown ? ['mcp:root'] : [])].join(' ');
          const url = authorizeUrl(gateway.issuer, authorizeParams(client.id, client.redirectUri, { scope }));
          if (unknown) {
            await expectErrorPage(gateway, url, 'invalid_scope');
            return;
          }
          const page = await getManual(url);
          expect(isConsentPage(page.body), page.body.slice(0, 300)).toBe(true);
          for (const s of requested) expect(page.body).toContain(s);
        }),
        { numRuns: 16 },
      );
    });

    it('step-up as the SDKs do it: registered for mcp:read, approved for it, then asked for more → a new consent page naming mcp:write, and a token with it', async () => {
      const client = await register(gateway, { scope: 'mcp:read' });
      const browser = new CookieBrowser();
      const start = (scope: string) => browser.request(authorizeUrl(gateway.issuer, authorizeParams(client.id, client.redirectUri, { scope })));
      const approveAndSignIn = async (page: { body: string }) => {
        expect(isConsentPage(page.body)).toBe(true);
        const consent = parseForm(page.body)!;
        const login = await submit(browser, consent.action, { ...consent.fields, decision: 'approve' });
        const form = parseForm(login.body)!;
        const back = await submit(browser, form.action, { ...form.fields, username: 'kim' });
        const code = new URL(back.headers.get('location')!).searchParams.get('code');
        expect(code).toBeTruthy();
        const res = await redeem(gateway, client, code!);
        expect(res.status, JSON.stringify(res.json)).toBe(200);
        return res.json as { access_token: string; scope: string };
      };
      expect(scopeOf((await approveAndSignIn(await start('mcp:read'))).access_token)).toBe('mcp:read');
      // Remembered consent for mcp:read does not cover mcp:read mcp:write: the page comes back and names mcp:write.
      const wider = await start('mcp:read mcp:write');
      expect(wider.body).toContain('mcp:write');
      expect(scopeOf((await approveAndSignIn(wider)).access_token).split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      // Now remembered for both: the narrower request goes straight to the login.
      expect(isLoginPage((await start('mcp:read')).body)).toBe(true);
    });

    it('a refresh cannot widen a grant: only the consent page can', async () => {
      const client = await register(gateway, { scope: 'mcp:read mcp:write' });
      const issued = await authorizeAndRedeem(gateway, client, 'mcp:read');
      for (const scope of ['mcp:read mcp:write', 'mcp:write', 'mcp:read mcp:admin']) {
        const wider = await token(gateway, { grant_type: 'refresh_token', refresh_token: issued.refresh_token!, client_id: client.id, scope });
        expect(wider.json.error).toBe('invalid_scope');
      }
    });

    it('a metadata document scope bounds nothing either: the consent page names what is asked', async () => {
      const path = '/j46/scoped.json';
      const clientId = `${documents.origin}${path}`;
      const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
      documents.routes.set(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: clientId, redirect_uris: [redirectUri], scope: 'mcp:read' })));
      const page = await getManual(authorizeUrl(gateway.issuer, authorizeParams(clientId, redirectUri, { scope: 'mcp:read mcp:write' })));
      expect(isConsentPage(page.body)).toBe(true);
      expect(page.body).toContain('mcp:write');
    });

    it('a configured client: /authorize outside its configured scopes goes back with invalid_scope', async () => {
      const res = await getManual(authorizeUrl(gateway.issuer, authorizeParams('web-app', webRedirect, { scope: 'mcp:admin' })));
      expect(res.status).toBe(302);
      expect(new URL(res.headers.get('location')!).searchParams.get('error')).toBe('invalid_scope');
    });
  });
});

/** Invalid authorization requests (beyond the client and redirect URI checks). */
const INVALID_REQUESTS: Array<[string, QueryParams, string]> = [
  ['prompt=none', { prompt: 'none' }, 'login_required'],
  ['prompt=none consent', { prompt: 'none consent' }, 'login_required'],
  ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
  ['response_type code id_token', { response_type: 'code id_token' }, 'unsupported_response_type'],
  ['no response_type', { response_type: undefined }, 'invalid_request'],
  ['no code_challenge', { code_challenge: undefined }, 'invalid_request'],
  ['code_challenge_method plain', { code_challenge_method: 'plain' }, 'invalid_request'],
  ['no code_challenge_method', { code_challenge_method: undefined }, 'invalid_request'],
  ['a short challenge', { code_challenge: 'abc' }, 'invalid_request'],
  ['response_mode fragment', { response_mode: 'fragment' }, 'invalid_request'],
  ['response_mode form_post', { response_mode: 'form_post' }, 'invalid_request'],
  ['a request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
  ['a request_uri', { request_uri: 'urn:ietf:params:oauth:request_uri:abc' }, 'request_not_supported'],
  ['an unknown resource', { resource: 'https://evil.example/mcp' }, 'invalid_target'],
  ['two resources', { resource: ['a', 'b'] }, 'invalid_target'],
  ['an unsupported scope', { scope: 'mcp:read mcp:root' }, 'invalid_scope'],
  ['two states', { state: ['a', 'b'] }, 'invalid_request'],
  ['a repeated scope parameter', { scope: ['mcp:read', 'mcp:read'] }, 'invalid_request'],
];

describe('[J49] no redirect to a dynamic client before its consent page (RFC 9700 §4.11.2)', () => {
  let dynamic: Registered;
  let documentClient: { id: string; redirectUri: string };

  beforeAll(async () => {
    dynamic = await register(gateway, { redirect_uris: ['https://evil.example/collect'], client_name: 'attacker' });
    dynamic.redirectUri = 'https://evil.example/collect';
    const path = '/j49/client.json';
    documentClient = { id: `${documents.origin}${path}`, redirectUri: 'https://evil.example/doc-collect' };
    documents.routes.set(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: documentClient.id, redirect_uris: [documentClient.redirectUri] })));
  });

  it.each(INVALID_REQUESTS)('DCR client, %s → an error page naming %s, nothing stored', async (_name, over, error) => {
    const res = await expectErrorPage(gateway, authorizeUrl(gateway.issuer, authorizeParams(dynamic.id, dynamic.redirectUri, over)), error);
    expect(res.body).not.toContain('evil.example');
  });

  it.each(INVALID_REQUESTS)('metadata document client, %s → an error page naming %s', async (_name, over, error) => {
    await expectErrorPage(gateway, authorizeUrl(gateway.issuer, authorizeParams(documentClient.id, documentClient.redirectUri, over)), error);
  });

  it('sent by POST as a form too', async () => {
    const mark = gateway.recording.writes.length;
    const form = new URLSearchParams({ ...authorizeParams(dynamic.id, dynamic.redirectUri), prompt: 'none' } as Record<string, string>);
    const res = await fetch(`${gateway.issuer}/authorize`, { method: 'POST', body: form, redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
  });

  it('property: whatever the request, a dynamic client gets a 200 consent page or a 400 error page, never a 3xx', async () => {
    const value = fc.oneof(fc.constant(undefined), fc.string({ maxLength: 12 }), fc.constantFrom('code', 'none', 'S256', 'plain', 'consent', 'login', challenge, resource, 'mcp:read'));
    await fc.assert(
      fc.asyncProperty(
        fc.record({ response_type: value, code_challenge: value, code_challenge_method: value, prompt: value, scope: value, resource: value, response_mode: value, request: fc.constantFrom(undefined, 'x') }),
        async (over) => {
          const res = await getManual(authorizeUrl(gateway.issuer, authorizeParams(dynamic.id, dynamic.redirectUri, over)));
          expect([200, 400]).toContain(res.status);
          expect(res.headers.get('location')).toBeNull();
        },
      ),
      { numRuns: 80 },
    );
  });

  it('a configured client keeps the RFC 6749 error redirect (its redirect URI was set by the operator)', async () => {
    for (const [, over, error] of INVALID_REQUESTS.filter(([name]) => name !== 'two states')) {
      const res = await getManual(authorizeUrl(gateway.issuer, authorizeParams('web-app', webRedirect, over)));
      expect(res.status).toBe(302);
      const location = new URL(res.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(webRedirect);
      expect(location.searchParams.get('error')).toBe(error);
    }
  });

  it('after the consent page, errors go back as usual: a denial redirects with access_denied', async () => {
    const client = await register(gateway);
    const callback = await followAuthorization(authorizeUrl(gateway.issuer, authorizeParams(client.id, client.redirectUri, { state: 'd' })), client.redirectUri, {
      onPage: headlessUser('zoe', { decision: 'deny' }),
    });
    expect(callback.searchParams.get('error')).toBe('access_denied');
    expect(callback.searchParams.get('state')).toBe('d');
  });
});

describe('[J56] Client ID Metadata Documents: no redirects, JSON only', () => {
  const redirectUri = 'https://app.example/cb';
  const publish = (path: string, status: number, headers: Record<string, string>, body?: (url: string) => unknown) => {
    const url = `${documents.origin}${path}`;
    documents.routes.set(path, (_req, res) => res.writeHead(status, headers).end(body ? JSON.stringify(body(url)) : ''));
    return url;
  };
  const documentFor = (url: string) => ({ client_id: url, client_name: 'Trusted Host Client', redirect_uris: [redirectUri] });

  it.each([301, 302, 303, 307, 308])('a %i redirect, even to a valid document on the same host → an error page; the target is never fetched', async (status) => {
    const target = `/j56/target-${status}.json`;
    const targetUrl = `${documents.origin}${target}`;
    // The target names the redirecting URL as its client_id: it would be accepted if the redirect were followed.
    const from = `/j56/redirect-${status}.json`;
    documents.routes.set(target, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(documentFor(`${documents.origin}${from}`))));
    const clientId = publish(from, status, { location: targetUrl });
    const before = documents.hits.length;
    const res = await expectErrorPage(gateway, authorizeUrl(gateway.issuer, authorizeParams(clientId, redirectUri)));
    expect(res.body).not.toContain('Trusted Host Client');
    expect(documents.hits.slice(before)).toEqual([from]);
  });

  const accepted = ['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/json;charset="UTF-8"', 'application/client-metadata+json', 'application/vnd.example+json; v=1'];
  const refused = [
    undefined,
    'text/html',
    'text/plain',
    'text/json',
    'application/jsonp',
    'application/json-seq',
    'application/javascript',
    'application/octet-stream',
    'application/x-www-form-urlencoded',
    'application/json; charset=utf-16',
    'application/json; charset=iso-8859-1',
    'application/json, text/html',
    'application/json;',
    'application/json; charset',
    '+json',
    'application/+json',
    'multipart/mixed; boundary=json',
  ];

  it.each(accepted)('Content-Type %s counts as JSON: the consent page', async (type) => {
    const clientId = publish(`/j56/ok-${encodeURIComponent(type)}.json`, 200, { 'content-type': type }, documentFor);
    const res = await getManual(authorizeUrl(gateway.issuer, authorizeParams(clientId, redirectUri)));
    expect(res.status).toBe(200);
    expect(isConsentPage(res.body)).toBe(true);
  });

  it.each(refused.map((t) => [String(t), t] as const))('Content-Type %s → an error page, never a consent page', async (_label, type) => {
    const path = `/j56/refused-${encodeURIComponent(String(type))}.json`;
    const url = `${documents.origin}${path}`;
    documents.routes.set(path, (_req, res) => {
      // Node sets no Content-Type of its own: undefined is a document without one.
      if (type !== undefined) res.setHeader('content-type', type);
      res.writeHead(200).end(JSON.stringify(documentFor(url)));
    });
    await expectErrorPage(gateway, authorizeUrl(gateway.issuer, authorizeParams(url, redirectUri)));
  });

  it('the content-type judgement on its own: JSON and +json types only, UTF-8 only', () => {
    for (const type of accepted) expect(isJsonContentType(type), type).toBe(true);
    for (const type of refused) expect(isJsonContentType(type), String(type)).toBe(false);
    expect(isJsonContentType(['application/json', 'application/json'])).toBe(false);
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (type) => {
        const lower = type.toLowerCase().split(';')[0]!.trim();
        if (isJsonContentType(type)) expect(lower === 'application/json' || (lower.startsWith('application/') && lower.endsWith('+json'))).toBe(true);
      }),
    );
  });
});

/** The gateway's config files as written, to change and reload. */
async function readConfigFiles(gw: AsGateway): Promise<{ gateway: Record<string, unknown>; route: Record<string, unknown> }> {
  return {
    gateway: parseYaml(await readFile(join(gw.dir, 'gateway.yaml'), 'utf8')) as Record<string, unknown>,
    route: parseYaml(await readFile(join(gw.dir, 'everything.yaml'), 'utf8')) as Record<string, unknown>,
  };
}

async function reload(gw: AsGateway, files: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) {
  await gw.writeConfig(files);
  await gw.reload(await loadConfig(gw.dir, env));
}

describe('[J58] a refresh grants only what the configuration loaded now allows', () => {
  let gw: AsGateway;
  let original: Awaited<ReturnType<typeof readConfigFiles>>;
  let staticRedirect: string;

  beforeAll(async () => {
    staticRedirect = `http://127.0.0.1:${await freePort()}/static-cb`;
    gw = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      authorizationServer: { clients: [{ client_id: 'static-app', redirect_uris: [staticRedirect], scopes: ['mcp:read', 'mcp:write', 'mcp:admin'] }] },
      options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } },
    });
    original = await readConfigFiles(gw);
  });
  afterAll(async () => {
    await gw?.stop();
  });

  const withRoute = (route: Record<string, unknown>) => ({ 'everything.yaml': { ...original.route, ...route } });
  const refresh = (client: { id: string }, refreshToken: string, extra: Record<string, string> = {}) =>
    token(gw, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id, ...extra });

  it('a scope withdrawn from scopes_supported is dropped at the next refresh, and stays dropped', async () => {
    await reload(gw, withRoute({}));
    const client = await register(gw);
    const issued = await authorizeAndRedeem(gw, client, 'mcp:read mcp:admin');
    expect(issued.scope).toBe('mcp:read mcp:admin');
    await reload(gw, withRoute({ scopes_supported: ['mcp:read', 'mcp:write'] }));
    const first = await refresh(client, issued.refresh_token!);
    expect(first.status).toBe(200);
    expect(first.json.scope).toBe('mcp:read');
    expect(scopeOf(String(first.json.access_token))).toBe('mcp:read');
    const second = await refresh(client, String(first.json.refresh_token));
    expect(scopeOf(String(second.json.access_token))).toBe('mcp:read');
    // Asking for the withdrawn scope by name does not bring it back.
    const asked = await refresh(client, String(second.json.refresh_token), { scope: 'mcp:admin' });
    expect(asked.status).toBe(400);
    expect(asked.json.error).toBe('invalid_grant');
    expect(asked.json).not.toHaveProperty('access_token');
  });

  it('every scope of the grant withdrawn → invalid_grant, and the refresh token is not spent', async () => {
    await reload(gw, withRoute({}));
    const client = await register(gw);
    const issued = await authorizeAndRedeem(gw, client, 'mcp:admin');
    await reload(gw, withRoute({ scopes_supported: ['mcp:read'] }));
    const res = await refresh(client, issued.refresh_token!);
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_grant');
    await reload(gw, withRoute({}));
    expect((await refresh(client, issued.refresh_token!)).json.scope).toBe('mcp:admin');
  });

  it('the route removed (its resource gone) → invalid_grant', async () => {
    await reload(gw, withRoute({}));
    const client = await register(gw);
    const issued = await authorizeAndRedeem(gw, client, 'mcp:read');
    await reload(gw, withRoute({ path: '/moved/mcp' }));
    const res = await refresh(client, issued.refresh_token!);
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_grant');
    expect(res.json).not.toHaveProperty('access_token');
  });

  it('a code redeemed after a reload that withdrew one of its scopes does not carry it', async () => {
    await reload(gw, withRoute({}));
    const client = await register(gw);
    const callback = await followAuthorization(authorizeUrl(gw.issuer, authorizeParams(client.id, client.redirectUri, { scope: 'mcp:read mcp:write', resource: `${gw.issuer}/everything/mcp` })), client.redirectUri, {
      onPage: headlessUser('ula'),
    });
    await reload(gw, withRoute({ scopes_supported: ['mcp:read'] }));
    const res = await redeem(gw, client, callback.searchParams.get('code')!);
    expect(res.status).toBe(200);
    expect(scopeOf(String(res.json.access_token))).toBe('mcp:read');
  });

  it("a configured client whose configured scopes shrank: the refresh drops what it may no longer have", async () => {
    await reload(gw, withRoute({}));
    const client = { id: 'static-app', redirectUri: staticRedirect };
    const issued = await authorizeAndRedeem(gw, client, 'mcp:read mcp:write');
    const gatewayYaml = original.gateway as { authorization_server: Record<string, unknown> };
    await reload(gw, {
      'gateway.yaml': { ...gatewayYaml, authorization_server: { ...gatewayYaml.authorization_server, clients: [{ client_id: 'static-app', redirect_uris: [staticRedirect], scopes: ['mcp:read'] }] } },
    });
    const res = await refresh(client, issued.refresh_token!);
    expect(res.status).toBe(200);
    expect(scopeOf(String(res.json.access_token))).toBe('mcp:read');
    await reload(gw, { 'gateway.yaml': original.gateway });
  });
});

/** Posts a page's form from `browser` (one browser, several people: its cookie jar is shared by them). */
const submit = (browser: CookieBrowser, action: string, fields: Record<string, string>) =>
  browser.request(new URL(action, gateway.issuer), { method: 'POST', body: new URLSearchParams(fields) });

describe('[J59] remembered consent is per user', () => {
  const start = (browser: CookieBrowser, client: Registered, over: Record<string, string> = {}) =>
    browser.request(authorizeUrl(gateway.issuer, authorizeParams(client.id, client.redirectUri, { scope: 'mcp:read', ...over })));

  /** Signs in on a login page; returns the answer (a redirect with the code, or a consent page of the user's own). */
  async function signIn(browser: CookieBrowser, page: { body: string }, user: string) {
    expect(isLoginPage(page.body)).toBe(true);
    const form = parseForm(page.body)!;
    return submit(browser, form.action, { ...form.fields, username: user });
  }

  async function decide(browser: CookieBrowser, page: { body: string }, decision: 'approve' | 'deny') {
    expect(isConsentPage(page.body)).toBe(true);
    const form = parseForm(page.body)!;
    return submit(browser, form.action, { ...form.fields, decision });
  }

  async function subjectOfRedirect(client: Registered, res: { status: number; headers: Headers }) {
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).toBe(client.redirectUri);
    const code = location.searchParams.get('code');
    expect(code, location.href).toBeTruthy();
    const answer = await redeem(gateway, client, code!);
    return String(decodeJwt(String(answer.json.access_token)).sub);
  }

  it("another user of the same browser sees a consent page of their own, and gets no code until they approve", async () => {
    const client = await register(gateway, { client_name: 'Shared Browser App' });
    const browser = new CookieBrowser();
    const consent = await start(browser, client);
    const afterConsent = await decide(browser, consent, 'approve');
    expect(await subjectOfRedirect(client, await signIn(browser, afterConsent, 'alice'))).toBe('alice');

    // The browser remembers: the login comes first. Bob signs in: his own consent page, no code yet.
    const mark = gateway.recording.writes.length;
    const bobPage = await signIn(browser, await start(browser, client), 'bob');
    expect(bobPage.status).toBe(200);
    expect(bobPage.headers.get('location')).toBeNull();
    expect(isConsentPage(bobPage.body)).toBe(true);
    expect(bobPage.body).toContain('Shared Browser App');
    expect(bobPage.body).toContain(new URL(client.redirectUri).host);
    expect(gateway.recording.writes.slice(mark).some((w) => w.key.startsWith('code'))).toBe(false);
    expect(await subjectOfRedirect(client, await decide(browser, bobPage, 'approve'))).toBe('bob');

    // Now each of them is remembered: straight through the login.
    expect(await subjectOfRedirect(client, await signIn(browser, await start(browser, client), 'bob'))).toBe('bob');
    expect(await subjectOfRedirect(client, await signIn(browser, await start(browser, client), 'alice'))).toBe('alice');
    // And a third user is asked again.
    expect(isConsentPage((await signIn(browser, await start(browser, client), 'carol')).body)).toBe(true);
  });

  it('a user who denies on their own page gets access_denied and no code', async () => {
    const client = await register(gateway);
    const browser = new CookieBrowser();
    await signIn(browser, await decide(browser, await start(browser, client), 'approve'), 'dave');
    const erinPage = await signIn(browser, await start(browser, client), 'erin');
    const denied = await decide(browser, erinPage, 'deny');
    expect(denied.status).toBe(303);
    const location = new URL(denied.headers.get('location')!);
    expect(location.searchParams.get('error')).toBe('access_denied');
    expect(location.searchParams.has('code')).toBe(false);
    // Still not remembered for erin.
    expect(isConsentPage((await signIn(browser, await start(browser, client), 'erin')).body)).toBe(true);
  });

  it("a user's remembered consent covers only what they approved: wider scopes or another client ask again", async () => {
    const client = await register(gateway);
    const browser = new CookieBrowser();
    await signIn(browser, await decide(browser, await start(browser, client), 'approve'), 'fay');
    // Approved mcp:read only; the browser asks for mcp:read mcp:write: the consent page before the login.
    expect(isConsentPage((await start(browser, client, { scope: 'mcp:read mcp:write' })).body)).toBe(true);
    // fay in another browser with the same client: the consent page first (the browser has no record).
    expect(isConsentPage((await start(new CookieBrowser(), client)).body)).toBe(true);
  });

  it("a user's post-login consent form is bound to this browser and used once", async () => {
    const client = await register(gateway);
    const browser = new CookieBrowser();
    await signIn(browser, await decide(browser, await start(browser, client), 'approve'), 'gus');
    const page = await signIn(browser, await start(browser, client), 'hal');
    const form = parseForm(page.body)!;
    const elsewhere = new CookieBrowser();
    const foreign = await submit(elsewhere, form.action, { ...form.fields, decision: 'approve' });
    expect(foreign.status).toBe(403);
    expect(await subjectOfRedirect(client, await submit(browser, form.action, { ...form.fields, decision: 'approve' }))).toBe('hal');
    const again = await submit(browser, form.action, { ...form.fields, decision: 'approve' });
    expect(again.status).toBe(400);
    expect(again.headers.get('location')).toBeNull();
  });
});
