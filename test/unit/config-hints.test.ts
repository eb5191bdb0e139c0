import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { issuerWithTrailingSlash, upstreamWithoutPath } from '../../src/config/hints.js';
import { loadConfig } from '../../src/config/load.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-hints-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('warnings for valid settings that are almost always a mistake', () => {
  it('warns, located, about an upstream without a path and an issuer with a trailing slash', async () => {
    await writeFile(join(dir, 'gateway.yaml'), 'public_url: https://mcp.example.com\n');
    await writeFile(
      join(dir, 'a.yaml'),
      'path: /a/mcp\nupstream: http://127.0.0.1:3000\nauthorization_servers: [https://idp.example.com/]\ntoken: { jwt: { issuer: https://idp.example.com/ } }\n',
    );
    const config = await loadConfig(dir, {});
    expect(config.warnings).toEqual([
      `${join(dir, 'a.yaml')}:2:11: upstream: http://127.0.0.1:3000 has no path: requests go to exactly this URL, and an MCP endpoint almost always has one (such as /mcp)`,
      `${join(dir, 'a.yaml')}:4:25: token.jwt.issuer: https://idp.example.com/ ends with a slash: it must equal the tokens' iss exactly (most IdPs write none); check --online compares it with the issuer's metadata`,
    ]);
  });

  it("warns about the built-in AS's login issuer with a trailing slash", async () => {
    await writeFile(join(dir, 'gateway.yaml'), 'public_url: https://mcp.example.com\nauthorization_server:\n  login: { kind: oidc, issuer: https://idp.example.com/, client_id: gw }\n');
    await writeFile(join(dir, 'a.yaml'), 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\n');
    expect((await loadConfig(dir, {})).warnings).toEqual([expect.stringContaining('authorization_server.login.issuer: https://idp.example.com/ ends with a slash')]);
  });

  it('says nothing about an upstream with a path or an issuer without a slash', () => {
    expect(upstreamWithoutPath('http://127.0.0.1:3000/mcp')).toBeUndefined();
    expect(upstreamWithoutPath('http://127.0.0.1:3000/?x=1')).toBeDefined();
    expect(issuerWithTrailingSlash('https://idp.example.com/realms/a')).toBeUndefined();
  });

  it('names no credentials of the URL', () => {
    expect(upstreamWithoutPath('https://user:hunter2@up.example.com')).not.toContain('hunter2');
  });
});
