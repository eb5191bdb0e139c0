/**
 * `authorization_server.login` for third-party IdPs (issue 16 item 4): the oidc quirks' defaults and
 * values, `extra_authorize_params` refusing every parameter the gateway sets itself (each name of
 * the list, in any case, by a property), and `kind: oauth2` with its required endpoints and secret.
 * Also the user id read from what the IdP said (userIdFrom), as a property over any JSON value.
 */
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { userIdFrom } from '../../src/authorization-server/login/idp-round-trip.js';
import { ConfigError } from '../../src/config/config-error.js';
import { GATEWAY_AUTHORIZE_PARAMS } from '../../src/config/idp-authorize-params.js';
import { loadConfig } from '../../src/config/load.js';

const ROUTE = 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\n';
const OIDC = 'kind: oidc, issuer: https://login.example.com/tenant/v2.0, client_id: gw, client_secret: { env: S }';
const OAUTH2 =
  'kind: oauth2, authorization_endpoint: https://github.com/login/oauth/authorize, token_endpoint: https://github.com/login/oauth/access_token, userinfo_endpoint: https://api.github.com/user, client_id: gw, client_secret: { env: S }';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-login-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(login: string) {
  await writeFile(join(dir, 'gateway.yaml'), `listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  login: { ${login} }\n`);
  await writeFile(join(dir, 'a.yaml'), ROUTE);
  return loadConfig(dir, { S: 'the-secret' });
}

async function loadError(login: string): Promise<string> {
  const err = await load(login).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as Error).message;
}

describe('login: oidc quirks', () => {
  it('defaults: send the resource, sub names the user, no extra parameters', async () => {
    const config = await load(OIDC);
    expect(config.authorizationServer?.login).toEqual({
      kind: 'oidc', issuer: 'https://login.example.com/tenant/v2.0', clientId: 'gw', clientSecret: 'the-secret', scopes: ['openid'],
      sendResource: true, subjectClaim: 'sub', extraAuthorizeParams: {},
    });
  });

  it('Entra ID settings are taken as written', async () => {
    const config = await load(`${OIDC}, send_resource: false, subject_claim: oid, extra_authorize_params: { domain_hint: example.com, prompt: select_account }`);
    expect(config.authorizationServer?.login).toMatchObject({ sendResource: false, subjectClaim: 'oid', extraAuthorizeParams: { domain_hint: 'example.com', prompt: 'select_account' } });
  });

  it('refuses every parameter the gateway sets itself, in any case, in both kinds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...GATEWAY_AUTHORIZE_PARAMS), fc.constantFrom(OIDC, `${OAUTH2}, subject_claim: id`), fc.func(fc.boolean()), async (name, login, upper) => {
        const spelled = [...name].map((ch, i) => (upper(i) ? ch.toUpperCase() : ch)).join('');
        const message = await loadError(`${login}, extra_authorize_params: { ${spelled}: x }`);
        expect(message).toContain(`${spelled} is set by the gateway itself`);
      }),
      { numRuns: 40 },
    );
  });

  it('refuses a parameter name that is not a plain token, a value over 2048 characters, a subject claim that is not a name', async () => {
    expect(await loadError(`${OIDC}, extra_authorize_params: { "a b": x }`)).toContain('a parameter name is');
    expect(await loadError(`${OIDC}, extra_authorize_params: { audience: ${'x'.repeat(2049)} }`)).toMatch(/extra_authorize_params/);
    expect(await loadError(`${OIDC}, subject_claim: "o i d"`)).toContain('a claim name is');
    expect(await loadError(`${OIDC}, send_resource: "no"`)).toMatch(/send_resource/);
  });
});

describe('login: oauth2', () => {
  it('loads GitHub settings: the secret read, subject_claim as written, no scopes by default', async () => {
    const config = await load(`${OAUTH2}, subject_claim: id, extra_authorize_params: { allow_signup: "false" }`);
    expect(config.authorizationServer?.login).toEqual({
      kind: 'oauth2',
      authorizationEndpoint: 'https://github.com/login/oauth/authorize',
      tokenEndpoint: 'https://github.com/login/oauth/access_token',
      userinfoEndpoint: 'https://api.github.com/user',
      clientId: 'gw', clientSecret: 'the-secret', scopes: [], subjectClaim: 'id', extraAuthorizeParams: { allow_signup: 'false' },
    });
  });

  it('requires the endpoints, the client secret and the subject claim', async () => {
    expect(await loadError(OAUTH2)).toMatch(/subject_claim/);
    expect(await loadError(`${OAUTH2.replace(', client_secret: { env: S }', '')}, subject_claim: id`)).toMatch(/client_secret/);
    expect(await loadError(`${OAUTH2.replace(/, userinfo_endpoint: [^,]+/, '')}, subject_claim: id`)).toMatch(/userinfo_endpoint/);
    expect(await loadError(`${OAUTH2.replace('https://github.com/login/oauth/access_token', 'ftp://github.com/x')}, subject_claim: id`)).toContain('expected an http(s) URL');
  });

  it('idp_token needs the oidc login: an oauth2 login keeps no IdP token', async () => {
    await writeFile(join(dir, 'gateway.yaml'), `listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  login: { ${OAUTH2}, subject_claim: id }\n`);
    await writeFile(join(dir, 'a.yaml'), `${ROUTE}upstream_auth: { kind: idp_token }\n`);
    const err = await loadConfig(dir, { S: 'x' }).then(() => undefined, (e: unknown) => e);
    expect((err as Error).message).toContain('idp_token needs the built-in authorization server with login.kind oidc');
  });
});

describe('the user id the gateway token carries (userIdFrom)', () => {
  const PRINTABLE = /^[\x20-\x7E]{1,255}$/;

  it('is a printable ASCII string of 1 to 255 characters, or nothing, whatever the IdP sent', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (value, integers) => {
        const id = userIdFrom({ id: value }, 'id', integers);
        if (id !== undefined) expect(id).toMatch(PRINTABLE);
        if (typeof value === 'string') expect(id).toBe(PRINTABLE.test(value) ? value : undefined);
        else if (integers && typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) expect(id).toBe(String(value));
        else expect(id).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('integers only where allowed (oauth2), and never from an inherited or missing member', () => {
    expect(userIdFrom({ id: 4242 }, 'id', true)).toBe('4242');
    expect(userIdFrom({ id: 4242 }, 'id', false)).toBeUndefined();
    expect(userIdFrom({ id: Number.MAX_SAFE_INTEGER + 2 }, 'id', true)).toBeUndefined();
    expect(userIdFrom({}, 'toString', false)).toBeUndefined();
    expect(userIdFrom(JSON.parse('{"__proto__": "x"}') as Record<string, unknown>, '__proto__', false)).toBe('x');
    expect(userIdFrom({ sub: 'a' }, 'oid', false)).toBeUndefined();
  });
});
