// `authorization_server.enterprise_idps` (ID-JAG): checked once at load — https URLs (http only
// on a loopback host), each issuer once and never this AS itself — and the jwt-bearer grant of a
// configured client only for a confidential client, and only with an IdP to trust. (The example of
// docs/authorization-server.md is loaded by docs-examples.test.ts.)
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { offeredGrantTypes } from '../../src/authorization-server/clients/client-record.js';
import { tokenSubject } from '../../src/authorization-server/grants/jwt-bearer.js';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { JWT_BEARER_GRANT_TYPE } from '../../src/config/schema.js';
import type { AuthorizationServerConfig } from '../../src/config/types.js';

const ROUTE = 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\n';
const BASE = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\n';
const AGENT = `{ client_id: agent, client_secret: { env: AGENT_SECRET }, grant_types: ["${JWT_BEARER_GRANT_TYPE}"] }`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-idps-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(authorizationServer: string) {
  await writeFile(join(dir, 'gateway.yaml'), `${BASE}authorization_server:\n${authorizationServer}`);
  await writeFile(join(dir, 'a.yaml'), ROUTE);
  return loadConfig(dir, { AGENT_SECRET: 'agent-secret-0123456789' });
}

async function errors(authorizationServer: string): Promise<string[]> {
  const err = await load(authorizationServer).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

describe('authorization_server.enterprise_idps', () => {
  it('loads issuers and key sets as written; a client lists the jwt-bearer grant', async () => {
    const config = await load(`  enterprise_idps:\n    - { issuer: https://acme.okta.example, jwks_uri: https://acme.okta.example/oauth2/v1/keys }\n    - { issuer: http://127.0.0.1:8443, jwks_uri: http://localhost:8443/jwks }\n  clients: [${AGENT}]\n`);
    expect(config.authorizationServer?.enterpriseIdps).toEqual([
      { issuer: 'https://acme.okta.example', jwksUri: 'https://acme.okta.example/oauth2/v1/keys' },
      { issuer: 'http://127.0.0.1:8443', jwksUri: 'http://localhost:8443/jwks' },
    ]);
    expect(config.authorizationServer?.clients?.[0]?.grantTypes).toEqual([JWT_BEARER_GRANT_TYPE]);
  });

  it('is empty by default, and the grant is then not offered', async () => {
    const config = await load('  enabled: true\n');
    expect(config.authorizationServer?.enterpriseIdps).toEqual([]);
    expect(offeredGrantTypes(config.authorizationServer!)).not.toContain(JWT_BEARER_GRANT_TYPE);
    expect(offeredGrantTypes({ enterpriseIdps: [{ issuer: 'https://idp.example', jwksUri: 'https://idp.example/jwks' }] })).toContain(JWT_BEARER_GRANT_TYPE);
  });

  it.each([
    ['plain http to a remote issuer', '{ issuer: http://idp.example, jwks_uri: https://idp.example/jwks }', /issuer: http:\/\/idp\.example must be https \(http only on a loopback host\)/],
    ['plain http to a remote jwks_uri', '{ issuer: https://idp.example, jwks_uri: http://10.0.0.5/jwks }', /jwks_uri: http:\/\/10\.0\.0\.5\/jwks must be https/],
    ['not a URL', '{ issuer: idp.example, jwks_uri: https://idp.example/jwks }', /issuer: expected an http\(s\) URL/],
    ['a fragment', '{ issuer: "https://idp.example#x", jwks_uri: https://idp.example/jwks }', /must not have a fragment/],
    ['no jwks_uri', '{ issuer: https://idp.example }', /jwks_uri/],
    ['an unknown key', '{ issuer: https://idp.example, jwks_uri: https://idp.example/jwks, audience: x }', /audience/],
    ['this AS itself', '{ issuer: "http://127.0.0.1:9000", jwks_uri: http://127.0.0.1:9000/jwks.json }', /an enterprise IdP is another issuer than this authorization server/],
  ])('refuses %s, with its line', async (_name, entry, message) => {
    const [issue, more] = await errors(`  enterprise_idps: [${entry}]\n`);
    expect(issue).toMatch(/^gateway\.yaml:4:\d+: authorization_server\.enterprise_idps\[0\]/);
    expect(issue).toMatch(message);
    expect(more).toBeUndefined();
  });

  it('refuses an issuer listed twice', async () => {
    const issues = await errors('  enterprise_idps:\n    - { issuer: https://idp.example, jwks_uri: https://idp.example/a }\n    - { issuer: https://idp.example, jwks_uri: https://idp.example/b }\n');
    expect(issues).toEqual(['gateway.yaml:6:17: authorization_server.enterprise_idps[1].issuer: https://idp.example is listed twice']);
  });

  it('refuses a jwt-bearer client without a secret (only confidential clients present assertions), or with no IdP to trust', async () => {
    const [publicClient] = await errors(`  enterprise_idps: [{ issuer: https://idp.example, jwks_uri: https://idp.example/jwks }]\n  clients: [{ client_id: agent, grant_types: ["${JWT_BEARER_GRANT_TYPE}"] }]\n`);
    expect(publicClient).toMatch(/^gateway\.yaml:5:\d+: authorization_server\.clients\[0\]: the jwt-bearer grant \(ID-JAG\) needs a client_secret/);
    const [noIdp, more] = await errors(`  clients: [${AGENT}]\n`);
    expect(noIdp).toMatch(/^gateway\.yaml:4:\d+: authorization_server\.clients\[0\]\.grant_types: \S+ needs authorization_server\.enterprise_idps: the IdPs whose assertions it accepts$/);
    expect(more).toBeUndefined();
  });
});

describe("the access token's subject", () => {
  const oidcLogin = (issuer: string, subjectClaim = 'sub') => ({ config: { login: { kind: 'oidc', issuer, clientId: 'gw', scopes: ['openid'], subjectClaim } } as unknown as AuthorizationServerConfig });
  const devLogin = { config: { login: { kind: 'dev' } } as unknown as AuthorizationServerConfig };

  it("is the asserted sub when the IdP is the one users sign in with (the same users), else namespaced by the IdP's issuer", () => {
    expect(tokenSubject(oidcLogin('https://acme.okta.example'), { issuer: 'https://acme.okta.example', subject: 'u1' })).toBe('u1');
    expect(tokenSubject(oidcLogin('https://login.example'), { issuer: 'https://acme.okta.example', subject: 'u1' })).toBe('https://acme.okta.example#u1');
    expect(tokenSubject(devLogin, { issuer: 'https://acme.okta.example', subject: 'alice' })).toBe('https://acme.okta.example#alice');
  });

  it('is namespaced when the login names its users by another claim (subject_claim: oid): the asserted sub is not that id', () => {
    expect(tokenSubject(oidcLogin('https://login.example/t/v2.0', 'oid'), { issuer: 'https://login.example/t/v2.0', subject: 'pairwise-sub' })).toBe('https://login.example/t/v2.0#pairwise-sub');
  });
});
