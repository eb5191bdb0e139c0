// `upstream_auth: { kind: user_oauth }` and `account_tokens` (DESIGN §8.1):
// what a file may say, what it resolves to, and each refusal with file:line.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { deriveKey } from '../../src/config/account-tokens.js';

const KEY = 'k'.repeat(44);
const BASE = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\n';
const FULL = `${BASE}authorization_server: { enabled: true }\naccount: { enabled: true }\naccount_tokens: { encryption_key: { env: TOKENS_KEY } }\n`;
const ROUTE = 'path: /gh/mcp\nupstream: https://mcp.example.com/mcp\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-user-oauth-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(gatewayYaml: string, route: string, env: NodeJS.ProcessEnv = { TOKENS_KEY: KEY }) {
  await writeFile(join(dir, 'gateway.yaml'), gatewayYaml);
  await writeFile(join(dir, 'a.yaml'), route);
  return loadConfig(dir, env);
}

async function errors(gatewayYaml: string, route: string, env?: NodeJS.ProcessEnv): Promise<string[]> {
  const err = await load(gatewayYaml, route, env).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

describe('upstream_auth kind user_oauth', () => {
  it('resolves discovery defaults: resource is the upstream URL, resource sent, no scopes', async () => {
    const config = await load(FULL, `${ROUTE}upstream_auth: { kind: user_oauth }\n`);
    expect(config.routes[0]!.upstreamAuth).toEqual({ kind: 'user_oauth', scopes: [], resource: 'https://mcp.example.com/mcp', sendResource: true });
    expect(config.accountTokens?.keys).toEqual([deriveKey(KEY)]);
  });

  it('resolves explicit endpoints and a client secret (GitHub)', async () => {
    const route = `${ROUTE}upstream_auth:\n  kind: user_oauth\n  authorization_endpoint: https://github.com/login/oauth/authorize\n  token_endpoint: https://github.com/login/oauth/access_token\n  client_id: Iv1.abc\n  client_secret: { env: GH }\n  scopes: [repo, 'read:org']\n  send_resource: false\n`;
    const config = await load(FULL, route, { TOKENS_KEY: KEY, GH: 's3cret' });
    expect(config.routes[0]!.upstreamAuth).toMatchObject({
      endpoints: { authorization: 'https://github.com/login/oauth/authorize', token: 'https://github.com/login/oauth/access_token' },
      clientId: 'Iv1.abc',
      clientSecret: 's3cret',
      scopes: ['repo', 'read:org'],
      sendResource: false,
    });
  });

  it.each([
    ['one endpoint without the other', `${ROUTE}upstream_auth: { kind: user_oauth, client_id: a, authorization_endpoint: https://as.example/authorize }\n`, /^a\.yaml:3:\d+: upstream_auth\.authorization_endpoint: authorization_endpoint and token_endpoint go together/],
    ['a secret without a client id', `${ROUTE}upstream_auth: { kind: user_oauth, client_secret: { env: X } }\n`, /^a\.yaml:3:\d+: upstream_auth\.client_secret: client_secret needs client_id/],
    ['endpoints without a client id', `${ROUTE}upstream_auth: { kind: user_oauth, authorization_endpoint: https://as.example/a, token_endpoint: https://as.example/t }\n`, /^a\.yaml:3:\d+: upstream_auth\.client_id: an AS without metadata/],
    ['an unknown key', `${ROUTE}upstream_auth: { kind: user_oauth, scope: repo }\n`, /^a\.yaml:3:\d+: upstream_auth.*scope/],
  ])('refuses %s with its line', async (_name, route, message) => {
    const issues = await errors(FULL, route);
    expect(issues.some((i) => message.test(i)), issues.join('\n')).toBe(true);
  });

  it.each([
    ['without the account page', `${BASE}authorization_server: { enabled: true }\naccount_tokens: { encryption_key: { env: TOKENS_KEY } }\n`, ROUTE, /account: \{ enabled: true \}/],
    ['without account_tokens', `${BASE}authorization_server: { enabled: true }\naccount: { enabled: true }\n`, ROUTE, /needs account_tokens/],
    ['with tokens of another issuer', FULL, `${ROUTE}authorization_servers: [https://idp.example.com]\ntoken: { jwt: { issuer: https://idp.example.com } }\n`, /tokens from the built-in authorization server/],
  ])('is refused %s, at the kind', async (_name, gateway, route, message) => {
    const issues = await errors(gateway, `${route}upstream_auth: { kind: user_oauth }\n`);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^a\.yaml:\d+:\d+: upstream_auth\.kind: user_oauth needs/);
    expect(issues[0]).toMatch(message);
  });
});

describe('account_tokens', () => {
  it('takes a list to rotate: the first encrypts, ids differ', async () => {
    const config = await load(`${FULL.replace('{ encryption_key: { env: TOKENS_KEY } }', '{ encryption_key: [{ env: NEW }, { env: OLD }] }')}`, ROUTE, { NEW: 'n'.repeat(40), OLD: 'o'.repeat(40) });
    expect(config.accountTokens?.keys.map((k) => k.id)).toEqual([deriveKey('n'.repeat(40)).id, deriveKey('o'.repeat(40)).id]);
  });

  it('refuses a short key, a missing one, the same key twice, an inline one, each with its line', async () => {
    expect(await errors(FULL, ROUTE, { TOKENS_KEY: 'short' })).toEqual(['gateway.yaml:5:35: account_tokens.encryption_key: an encryption key is at least 32 characters (openssl rand -base64 32)']);
    expect(await errors(FULL, ROUTE, {})).toEqual(['gateway.yaml:5:35: account_tokens.encryption_key: environment variable TOKENS_KEY is not set or empty']);
    expect(await errors(FULL.replace('{ env: TOKENS_KEY }', '[{ env: TOKENS_KEY }, { env: TOKENS_KEY }]'), ROUTE)).toEqual([expect.stringMatching(/^gateway\.yaml:5:\d+: account_tokens\.encryption_key: the same key is listed twice$/)]);
    expect((await errors(FULL.replace('{ env: TOKENS_KEY }', KEY), ROUTE))[0]).toMatch(/^gateway\.yaml:5:\d+: account_tokens\.encryption_key/);
  });

  it('derives one id per key: distinct secrets never share an id, and the id does not reveal the key', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 32, maxLength: 80 }), fc.string({ minLength: 32, maxLength: 80 }), (a, b) => {
        fc.pre(a !== b);
        const [ka, kb] = [deriveKey(a), deriveKey(b)];
        expect(ka.id).not.toBe(kb.id);
        expect(ka.key).toHaveLength(32);
        expect(a.includes(ka.id)).toBe(false);
        expect(deriveKey(a)).toEqual(ka);
      }),
    );
  });
});
