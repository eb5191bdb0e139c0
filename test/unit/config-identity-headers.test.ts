/**
 * `identity_headers` checked at load: a corpus of header names (the ones HTTP,
 * MCP and the gateway own, ambiguous spellings, duplicates) and of sources,
 * each refused with file:line or accepted and lower-cased.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { gatewayYaml, jwtRoute } from '../helpers/security-fixtures.js';

const ISSUER = { issuer: 'https://idp.example.test', jwksUri: 'https://idp.example.test/jwks', alg: 'ES256' as const };
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-idh-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(identity_headers: unknown) {
  const sub = await mkdtemp(join(dir, 'c-'));
  await writeFile(join(sub, 'gateway.yaml'), stringify(gatewayYaml()));
  await writeFile(join(sub, 'route.yaml'), stringify(jwtRoute('/r/mcp', 'https://upstream.example.test/mcp', ISSUER, { identity_headers })));
  return loadConfig(sub, {});
}

const REFUSED_NAMES = ['Authorization', 'host', 'Cookie', 'Mcp-Session-Id', 'mcp-protocol-version', 'Content-Length', 'Transfer-Encoding', 'Proxy-Authorization', 'traceparent', 'DPoP', 'X_Forwarded_User', 'X-Forwarded-User ', 'X--User', '-X-User', 'X.User', 'Accept'];
const REFUSED_SOURCES = ['email', 'claims', 'claims.', 'token', 'claims.a b', 'sub.x', '${sub}'];

describe('identity_headers at load', () => {
  for (const name of REFUSED_NAMES) {
    it(`refuses the name ${JSON.stringify(name)}, at its line`, async () => {
      await expect(load({ [name]: 'sub' })).rejects.toThrow(/route\.yaml:\d+:\d+: identity_headers/);
    });
  }
  for (const source of REFUSED_SOURCES) {
    it(`refuses the source ${JSON.stringify(source)}`, async () => {
      await expect(load({ 'X-Forwarded-User': source })).rejects.toThrow(/identity_headers.*one of sub, iss, client_id, scope, or claims/);
    });
  }
  it('refuses a name given twice in two spellings', async () => {
    await expect(load({ 'X-User-Id': 'sub', 'x-user-id': 'iss' })).rejects.toThrow(/named twice/);
  });
  it('accepts the oauth2-proxy set and nested claims, names lower-cased', async () => {
    const config = await load({ 'X-Forwarded-User': 'sub', 'X-Forwarded-Email': 'claims.email', 'X-Forwarded-Groups': 'claims.groups', 'X-Roles': 'claims.realm_access.roles', 'X-Client': 'client_id' });
    expect(config.routes[0]!.identityHeaders).toEqual([
      { name: 'x-forwarded-user', from: ['sub'] },
      { name: 'x-forwarded-email', from: ['claims', 'email'] },
      { name: 'x-forwarded-groups', from: ['claims', 'groups'] },
      { name: 'x-roles', from: ['claims', 'realm_access', 'roles'] },
      { name: 'x-client', from: ['client_id'] },
    ]);
  });
});
